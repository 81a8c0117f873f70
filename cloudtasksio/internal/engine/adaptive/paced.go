package adaptive

// The paced phase of adaptive concurrency (controller.go): how the rate grows
// while creates succeed, how it probes for room the quota did not have, and
// how a rejection lowers it.

import (
	"math"
	"time"
)

// startPaced starts a queue no create was sent to paced at rate, at time at,
// instead of in slow start (Options.StartRate). The rate is taken as the one
// the queue last refused (the ceiling), so that a rate set below what the
// queue takes is probed past once creates have succeeded at it for a few
// seconds (growthDoublings*growthDoubling without a decrease, and the rate a
// fifth past it), and growth starts as gently as just after a decrease: the
// caller named this rate, and the first seconds should not run past it.
// That gentle start counts from the first create the rate holds back
// (bindStart), not from here: a queue that starts with a trickle and floods
// later starts its growth at the flood.
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
// share), before being the rate the decrease lowered and mostlyRejected
// whether most answers since the last decrease were rejections (at least
// stormMinRejected). The processes that share the quota were told their
// shares, and a rejection near a share says that some of them grew past
// theirs, or that the shares add up to more than the quota (more processes
// than were counted, a quota that shrank); one process's answers cannot tell
// the two apart. So the decrease takes the rate no further than a little below
// the smaller of before and the share: loneRejectionFactor below it when one
// create was rejected since the last decrease, which is what processes at
// their shares meet now and then, whichever of them grew past its own; and
// decreaseFactor below it when more were, most often the rest of a round trip
// that ran over the quota (rejections of creates sent before the last
// decrease count here too): not to half at a storm, nor to a low reading of
// what the queue accepted. A rate far above the share comes down as any
// paced rate does, to no less than a tenth below the share.
//
// Without a bound (the decreases of a queue in slow start) the process whose
// answers happened to hold most of the rejections came down furthest and,
// with its equal part of the work, ended long after the others, which left
// their shares unused at the end. A hard floor a tenth below the share, given
// up after three decreases near it in a row, was given up by processes at
// their shares too (a stray rejection about every half second, the rate not
// back at the share in between), and kept by a share set a fifth too high
// once some processes had given theirs up and come down. Here every process
// treats its rejections alike, so a share set a little too high comes down in
// every process at once, and processes at their shares stay near them.
//
// A share far too high (a start rate at the whole quota, a quota cut to a
// quarter) makes most of every round's answers rejections. At the
// shareStormLimit-th such decrease in a row the share is given up, and that
// decrease and the ones after it go as for a queue without one (a storm among
// them halves the rate: the storms the share held back did not count as the
// spell's halving, see decrease). Held to a tenth a round trip, such a process
// kept rejections coming long after its rate had come down. (Growth stays a
// share of the start rate, at most twice the rate, as for any queue started at
// one.) It reports whether it raised the rate the decrease had set.
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
// near it, quiet after its last decrease: from the share to shareHoldBand
// above it, until growthDoublings*growthDoubling have passed without a
// decrease. There growth adds growthFloor a second only. The processes were
// told their shares, and the shares add up to the quota: growth past one
// finds room only where peers left it, which a quiet spell shows. Growing
// there as any queue grows after a decrease (a pace that doubles every
// growthDoubling), eight processes at their shares ran a sixth past the quota
// by the time the queue's bucket was empty (the bucket hides the quota until
// then), and a round trip of rejections came back to each of them at once;
// the creates those rejections sent back to retry ended a short job one or
// two round trips after the rest. Below the share (after decreases) the rate
// grows back at that pace, and past the band (a start rate below the share,
// grown past it) it grows as any queue's; after the quiet spell, growth
// (starting again from its gentle pace, see grow) and the probe take up a
// quota the peers stopped using.
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
	// hold near the share ended if that is later: past a hold, growth starts
	// as gently as after a decrease. (Every process at its share ends its
	// hold at about the same time; at the full pace at once, together they
	// ran far past the quota within a round trip or two.)
	doubling := quiet
	if q.heldAt.After(q.decreasedAt) {
		doubling = min(max(at.Sub(q.heldAt), 0), growthDoublings*growthDoubling)
	}
	g := growthPerSecond * math.Exp2(doubling.Seconds()/growthDoubling.Seconds())
	if q.rtt > 0 {
		g = max(growthPerSecond, min(g, maxGrowthPerRound/q.rtt.Seconds()))
	}
	// The unit, but at most twice the rate: a process that paced
	// the queue alone before others joined it (its first rejection
	// came while a bucket emptied, with the whole quota to itself)
	// would otherwise grow by several times as much as they do and
	// keep a larger share for good. Bounded here, not in the unit,
	// so that a process a deep decrease left below half its unit
	// grows back by the whole unit once it is above half again.
	base := min(q.unit, 2*q.rate)
	if quiet >= growthDoublings*growthDoubling {
		base = max(base, q.rate)
	}
	// Only a create the rate held back grows it: once the engines cannot
	// send faster (their MaxInFlight holds them back, or there is no more
	// work), no slot lies ahead of its create and the rate stops growing.
	q.rate += max((base*g+growthFloor)*step.Seconds(), q.probe(at, step))
	q.grown = latest(q.grown, at)
}

// decrease lowers the queue's rate after a rejection at time at, ending slow
// start when it is the first.
func (q *queueLimit) decrease(at time.Time) {
	before := q.control
	if q.rate == 0 {
		// Read over at least firstReadSpan: the queue's bucket, which
		// hid the quota while slow start ran into it, gave its tokens
		// just before, on top of the quota. But not over time before the
		// busy spell that ran into the quota (a burst after an idle
		// spell): in that time the process had nothing to send.
		accepted := q.accepted.perSecond(at, max(q.rtt, min(firstReadSpan, at.Sub(q.busySince))/acceptedRounds))
		// The first rejection: pace at the rate the queue accepted. Nothing
		// accepted yet (another process took the quota first): start from
		// half of what was in flight over a round trip.
		rate := accepted
		if rate == 0 {
			// Over the round trip, or the time since slow start's first
			// create (at most maxUnanswered) if that is longer: a rejection
			// that comes back at once measures a round trip of a
			// millisecond.
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
		// The accepted rate says what the quota lets through only if the rate
		// held creates back lately; otherwise it is what the process had to
		// send, and a quiet process must not fall to it.
		recent := max(acceptedRounds*q.rtt, acceptedMinSpan)
		// A round trip in which the queue accepted nothing at all (it
		// refuses everything for a while) has no rate to read: the reading
		// would reach back across the refusals for its acceptances. Nor
		// has one of mostly rejections whose reading holds fewer than
		// acceptedMinCount acceptances over the last second: a handful
		// among refusals says the queue still refuses nearly everything
		// (an outage, a spent quota), and the rate read from them, a few
		// creates a second, is far below what the process comes back to.
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
			// were rejections: the process sends several times what the
			// queue takes from it (a start with other processes, a burst).
			// What the queue accepted since then is its share; a tenth a
			// round trip would take many round trips of rejections to get
			// down to it. However few the acceptances are: a process the
			// queue refused nearly everything comes down furthest (to
			// half), not by a tenth. (Over a longer span, a pause or an
			// idle spell would count as time in which the queue took
			// nothing; over no span at all, answers that came back in the
			// instant of the last decrease, there is no rate to read.)
			accepted := float64(q.roundAccepted) / since.Seconds()
			q.rate = min(q.rate, max(stormFloor*q.ceiling, setPoint*accepted))
		}
		// Once per spell of such decreases: the round trips after the first
		// come down a tenth each (or to the accepted rate), however few
		// acceptances they have. Halving every round trip of a queue that
		// refuses everything for a while (its quota spent, an outage) would
		// leave a few creates a second, far below the share the process
		// comes back to; and at a start of many processes, the processes
		// halved twice or three times while others halved once kept a
		// small share for the rest of the run.
		q.rate = max(q.rate, minRate)
		// A storm whose halving the start rate held back has not spent
		// the spell's: the storm that gives the start rate up halves.
		raised := q.softenDecrease(before, mostlyRejected)
		q.stormSpell = storm && !raised
		if at.Sub(q.decreasedAt) >= growthDoublings*growthDoubling {
			// The end of a long spell without a decrease: the rate grew
			// into a quota others left, and this is what it found.
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
// growth, once growthDoublings*growthDoubling have passed without a decrease
// and the rate has passed probeMargin above the rate the queue last refused;
// 0 before. The quota then has room it had not at that refusal: the processes
// that shared it finished or scaled down, or it grew. (Processes that share a
// quota take turns at its decreases, a second or so apart at eight: one whose
// rate passed its ceiling in a peer's turn would probe, and the probes of
// eight cost a third more rejections.) The rate then grows by a share of
// itself per round (a round trip, at least slowStartRound) that starts at
// maxGrowthPerRound and doubles with every round of growth credited to it
// (time in which no create was held back does not count, so a lull does not
// bring the probe back at full strength), to probeGrowth: a process left
// alone with the quota eight shared takes it up in about four seconds at 200
// ms, where growing by maxGrowthPerRound a round trip it took thirteen, and a
// rate that passed its ceiling while a peer's decrease left it room is
// refused again while its probe is still gentle.
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
