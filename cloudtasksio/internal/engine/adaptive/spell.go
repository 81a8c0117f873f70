package adaptive

// Refusals that are not a quota's. A refusal is a sign of a quota only when
// refusals grow with the rate. Two kinds do not. One is a share of creates
// refused whatever the rate: a front end shedding load, another job on the
// project's quota. The other is a burst of refusals that ends on its own. A
// rate that falls at every refusal of either kind ratchets down to its floor.
//
// Noise. Slow start doubles its limit every round trip, so a quota it runs
// into refuses a large share of its creates within a round trip. Slow start
// therefore ends only once the refusals among the answers since the first
// undecided one are clearly more than startNoise of them (startAnswer). A
// steady share below that lets slow start run on to the cap. Refusals before
// anything was accepted never end slow start. It sends no more than its
// floor then, and refusals of a queue's first creates say nothing of a rate.
//
// Once paced, every refusal of a create sent after the last decrease lowers
// the rate. Processes that share a quota see each other's excess as a steady
// share of refusals, which their own decreases do not lower, just as noise.
// A rule that let such a share through would let them run over the quota
// together by that share.
//
// Burst. A decrease begins a spell of decreases. While no create sent after
// it has been accepted, further refusals within spellGap of it do not lower
// the rate, so a burst costs one decrease. This holds only for a spell that
// began from slow start or from a settled rate, one that went
// growthDoublings*growthDoubling without a decrease. A start of many
// processes is not settled. The spell is undone, its control set back, once
// the answers since its first refusal are one run of at least
// burstMinRejected refusals followed by burstClean acceptances. A quota that
// a growing rate runs into gives acceptances among its refusals.
//
// Collapse. Slow start now and then ends on noise, and a paced rate then
// falls at every refusal of a steady share. Below collapseShare of the rate
// slow start ended at, slow start starts again (restartIfCollapsed).

import (
	"math"
	"time"
)

const (
	// startNoise and startWindow: slow start ends once its window's
	// refusals are clearly more than startNoise of its answers (beyond). The
	// window holds the answers since the first undecided refusal. It is
	// forgotten once it holds startWindow answers, or the limit if more,
	// without that.
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
	// decrease. burst stays true while the answers since its first refusal
	// are one run of refusals (run of them), then acceptances only (clean of
	// them).
	settled, burst bool
	run, clean     int
}

// spellGap is the longest gap between two decreases of one spell.
func (q *queueLimit) spellGap() time.Duration { return max(stormRounds*q.rtt, minSpellGap) }

// beyond reports whether k refusals among n answers are clearly more than
// share p explains: more than z standard deviations over the expected
// count, plus one. The one is there because a handful of answers holds a
// refusal or two by chance far more often than the normal approximation
// says.
func beyond(k, n int, p, z float64) bool {
	e := p * float64(n)
	return float64(k) > e+z*math.Sqrt(e)+1
}

// material reports whether a refusal at time at, of a create sent after the
// last decrease, lowers the rate. In slow start it does once something was
// accepted and the window's refusals are clearly more than startNoise.
// Paced, it does unless the spell's burst holds it: no acceptance since the
// last decrease, within spellGap of it.
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
// startNoise of refusals, but not yet clearly more. The limit does not grow
// meanwhile. The test may need a few more answers to tell a quota, and the
// limit must not double past it in the while.
func (q *queueLimit) startSuspect() bool {
	w := q.startWindow
	return beyond(w.rejected, w.accepted+w.rejected, startNoise, suspectZ)
}

// spellDecreased records a decrease at time at that changed control before.
// It starts a spell, unless it comes within spellGap of the last decrease,
// or during a run of refusals that the current spell's burst holds.
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
// start ended at (exitRate). Slow start ends on noise now and then: a run of
// refusals that its test takes for a quota's. Once paced, every refusal
// lowers the rate, so under a steady share of refusals the rate falls and
// falls. Slow start goes on through that share and takes the rate back up.
// A quota that shrank, or that its processes split ever more ways, costs one
// more run into it. Slow start then ends at a rate this one does not fall so
// far below.
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
