package adaptive

// Refusals that are not a quota's (controller.go). A refusal is a sign of a
// quota only when refusals grow with the rate. Two kinds do not: a share of
// creates refused whatever the rate (a front end shedding load, another job
// on the project's quota), and a burst of refusals that ends on its own. A
// rate that falls at every refusal of either kind ratchets down to its floor.
//
// Noise. Slow start doubles its limit every round trip, so a quota it runs
// into refuses a large share of its creates within a round trip. A refusal
// therefore ends slow start only once the refusals among the answers since it
// are clearly more than startNoise of them (startAnswer); a steady share of
// refusals below that lets slow start run on to the cap. Before anything was
// accepted, refusals do not end slow start at all: it sends no more than its
// floor, and refusals of a queue's first creates say nothing of a rate. Once a
// queue is paced, every refusal of a create sent after the last decrease
// lowers the rate as before: there the processes that share a quota see each
// other's excess as a steady share of refusals that their own decreases do
// not lower, just as noise is, and a rule that let such a share through would
// let them run over the quota together by that share.
//
// Burst. A decrease begins a spell of decreases; while no create sent after it
// has been accepted, a refusal lowers the rate at most once per spellGap, so a
// burst costs one decrease. When the answers since the spell's first refusal
// are one run of at least burstMinRejected refusals followed by burstClean
// acceptances, and the spell began from a settled state (a rate that went
// growthDoublings*growthDoubling without a decrease), the spell is undone: the
// control is set back to what it was before. A quota a growing rate runs into
// gives acceptances among its refusals, and a start of many processes is not
// settled.

import (
	"math"
	"time"
)

const (
	// startNoise and startWindow: slow start ends once the refusals among
	// the answers since its first refusal not yet decided are clearly more
	// than startNoise of them (beyond); a window that holds startWindow
	// answers, or as many as the limit if more, without that is forgotten.
	startNoise  = 0.15
	startWindow = 32
	// startZ is how many standard deviations above the count startNoise
	// explains slow start's refusals must be.
	startZ = 4.0
	// suspectZ is how many standard deviations above that count the
	// refusals stop slow start's growth until the window is decided.
	suspectZ = 2.0
	// burstMinRejected and burstClean: a burst is at least burstMinRejected
	// refusals in a row, then burstClean acceptances in a row.
	burstMinRejected = 4
	burstClean       = 4
	// collapseShare is how far below the rate slow start ended at a paced
	// rate may fall before slow start starts again (restartIfCollapsed).
	collapseShare = 0.125
	// minSpellGap is the shortest gap between decreases that ends a spell:
	// the gap is stormRounds round trips, at least this.
	minSpellGap = 250 * time.Millisecond
)

// round counts answers.
type round struct{ accepted, rejected int }

// spell is a queue's current spell of decreases.
type spell struct {
	active bool
	// saved is the queue's control before the spell's first decrease.
	saved control
	// settled is true when the spell began from a rate long without a
	// decrease; burst stays true while the answers since its first refusal
	// are one run of refusals (run of them) followed by acceptances only
	// (clean of them).
	settled, burst bool
	run, clean     int
}

// spellGap is the longest gap between two decreases of one spell.
func (q *queueLimit) spellGap() time.Duration { return max(stormRounds*q.rtt, minSpellGap) }

// beyond reports whether k refusals among n answers are clearly more than
// share p explains: z standard deviations of the count over its
// expectation, plus one (a handful of answers holds a refusal or two by
// chance far more often than the normal approximation says).
func beyond(k, n int, p, z float64) bool {
	e := p * float64(n)
	return float64(k) > e+z*math.Sqrt(e)+1
}

// material reports whether a refusal at time at, of a create sent after the
// last decrease, lowers the rate: in slow start, once something was accepted
// and the refusals in its window are clearly more than startNoise; paced,
// unless the spell's burst holds it (no acceptance since the last decrease,
// within spellGap of it).
func (q *queueLimit) material(at time.Time) bool {
	if s := &q.spell; s.active && s.burst && (s.settled || s.saved.rate == 0) && q.postAccepted == 0 && at.Sub(q.decreasedAt) < q.spellGap() {
		return false
	}
	if q.rate > 0 {
		return true
	}
	w := q.startWindow
	return !q.accepted.first.IsZero() && beyond(w.rejected, w.accepted+w.rejected, startNoise, startZ)
}

// startAnswer counts an answer in slow start's window.
func (q *queueLimit) startAnswer(rejected bool) {
	w := &q.startWindow
	if q.rate > 0 || q.accepted.first.IsZero() || !rejected && w.rejected == 0 {
		return
	}
	if rejected {
		w.rejected++
	} else {
		w.accepted++
	}
	if n := w.accepted + w.rejected; n >= max(startWindow, int(q.limit)) && !beyond(w.rejected, n, startNoise, startZ) {
		*w = round{}
	}
}

// startSuspect reports whether slow start's window holds somewhat more than
// startNoise of refusals, not yet clearly more: its limit does not grow
// meanwhile, so a quota that the test needs a few more answers to tell does
// not see the limit double past it in the while.
func (q *queueLimit) startSuspect() bool {
	w := q.startWindow
	return beyond(w.rejected, w.accepted+w.rejected, startNoise, suspectZ)
}

// spellDecreased records a decrease at time at that changed control before:
// it starts a spell, unless it comes within spellGap of the last decrease or
// during a run of refusals the current spell's burst holds.
func (q *queueLimit) spellDecreased(before control, at time.Time) {
	s := &q.spell
	if s.active && (at.Sub(before.decreasedAt) <= q.spellGap() || s.burst && s.clean == 0) {
		return
	}
	settled := before.rate == 0 || at.Sub(before.decreasedAt) >= growthDoublings*growthDoubling
	*s = spell{active: true, saved: before, settled: settled, burst: true, run: 1}
}

// restartIfCollapsed starts slow start again at time at, from the paced
// rate's pace, once that rate has fallen below collapseShare of the rate slow
// start ended at (exitRate). Slow start ends on noise now and then (a run of
// refusals that its test takes for a quota's), and once paced, every refusal
// lowers the rate: under a steady share of refusals the rate then falls and
// falls. Slow start, which goes on through that share, takes it back up. A
// quota that the processes sharing it split ever more ways, or that shrank,
// costs one more run into it, and slow start ends again at a rate this one
// does not fall so far below.
func (q *queueLimit) restartIfCollapsed(at time.Time) {
	if q.exitRate == 0 || q.rate >= collapseShare*q.exitRate || q.rtt == 0 {
		return
	}
	// Slow start's floor comes on top of its limit (slowStartLimit).
	q.control = control{limit: max(q.rate-initialRate, 0) * q.rtt.Seconds()}
	q.exitRate = 0
	q.spell = spell{}
	q.startWindow = round{}
	q.grown = at
}

// rejectedInSpell counts a refusal in the current spell's burst.
func (q *queueLimit) rejectedInSpell() {
	if s := &q.spell; s.active && s.burst {
		if s.clean > 0 {
			s.burst = false
		} else {
			s.run++
		}
	}
}

// acceptedInSpell counts an acceptance at time at in the current spell's
// burst, and undoes a settled spell whose burst has ended.
func (q *queueLimit) acceptedInSpell(at time.Time) {
	s := &q.spell
	if !s.active || !s.burst {
		return
	}
	if s.run < burstMinRejected {
		s.burst = false
		return
	}
	if s.clean++; s.clean >= burstClean && s.settled {
		q.control = s.saved
		q.grown, q.next = at, at
		q.spell = spell{}
		q.roundAccepted, q.roundRejected = 0, 0
		q.postAccepted, q.postRejected = 0, 0
		q.roundStart = q.sent
	}
}
