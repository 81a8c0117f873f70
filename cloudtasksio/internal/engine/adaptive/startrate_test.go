package adaptive

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of a start rate (the engine's Options.StartRate): a queue that starts paced at a rate
// the caller knows, instead of in slow start. The engine's tests drive it through engines too.

func TestAStartRateStartsTheQueuePacedAtIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		now := time.Now()
		var starts []time.Time
		for len(starts) < 20 {
			// Asked all at once, as many instances of a process would: each create is given
			// its slot, booked no further ahead than the horizon.
			p, ok, until := a.Acquire(testQueue, 1000, 200, time.Now())
			if !ok {
				require.False(t, until.IsZero())
				time.Sleep(time.Until(until))
				continue
			}
			starts = append(starts, p.start)
		}
		for i, s := range starts {
			assert.Equal(t, now.Add(time.Duration(i)*5*time.Millisecond), s, "create %d goes at its slot of 200/s, not at once", i)
		}
		got := a.Queue(testQueue)
		assert.Equal(t, 200.0, got.Rate)
		assert.Zero(t, got.Decreases, "no rejection has come")

		// Another engine's start rate does not move a queue already started, nor does a start
		// rate of 0 put it back in slow start.
		for _, rate := range []float64{5000, 0} {
			_, ok, until := a.Acquire(testQueue, 1000, rate, time.Now())
			assert.False(t, ok, "the next slot lies past the horizon at 200/s")
			assert.Equal(t, starts[len(starts)-1].Add(5*time.Millisecond-minHorizon), until)
			assert.Equal(t, 200.0, a.Queue(testQueue).Rate)
		}
		// A queue first used without a start rate starts in slow start.
		_, ok, _ := a.Acquire(otherQueue, 1000, 0, time.Now())
		require.True(t, ok)
		assert.Zero(t, a.Queue(otherQueue).Rate)
	})
}

func TestARejectionLowersAStartRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		acquire := func() Permit { return acquireAtStartRate(t, a, 200) }
		ps := []Permit{acquire(), acquire(), acquire()}
		time.Sleep(30 * time.Millisecond)
		// The first answer is a rejection, the first decrease: one rejection at the start
		// rate takes little off (softenDecrease).
		a.Release(ps[0], Throttled, 0, time.Now())
		got := a.Queue(testQueue)
		assert.InDelta(t, 200*loneRejectionFactor, got.Rate, 1e-9)
		assert.Equal(t, 1, got.Decreases)
		// The other two were sent before that decrease: rejected, they lower nothing.
		a.Release(ps[1], Throttled, 0, time.Now())
		a.Release(ps[2], Throttled, 0, time.Now())
		assert.InDelta(t, 200*loneRejectionFactor, a.Queue(testQueue).Rate, 1e-9)
		// A create sent after it and rejected is the second decrease, with three rejections
		// since the first: a tenth off.
		p := acquire()
		time.Sleep(time.Until(p.start) + 30*time.Millisecond)
		a.Release(p, Throttled, 0, time.Now())
		got = a.Queue(testQueue)
		assert.InDelta(t, 200*loneRejectionFactor*decreaseFactor, got.Rate, 1e-9)
		assert.Equal(t, 2, got.Decreases)
	})
}

func TestTheHoldSpansTheStartRateToATenthAboveItForAQuietSpell(t *testing.T) {
	q := &queueLimit{control: control{share: 100}}
	spell := growthDoublings * growthDoubling
	for _, c := range []struct {
		rate  float64
		quiet time.Duration
		holds bool
	}{
		{99.9, 0, false}, // below the start rate: it grows back
		{100, 0, true},   // at it
		{100 * (1 + shareHoldBand) * 0.999, 0, true},  // just inside the band
		{100 * (1 + shareHoldBand) * 1.001, 0, false}, // just past it
		{105, spell - time.Millisecond, true},         // late in the quiet spell
		{105, spell, false},                           // past it
	} {
		q.rate = c.rate
		assert.Equal(t, c.holds, q.holdsShare(c.quiet), "rate %v, quiet %v", c.rate, c.quiet)
	}
	q.share, q.rate = 0, 100 // a queue without a start rate, or one that gave it up
	assert.False(t, q.holdsShare(0))
}

// acquireAtStartRate acquires a permit for testQueue of a, started at rate: booked beyond the
// horizon, it asks again when the slot comes within it, as an engine does.
func acquireAtStartRate(t *testing.T, a *Adaptive, rate float64) Permit {
	t.Helper()
	p, ok, until := a.Acquire(testQueue, 1000, rate, time.Now())
	if !ok {
		time.Sleep(time.Until(until))
		p, ok, _ = a.Acquire(testQueue, 1000, rate, time.Now())
	}
	require.True(t, ok)
	return p
}

func TestAForgottenQueueStartsAgainAtTheStartRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		a.IdleTTL = time.Minute
		p, ok, _ := a.Acquire(testQueue, 1000, 200, time.Now())
		require.True(t, ok)
		a.Release(p, Throttled, 0, time.Now().Add(time.Millisecond))
		require.Less(t, a.Queue(testQueue).Rate, 200.0)
		time.Sleep(2 * time.Minute)
		// Using another queue forgets the idle one; its next create starts it afresh.
		q, ok, _ := a.Acquire(otherQueue, 1000, 200, time.Now())
		require.True(t, ok)
		a.Release(q, Succeeded, 0, time.Now())
		p, ok, _ = a.Acquire(testQueue, 1000, 200, time.Now())
		require.True(t, ok)
		got := a.Queue(testQueue)
		assert.Equal(t, 200.0, got.Rate)
		assert.Zero(t, got.Decreases)
		a.Release(p, Succeeded, 0, time.Now())
	})
}

func TestAStartRateBelowTheLowestPaceStartsThereAndAnInfiniteOneIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		_, ok, _ := a.Acquire(testQueue, 1000, MinStartRate/10, time.Now())
		require.True(t, ok)
		assert.Equal(t, MinStartRate, a.Queue(testQueue).Rate)
		_, ok, _ = a.Acquire(otherQueue, 1000, math.Inf(1), time.Now())
		require.True(t, ok)
		got := a.Queue(otherQueue)
		assert.Zero(t, got.Rate, "slow start")
		assert.False(t, math.IsNaN(got.Limit))
	})
}

func TestTheGentleStartCountsFromTheFirstCreateTheRateHoldsBack(t *testing.T) {
	// A queue started at 100/s sees a trickle for ten seconds (one create a second, never held
	// back), then a flood: its growth right after the flood is as gentle as right after a
	// decrease, not the full strength of ten quiet seconds.
	synctest.Test(t, func(t *testing.T) {
		a := New()
		for range 10 {
			p, ok, _ := a.Acquire(testQueue, 1000, 100, time.Now())
			require.True(t, ok)
			require.False(t, p.binding, "a trickle is not held back")
			time.Sleep(30 * time.Millisecond)
			a.Release(p, Succeeded, 0, time.Now())
			time.Sleep(970 * time.Millisecond)
		}
		flood := time.Now()
		var ps []Permit
		for len(ps) < 20 {
			p, ok, until := a.Acquire(testQueue, 1000, 100, time.Now())
			if !ok {
				time.Sleep(time.Until(until))
				continue
			}
			ps = append(ps, p)
		}
		for _, p := range ps { // each answered a 30 ms round trip after its start
			time.Sleep(time.Until(p.start.Add(30 * time.Millisecond)))
			a.Release(p, Succeeded, 0, time.Now())
		}
		elapsed := time.Since(flood).Seconds()
		// Gentle: growthPerSecond of the unit (100/s) plus growthFloor, doubled at most once in
		// the flood's fraction of a second. At full strength (10 quiet seconds) it would be
		// capped only by maxGrowthPerRound per round trip, a third of the rate a second at 30 ms.
		gentle := 100 + 2*(100*growthPerSecond+growthFloor)*elapsed
		assert.LessOrEqual(t, a.Queue(testQueue).Rate, gentle, "after %.2fs of flood", elapsed)
		assert.Greater(t, a.Queue(testQueue).Rate, 100.0, "it grew")
	})
}

// startedAt200 is a queue started at a start rate of 200/s, at a round trip of 30 ms; decreaseAt
// sets its rate and the round's answers and calls decrease after the given time.
func startedAt200() (q *queueLimit, decreaseAt func(rate float64, after time.Duration, accepted, rejected int)) {
	now := time.Unix(1_000_000, 0)
	q = &queueLimit{}
	q.startPaced(200, now)
	q.rtt = 30 * time.Millisecond
	decreaseAt = func(rate float64, after time.Duration, accepted, rejected int) {
		q.rate = rate
		q.roundAccepted, q.roundRejected = accepted, rejected
		now = now.Add(after)
		q.decrease(now)
	}
	return q, decreaseAt
}

func TestADecreaseFromAboveTheStartRateStopsATenthBelowIt(t *testing.T) {
	q, decreaseAt := startedAt200()

	// The rate grew well past the start rate and was refused: a tenth off, as for any paced
	// rate.
	decreaseAt(260, time.Second, 60, 1)
	assert.InDelta(t, 260*decreaseFactor, q.rate, 1e-9)

	// A storm a round trip later (most answers since were rejections), from past the start
	// rate: it would halve the rate, to 115; it stops a tenth below the start rate.
	decreaseAt(230, 50*time.Millisecond, 1, 10)
	assert.InDelta(t, 200*decreaseFactor, q.rate, 1e-9)
	assert.Equal(t, 200.0, q.share)
}

func TestALoneRejectionNearTheStartRateTakesLittleOff(t *testing.T) {
	for _, before := range []float64{204, 200, 150, 20} {
		q, decreaseAt := startedAt200()
		// One rejection since the last decrease, near the start rate or below it: down by
		// loneRejectionFactor from the smaller of the two, not by decreaseFactor.
		decreaseAt(before, time.Second, 60, 1)
		assert.InDelta(t, min(before, 200)*loneRejectionFactor, q.rate, 1e-9, "from %v", before)
	}

	// A lone rejection takes less off than two do.
	lone, decreaseAt := startedAt200()
	decreaseAt(200, time.Second, 60, 1)
	more, decreaseAt := startedAt200()
	decreaseAt(200, time.Second, 60, 2)
	assert.Greater(t, lone.rate, more.rate)
	assert.Greater(t, lone.rate, 200*decreaseFactor)

	// Lone rejections in a row compound: the start rate is no floor, so a share set a little
	// too high comes down however few rejections each round holds.
	q, decreaseAt := startedAt200()
	for range 10 {
		decreaseAt(q.rate, time.Second, 60, 1)
	}
	assert.InDelta(t, 200*math.Pow(loneRejectionFactor, 10), q.rate, 1e-9)
}

func TestMoreRejectionsNearTheStartRateTakeATenthOffAndNoMore(t *testing.T) {
	q, decreaseAt := startedAt200()

	// Two rejections since the last decrease: the quota is short, a tenth off.
	decreaseAt(200, time.Second, 60, 2)
	assert.InDelta(t, 200*decreaseFactor, q.rate, 1e-9)

	// A storm a round trip later, at the start rate: a tenth off, not half.
	decreaseAt(200, 50*time.Millisecond, 1, 10)
	assert.InDelta(t, 200*decreaseFactor, q.rate, 1e-9, "a tenth off, not half")

	// What the queue accepted lately reads far below the rate (others took the quota for a
	// while): a queue without a start rate comes down to it, this one a tenth.
	q, decreaseAt = startedAt200()
	for i := range 20 {
		q.accepted.add(time.Unix(1_000_001, 0).Add(time.Duration(i) * 50 * time.Millisecond))
	}
	q.boundAt = time.Unix(1_000_002, 0)
	decreaseAt(200, 2*time.Second, 20, 2)
	assert.InDelta(t, 200*decreaseFactor, q.rate, 1e-9, "not to the accepted rate")
	q.share = 0
	decreaseAt(200, 0, 20, 2)
	assert.Less(t, q.rate, 200*decreaseFactor/2, "without a start rate, the accepted rate")

	// A queue started in slow start has no start rate to soften its decreases: the storm halves.
	var sq queueLimit
	sq.rtt = 30 * time.Millisecond
	now := time.Unix(1_000, 0)
	sq.inFlight = 10
	sq.decrease(now)
	sq.rate, sq.roundAccepted, sq.roundRejected = 200, 1, 10
	now = now.Add(50 * time.Millisecond)
	sq.decrease(now)
	assert.InDelta(t, 200*stormFloor, sq.rate, 1e-9)
}

func TestRoundsOfMostlyRejectionsInARowGiveTheStartRateUp(t *testing.T) {
	q, decreaseAt := startedAt200()

	// Most answers rejections, then a round that was not: the count starts again.
	decreaseAt(200, time.Second, 2, 10)
	assert.InDelta(t, 200*decreaseFactor, q.rate, 1e-9)
	decreaseAt(q.rate, time.Second, 60, 2)
	assert.Equal(t, 200.0, q.share)
	assert.InDelta(t, 200*decreaseFactor*decreaseFactor, q.rate, 1e-9)

	// shareStormLimit of them in a row: the share was far too high, and it is given up; this
	// decrease, a storm, halves the rate as for a queue started in slow start.
	for range shareStormLimit - 1 {
		decreaseAt(180, time.Second, 2, 10)
		assert.Equal(t, 200.0, q.share)
	}
	decreaseAt(180, 50*time.Millisecond, 1, 10)
	assert.Zero(t, q.share)
	assert.InDelta(t, 180*stormFloor, q.rate, 1e-9)
	decreaseAt(q.rate, time.Second, 60, 1)
	assert.InDelta(t, 180*stormFloor*decreaseFactor, q.rate, 1e-9, "no start rate softens it")
}

func TestTheStormThatGivesTheStartRateUpHalvesTheRate(t *testing.T) {
	q, decreaseAt := startedAt200()

	// Storms a round trip apart at the start rate: the first is held to a tenth off, and the
	// second gives the start rate up and halves the rate, though a storm spell halves once: the
	// start rate held the spell's first halving back.
	decreaseAt(200, 40*time.Millisecond, 0, 10)
	assert.InDelta(t, 200*decreaseFactor, q.rate, 1e-9)
	decreaseAt(q.rate, 40*time.Millisecond, 0, 10)
	assert.Zero(t, q.share)
	assert.InDelta(t, 200*decreaseFactor*stormFloor, q.rate, 1e-9)
	// The spell's halving is spent: the next storm takes a tenth.
	decreaseAt(q.rate, 40*time.Millisecond, 0, 10)
	assert.InDelta(t, 200*decreaseFactor*stormFloor*decreaseFactor, q.rate, 1e-9)
}
