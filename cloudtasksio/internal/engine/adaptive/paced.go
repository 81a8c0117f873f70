package adaptive

// The paced phase (doc.go): how the rate grows while creates succeed, how it
// probes for room the quota did not have, and how a refusal lowers it.

import (
	"math"
	"time"
)

// startPaced starts a queue no create was sent to paced at rate, at time at,
// instead of in slow start (the engine's Options.StartRate). The rate counts
// as the one the queue last refused (the ceiling). So a rate set below what
// the queue takes is probed past once its creates have succeeded for a
// quiet spell. Growth starts as gently as just after a decrease: the caller
// named this rate, and the first seconds should not run past it. The gentle
// start counts from the first create the rate holds back (bindStart), so a
// queue that starts with a trickle and floods later grows from the flood.
func (q *queueLimit) startPaced(rate float64, at time.Time) {
	q.rate = max(rate, minRate)
	q.unit, q.ceiling = q.rate, q.rate
	q.next, q.pacedAt, q.grown, q.decreasedAt = at, at, at, at
	q.startedPaced = true
	q.share = q.rate
}

// bindStart restarts the gentle growth of a queue startPaced started, at
// time at of the first create its rate holds back, when no rejection has
// come yet.
func (q *queueLimit) bindStart(at time.Time) {
	if q.startedPaced && q.boundAt.IsZero() && q.decreases == 0 {
		q.grown, q.decreasedAt = at, at
	}
}

// softenDecrease bounds a decrease of a queue started at a start rate (its
// share). before is the rate the decrease lowered; mostlyRejected says
// whether most answers since the last decrease were refusals, at least
// stormMinRejected. It reports whether it raised the rate the decrease set.
//
// The processes that share the quota were told their shares. A refusal near
// a share says that some of them grew past theirs, or that the shares add up
// to more than the quota. One process's answers cannot tell the two apart.
// So every process treats its refusals alike: a share set a little too high
// comes down in all of them at once, and processes at their shares stay near
// them. Unbounded, the process whose answers held most of the refusals
// would come down furthest, and finish its part of the work long after its
// peers.
//
// The decrease therefore goes no further than a little below the smaller of
// before and the share. That is loneRejectionFactor below it after one
// refusal since the last decrease, which processes at their shares meet now
// and then. It is decreaseFactor below it after more, most often the rest of
// a round trip that ran over the quota. A storm does not halve the rate here,
// nor does a low reading of what the queue accepted set it. A rate far above
// the share comes down as any paced rate does, but not below that bound.
//
// A share far too high (a start rate at the whole quota, a quota cut to a
// quarter) makes most of every round's answers refusals. At the
// shareStormLimit-th such decrease in a row the share is given up, and the
// queue's decreases go on as if it had none. A storm among them halves the
// rate: the storms the share held back did not spend the spell's halving
// (decrease). Growth stays a share of the start rate, as for any queue
// started at one.
func (q *queueLimit) softenDecrease(before float64, mostlyRejected bool) (raised bool) {
	if q.share == 0 {
		return false
	}
	if !mostlyRejected {
		q.shareStorms = 0
	} else if q.shareStorms++; q.shareStorms >= shareStormLimit {
		q.share = 0
		return false
	}
	keep := decreaseFactor
	if q.roundRejected <= 1 {
		keep = loneRejectionFactor
	}
	bound := min(before, q.share) * keep
	if q.rate >= bound {
		return false
	}
	q.rate = bound
	return true
}

// holdsShare reports whether a queue started at a start rate holds its rate
// near it, given the time since its last decrease. The hold spans the share
// to shareHoldBand above it, until growthDoublings*growthDoubling have
// passed without a decrease. There growth adds growthFloor a second only.
//
// The shares add up to the quota, so growth past one finds room only where
// peers left it, which a quiet spell shows. Processes that all grew past
// their shares at the usual pace would run over the quota together. Its
// bucket hides that until it is empty, and then every process is refused at
// once. Below the share, after decreases, the rate grows back at the usual
// pace. Past the band, a start rate set below the share grows as any
// queue's. After the quiet spell, growth (gentle again, see grow) and the
// probe take up a quota the peers stopped using.
func (q *queueLimit) holdsShare(quiet time.Duration) bool {
	return q.share > 0 && q.rate >= q.share && q.rate <= q.share*(1+shareHoldBand) &&
		quiet < growthDoublings*growthDoubling
}

// grow raises the paced rate after a success at time at of a create that the
// rate held back.
func (q *queueLimit) grow(at time.Time) {
	step := min(max(at.Sub(q.grown), 0), maxGrowthStep)
	quiet := min(max(at.Sub(q.decreasedAt), 0), growthDoublings*growthDoubling)
	if q.holdsShare(quiet) {
		q.rate += growthFloor * step.Seconds()
		q.grown, q.heldAt = latest(q.grown, at), latest(q.heldAt, at)
		return
	}
	// The pace doubles with the time since the last decrease, or since the
	// hold near the share ended if that is later. Every process at its share
	// leaves its hold at about the same time. At the full pace at once they
	// would run far past the quota together, so past a hold growth starts
	// as gently as after a decrease.
	doubling := quiet
	if q.heldAt.After(q.decreasedAt) {
		doubling = min(max(at.Sub(q.heldAt), 0), growthDoublings*growthDoubling)
	}
	g := growthPerSecond * math.Exp2(doubling.Seconds()/growthDoubling.Seconds())
	if q.rtt > 0 {
		g = max(growthPerSecond, min(g, maxGrowthPerRound/q.rtt.Seconds()))
	}
	// The unit, but at most twice the rate. A process that paced the queue
	// alone before others joined set its unit with the whole quota to
	// itself. Unbounded, it would grow several times as fast as they do,
	// and keep a larger share for good. The bound applies here, not to the
	// unit: a process that a deep decrease left below half its unit grows
	// by the whole unit again once it is back above half.
	base := min(q.unit, 2*q.rate)
	if quiet >= growthDoublings*growthDoubling {
		base = max(base, q.rate)
	}
	// Only a create the rate held back grows it. Once the engines cannot
	// send faster (their MaxInFlight holds them back, or the work ran out),
	// no create waits for its slot, and the rate stops growing.
	q.rate += max((base*g+growthFloor)*step.Seconds(), q.probe(at, step))
	q.grown = latest(q.grown, at)
}

// decrease lowers the queue's rate after a refusal at time at, ending slow
// start when it is the first.
func (q *queueLimit) decrease(at time.Time) {
	before := q.control
	if q.rate == 0 {
		// Read over at least firstReadSpan: the queue's bucket, which hid
		// the quota while slow start ran into it, gave its tokens just
		// before, on top of the quota. But read nothing from before the busy
		// spell that ran into the quota: then the process had nothing to
		// send.
		accepted := q.accepted.perSecond(at, max(q.rtt, min(firstReadSpan, at.Sub(q.busySince))/acceptedRounds))
		// The first refusal: pace at the rate the queue accepted. With
		// nothing accepted yet (another process took the quota first),
		// start from half of what was in flight over a round trip.
		rate := accepted
		if rate == 0 {
			// Over the round trip, or over the time since slow start's
			// first create (at most maxUnanswered) if that is longer. A
			// refusal that comes back at once measures no real round trip.
			over := q.rtt
			if !q.started.IsZero() {
				over = max(over, min(at.Sub(q.started), maxUnanswered))
			}
			rate = float64(q.inFlight+1) / 2 / max(over, time.Millisecond).Seconds()
		}
		q.rate = max(rate*setPoint, minRate)
		q.unit = q.rate
		q.ceiling = max(rate, minRate)
		q.next, q.pacedAt = at, at
		q.exitRate = q.rate
	} else {
		before := q.rate
		q.ceiling = q.rate
		q.rate *= decreaseFactor
		// The accepted rate says what the quota lets through only if the
		// rate held creates back lately. Otherwise it is what the process had
		// to send, and a quiet process must not fall to it.
		recent := max(acceptedRounds*q.rtt, acceptedMinSpan)
		// A round with no acceptance has no rate to read: the reading would
		// reach back across the refusals. Nor has a round of mostly refusals
		// whose reading holds fewer than acceptedMinCount acceptances. A
		// handful among refusals says the queue still refuses nearly
		// everything (an outage, a spent quota). The rate read from them
		// would be far below what the process comes back to.
		if q.roundAccepted > 0 && !q.boundAt.IsZero() && at.Sub(q.boundAt) <= recent {
			accepted, n := q.accepted.read(at, q.rtt, q.pacedAt)
			few := n < acceptedMinCount && q.roundRejected > q.roundAccepted
			if accepted > 0 && !few {
				q.rate = min(q.rate, accepted*setPoint)
			}
		}
		mostlyRejected := q.roundRejected > q.roundAccepted && q.roundRejected >= stormMinRejected
		since := at.Sub(q.decreasedAt)
		storm := since > 0 && since <= max(stormRounds*q.rtt, stormMinSpan) && mostlyRejected
		if storm && !q.stormSpell {
			// Most answers since the last decrease, a few round trips ago,
			// were refusals. The process sends several times what the queue
			// takes from it: a start with other processes, or a burst. What
			// the queue accepted since is its share, and a tenth a round
			// trip would take many round trips to get down to it. However
			// few the acceptances are, the process comes down to them, or to
			// half: a process refused nearly everything comes down furthest.
			// The span is short and not empty (storm): over a longer one a
			// pause would count as time the queue took nothing, over none
			// there is no rate to read.
			//
			// A storm halves once per spell of storms; the rounds after it
			// come down a tenth each, or to the accepted rate. Halving every
			// round of a queue that refuses everything for a while would
			// leave far less than the share the process comes back to. At a
			// start, processes that halved more often than their peers would
			// keep a small share for the rest of the run.
			accepted := float64(q.roundAccepted) / since.Seconds()
			q.rate = min(q.rate, max(stormFloor*q.ceiling, setPoint*accepted))
		}
		q.rate = max(q.rate, minRate)
		// A storm whose halving the start rate held back has not spent the
		// spell's: the storm that gives the start rate up halves.
		raised := q.softenDecrease(before, mostlyRejected)
		q.stormSpell = storm && !raised
		if at.Sub(q.decreasedAt) >= growthDoublings*growthDoubling {
			// The end of a long spell without a decrease: the rate grew into
			// a quota others left, and this is what it found.
			q.unit = q.rate
		}
	}
	q.grown, q.decreasedAt = latest(q.grown, at), at
	q.probeAge = 0
	q.roundAccepted, q.roundRejected = 0, 0
	q.postAccepted, q.postRejected = 0, 0
	q.startWindow = round{}
	q.roundStart = q.sent
	q.decreases++
	q.spellDecreased(before, at)
	q.restartIfCollapsed(at)
}

// probe is what a success at time at adds to the paced rate, over step of
// growth. It is 0 until growthDoublings*growthDoubling have passed without a
// decrease and the rate is probeMargin above the rate the queue last
// refused. The quota then has room it had not at that refusal: the processes
// that shared it finished or scaled down, or it grew. The quiet spell comes
// first because processes that share a quota take turns at its decreases. A
// rate past its ceiling in a peer's turn has found no new room.
//
// The rate then grows by a share of itself per round (a round trip, at
// least slowStartRound). The share starts at maxGrowthPerRound and doubles
// with every round of growth credited to it, up to probeGrowth. Time in
// which no create was held back earns no credit, so a lull does not bring
// the probe back at full strength. A process left alone with a quota takes
// it up within seconds. A rate that a peer's decrease let past its ceiling
// is refused again while its probe is still gentle.
func (q *queueLimit) probe(at time.Time, step time.Duration) float64 {
	if q.ceiling == 0 || q.rate <= q.ceiling*(1+probeMargin) || at.Sub(q.decreasedAt) < growthDoublings*growthDoubling {
		return 0
	}
	round := max(q.rtt, slowStartRound)
	share := min(probeGrowth, maxGrowthPerRound*math.Exp2(q.probeAge.Seconds()/round.Seconds()))
	q.probeAge += step
	return q.rate * share * step.Seconds() / round.Seconds()
}

// latest is the later of a and b: answers are taken in the order they reach
// the lock, not always in the order they came back.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
