package adaptive

import "time"

// The controller's constants. Each comment says what the constant sets and
// why; docs/performance-history.md ("Why the controller's constants are what they
// are") gives the measurements behind each value.

const (
	// initialLimit is the limit slow start grows from, under its floor. One
	// create may always be in flight, so from zero a process starts at
	// initialRate creates a second whatever the round trip.
	initialLimit = 0
	// initialRate is slow start's floor in creates a second: the limit gets
	// initialRate times the round trip on top. A long round trip then does
	// not start at one create per round trip, and processes that start
	// together send a known rate, not a cap's worth each.
	initialRate = 100.0
	// decreaseFactor bounds each decrease of the rate from above.
	decreaseFactor = 0.9
	// setPoint is the share of the accepted rate a decrease sets the rate to:
	// a little below it, so that the queue's bucket refills.
	setPoint = 0.97
	// growthPerSecond and growthFloor are how fast the rate grows just after
	// a decrease, while it holds creates back and they succeed:
	// unit*growthPerSecond + growthFloor creates a second, each second. The
	// unit is the rate the first refusal set, at most twice the rate now:
	// processes that started alike grow alike. growthPerSecond doubles every
	// growthDoubling without a decrease, at most growthDoublings times: near
	// the quota it just found, the rate probes gently.
	growthPerSecond = 0.05
	growthFloor     = 1.0
	growthDoubling  = 500 * time.Millisecond
	growthDoublings = 5
	// maxGrowthPerRound bounds that growth per round trip. A refusal comes
	// back a round trip after the rate passed the quota, so at long round
	// trips fast growth would run far past it.
	maxGrowthPerRound = 0.03
	// loneRejectionFactor and shareStormLimit soften the decreases of a queue
	// started at a start rate (softenDecrease). After one refusal since the
	// last decrease, the rate goes no further than loneRejectionFactor below
	// the smaller of itself and the start rate; after more, no further than
	// decreaseFactor below it. The shareStormLimit-th decrease in a row after
	// a round of mostly refusals gives the start rate up.
	loneRejectionFactor = 0.97
	shareStormLimit     = 2
	// shareHoldBand is how far above its start rate a queue holds its rate
	// until a quiet spell has passed (holdsShare): there it grows by
	// growthFloor a second only.
	shareHoldBand = 0.1
	// slowStartGrowth is what each success adds to slow start's limit, so
	// that the limit doubles every round trip while creates succeed.
	slowStartGrowth = 1.0
	// maxUnanswered bounds the round trip slow start's floor assumes before
	// any answer. A slow first answer (a cold connection, a token fetch) then
	// lets at most initialRate*maxUnanswered creates go, which all succeed
	// together when it ends.
	maxUnanswered = 250 * time.Millisecond
	// slowStartRound is the shortest time in which slow start's limit may
	// double. Below it a success adds rtt/slowStartRound of slowStartGrowth:
	// a quota's bucket hides the quota for many short round trips.
	slowStartRound = 60 * time.Millisecond
	// minHorizon is the shortest time ahead for which a paced queue books
	// slots (horizon). A booked slot keeps the rate of the moment, so a
	// short horizon lets a decrease reach the queue within a round trip.
	minHorizon = 5 * time.Millisecond
	// probeMargin and probeGrowth: after growthDoublings*growthDoubling
	// without a decrease, a rate probeMargin past the rate the queue last
	// refused probes for room (probe). It grows by a share of itself per
	// round trip, from maxGrowthPerRound, doubling each round up to
	// probeGrowth.
	probeMargin = 0.2
	probeGrowth = 0.25
	// stormMinRejected, stormRounds, stormMinSpan and stormFloor define a
	// storm: a decrease at most stormRounds round trips (at least
	// stormMinSpan) after the last, when most answers since were refusals,
	// at least stormMinRejected of them. It sets the rate a little below what
	// the queue accepted since, but no lower than stormFloor of the rate
	// before, once per spell of storms.
	stormMinRejected = 4
	stormFloor       = 0.5
	stormRounds      = 4
	stormMinSpan     = 100 * time.Millisecond
	// firstReadSpan is the shortest span over which the first refusal reads
	// the rate the queue accepted (acceptedRounds round trips otherwise).
	// Just before that refusal, the bucket that hid the quota gave its
	// tokens on top of it; a longer reading dilutes them.
	firstReadSpan = 4 * slowStartRound
	// minRate is the lowest rate, in creates per second.
	minRate = 0.5
	// MinStartRate is the lowest start rate (the engine's Options.StartRate)
	// a queue starts paced at, and the lowest rate it paces at.
	MinStartRate = minRate
	// maxGrowthStep bounds the time one success may credit to growth, so a
	// pause in the traffic does not turn into a jump of the rate.
	maxGrowthStep = 100 * time.Millisecond
	// pacerSlack is how far behind now the next paced start may lie: after a
	// quiet spell, at most this much of the rate starts at once.
	pacerSlack = 10 * time.Millisecond
)
