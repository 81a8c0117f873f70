package adaptive

import (
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the adaptive concurrency controller on its own: Acquire and Release as the engine
// calls them. The engine's use of it is tested in the engine's adaptive_engine_test.go.

// testQueue and otherQueue are the queues of these tests.
const (
	testQueue  = "projects/p/locations/l/queues/q"
	otherQueue = "projects/p/locations/l/queues/other"
)

// take acquires n permits for queue, failing the test when one is refused.
func take(t *testing.T, a *Adaptive, queue string, cap, n int) []Permit {
	t.Helper()
	ps := make([]Permit, n)
	for i := range ps {
		p, ok, _ := a.Acquire(queue, cap, 0, time.Now())
		require.True(t, ok, "permit %d of %d refused; state %+v", i+1, n, a.Queue(queue))
		ps[i] = p
	}
	return ps
}

// takeAsLetThrough acquires n permits for queue, waiting when acquire refuses until the time it
// names, as an engine does: before the first answer slow start lets initialRate creates a
// second through. It fails the test when a refusal names no time.
func takeAsLetThrough(t *testing.T, a *Adaptive, queue string, cap, n int) []Permit {
	t.Helper()
	ps := make([]Permit, 0, n)
	for len(ps) < n {
		p, ok, until := a.Acquire(queue, cap, 0, time.Now())
		if !ok {
			require.False(t, until.IsZero(), "permit %d of %d refused until a release; state %+v", len(ps)+1, n, a.Queue(queue))
			time.Sleep(time.Until(until))
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// refused reports whether acquire refuses a create to queue now, giving back the permit when
// it does not.
func refused(a *Adaptive, queue string, cap int) bool {
	p, ok, _ := a.Acquire(queue, cap, 0, time.Now())
	if ok {
		a.Release(p, Other, 0, time.Now())
	}
	return !ok
}

// atOnce is how many creates slow start lets go at once on a queue's first use: its first
// limit, and one create may always be in flight.
const atOnce = max(initialLimit, 1)

// limitOf is the whole number of creates testQueue's limit lets through at once, one for a
// queue not used yet.
func limitOf(a *Adaptive) int {
	if l := a.Queue(testQueue); l.Cap > 0 {
		return int(l.Limit)
	}
	return 1
}

// acquireWhenAllowed acquires a permit to testQueue (cap 1000), waiting, when acquire refuses
// because the queue's next paced slot lies more than a round trip ahead, until the time it names.
func acquireWhenAllowed(t *testing.T, a *Adaptive) Permit {
	t.Helper()
	for {
		p, ok, until := a.Acquire(testQueue, 1000, 0, time.Now())
		if ok {
			return p
		}
		require.False(t, until.IsZero(), "refused without a time to ask again; state %+v", a.Queue(testQueue))
		time.Sleep(time.Until(until))
	}
}

// slowStartBound is slow start's limit on what every engine of the process has in flight to
// testQueue together, which past the cap QueueLimit.Limit does not show.
func slowStartBound(a *Adaptive) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queues[testQueue].slowStartLimit(time.Now())
}

// slowStartGrowthOf is what one success at round trip rtt adds to slow start's limit:
// slowStartGrowth, scaled down below slowStartRound.
func slowStartGrowthOf(rtt time.Duration) float64 {
	return slowStartGrowth * min(rtt.Seconds()/slowStartRound.Seconds(), 1)
}

// succeedAll answers every permit with success at now.
func succeedAll(a *Adaptive, ps []Permit) {
	for _, p := range ps {
		a.Release(p, Succeeded, 0, time.Now())
	}
}

func TestSlowStartBeginsSmallAndGrowsOnlyWhileCreatesSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		const cap = 100
		// A queue nobody has written to starts at atOnce creates in flight, not at the cap:
		// a process that starts does not send a cap's worth into a quota it knows nothing about.
		first := take(t, a, testQueue, cap, atOnce)
		assert.True(t, refused(a, testQueue, cap), "create %d waits for the limit of %d", atOnce+1, atOnce)
		assert.Equal(t, float64(atOnce), a.Queue(testQueue).Limit)

		// Each success of a create sent while at least half of the limit was in use adds
		// slowStartGrowth (scaled by the round trip below slowStartRound), and the limit has
		// a floor of initialRate over the round trip on top.
		const rtt = 30 * time.Millisecond
		time.Sleep(rtt)
		succeedAll(a, first)
		got := a.Queue(testQueue)
		assert.InDelta(t, float64(initialLimit)+atOnce*slowStartGrowthOf(rtt)+initialRate*rtt.Seconds(), got.Limit, 1e-9)
		assert.Equal(t, rtt, got.RTT, "the round trip is measured")
		assert.Zero(t, got.Rate, "no rejection yet: not paced")

		// Failures that say nothing about the quota neither grow nor shrink it.
		for _, p := range take(t, a, testQueue, cap, int(got.Limit)) {
			a.Release(p, Other, 0, time.Now())
		}
		assert.Equal(t, got.Limit, a.Queue(testQueue).Limit)
	})
}

func TestSlowStartPacesUpToTheCapAndBoundsTheProcessBeyondIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		const cap = 50
		rounds := 0
		for limitOf(a) < cap && rounds < 100 {
			ps := take(t, a, testQueue, cap, limitOf(a))
			// Well above slowStartRound, so the round trip measured from the permits' paced
			// starts stays above it too.
			time.Sleep(4 * slowStartRound)
			succeedAll(a, ps)
			rounds++
		}
		// One create in the first round trip (nothing tells the round trip yet), then from what
		// it grew plus the floor of initialRate over the round trip (24) to 50 in one or two
		// more: the limit doubles every round trip.
		assert.GreaterOrEqual(t, rounds, 2)
		assert.LessOrEqual(t, rounds, 3+atOnce-initialLimit)
		assert.Equal(t, float64(cap), a.Queue(testQueue).Limit, "an engine sees at most its cap")
		limit := slowStartBound(a)
		assert.GreaterOrEqual(t, limit, float64(cap))

		// From the cap on, creates are no longer spread over the round trip: each starts at
		// once. The limit still bounds what all the engines of the process have in flight
		// together (sixty-four engines of a cap of 1,000 each would otherwise have 64,000 in
		// flight when a deep bucket's first rejection comes back), and it keeps doubling per
		// round trip while it is used.
		ps := take(t, a, testQueue, cap, int(limit))
		for _, p := range ps {
			assert.Equal(t, time.Now(), p.start, "not paced at the cap")
		}
		assert.True(t, refused(a, testQueue, cap), "%d in flight: the process's limit", len(ps))
		time.Sleep(4 * slowStartRound)
		succeedAll(a, ps)
		assert.Greater(t, slowStartBound(a), 1.4*limit, "grows on past the cap while used")
		assert.Zero(t, a.Queue(testQueue).Rate)
	})
}

func TestALimitThatIsNotUsedDoesNotGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		// A trickle of one create at a time grows the limit only while one is at least half
		// of it, so a later flood still starts from a small limit: at most twice what the
		// trickle used, plus the floor of initialRate over the round trip.
		const rtt = 10 * time.Millisecond
		for range 50 {
			p := take(t, a, testQueue, 1000, 1)[0]
			time.Sleep(rtt)
			a.Release(p, Succeeded, 0, time.Now())
		}
		assert.LessOrEqual(t, a.Queue(testQueue).Limit, 2+slowStartGrowthOf(rtt)+initialRate*rtt.Seconds())
	})
}

// throttleAfter runs slow start on testQueue, all creates succeeding after rtt, until the limit
// is at least limit, then answers one more round of quotaRun creates RESOURCE_EXHAUSTED, which
// ends slow start; it returns the time of the rejections.
func throttleAfter(t *testing.T, a *Adaptive, limit float64, rtt time.Duration) time.Time {
	t.Helper()
	for float64(limitOf(a)) < limit {
		ps := take(t, a, testQueue, 1000, limitOf(a))
		time.Sleep(rtt)
		succeedAll(a, ps)
	}
	ps := take(t, a, testQueue, 1000, quotaRun)
	time.Sleep(rtt)
	for _, p := range ps {
		a.Release(p, Throttled, 0, time.Now())
	}
	require.Equal(t, 1, a.Queue(testQueue).Decreases, "a run of %d refusals ends slow start", quotaRun)
	return time.Now()
}

// quotaRun is the fewest refusals in a row that end slow start: fewer could be noise.
var quotaRun = func() int {
	k := 1
	for !beyond(k, k, startNoise, startZ) {
		k++
	}
	return k
}()

func TestTheFirstRejectionPacesTheQueueAtTheRateItAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		const rtt = 100 * time.Millisecond
		at := throttleAfter(t, a, 30, rtt)
		got := a.Queue(testQueue)
		assert.Equal(t, 1, got.Decreases)
		// The rate is set a little below the rate accepted over the last two round trips,
		// which grew from about 10 (initialRate over the round trip) to 30 creates per round
		// trip of 100 ms.
		assert.Greater(t, got.Rate, 100.0, "%+v", got)
		assert.Less(t, got.Rate, 300*setPoint, "%+v", got)

		// Creates now start one every 1/rate, each waiting for its slot; the permit counts
		// as in flight from the grant.
		gap := time.Duration(float64(time.Second) / got.Rate)
		var starts []time.Duration
		for range 5 {
			p, ok, _ := a.Acquire(testQueue, 1000, 0, at)
			require.True(t, ok)
			starts = append(starts, p.start.Sub(at))
		}
		for i := 1; i < len(starts); i++ {
			assert.InDelta(t, float64(gap), float64(starts[i]-starts[i-1]), float64(time.Microsecond), "starts %v", starts)
		}
		assert.Equal(t, 5, a.Queue(testQueue).InFlight)
	})
}

func TestAPacedQueueBooksSlotsNoFurtherAheadThanARoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		const rtt = 100 * time.Millisecond
		throttleAfter(t, a, 30, rtt)
		got := a.Queue(testQueue)
		horizon := max(got.RTT, minHorizon)
		// Many DoFn instances ask at once: each is granted a slot until the slots reach a
		// round trip ahead; the next one is told when to ask again instead of being booked
		// further out at today's rate.
		now := time.Now()
		var granted []Permit
		for range 1000 {
			p, ok, until := a.Acquire(testQueue, 1000, 0, now)
			if !ok {
				require.False(t, until.IsZero(), "refused with a time to ask again")
				assert.WithinDuration(t, now.Add(time.Duration(len(granted))*time.Duration(float64(time.Second)/got.Rate)-horizon), until, time.Millisecond)
				break
			}
			granted = append(granted, p)
		}
		last := granted[len(granted)-1].start
		assert.LessOrEqual(t, last.Sub(now), horizon)
		assert.InDelta(t, got.Rate*horizon.Seconds(), float64(len(granted)), 2, "a round trip's worth of slots at %.0f/s", got.Rate)
	})
}

func TestRejectionsLowerThePacedRateOncePerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		throttleAfter(t, a, 30, 100*time.Millisecond)
		rate := a.Queue(testQueue).Rate
		now := time.Now()
		var round []Permit
		for range 10 {
			p, ok, _ := a.Acquire(testQueue, 1000, 0, now)
			require.True(t, ok)
			round = append(round, p)
		}
		time.Sleep(time.Second)
		for _, p := range round {
			a.Release(p, Throttled, 0, time.Now())
		}
		got := a.Queue(testQueue)
		assert.InDelta(t, rate*decreaseFactor, got.Rate, 1e-9, "ten rejections of one round: one decrease")
		assert.Equal(t, 2, got.Decreases)

		// It never falls below minRate. A paced create accepted first ends the hold of the
		// run that ended slow start (spell.go), so each rejection below lowers the
		// rate; and with the return to slow start out of reach (restartIfCollapsed: no rate
		// slow start's end set, as for a queue started at a start rate), it stays paced.
		a.Release(acquireWhenAllowed(t, a), Succeeded, 0, time.Now())
		a.mu.Lock()
		a.queues[testQueue].exitRate = 0
		a.mu.Unlock()
		for range 100 {
			a.Release(acquireWhenAllowed(t, a), Throttled, 0, time.Now())
		}
		assert.Equal(t, 102, a.Queue(testQueue).Decreases, "every rejection of a create sent after the last decrease")
		assert.Equal(t, minRate, a.Queue(testQueue).Rate)
	})
}

func TestThePacedRateGrowsWhileItHoldsCreatesBackAndTheySucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		throttleAfter(t, a, 30, 100*time.Millisecond)
		rate := a.Queue(testQueue).Rate
		// Creates offered faster than the rate, all succeeding: for one second the rate grows
		// by growthPerSecond of itself plus growthFloor, compounded.
		start := time.Now()
		held := 0
		for time.Since(start) < time.Second {
			p := acquireWhenAllowed(t, a)
			if p.binding {
				held++
			}
			time.Sleep(time.Until(p.start))
			a.Release(p, Succeeded, 0, time.Now())
		}
		assert.Greater(t, held, 100, "the rate held creates back")
		grown := a.Queue(testQueue).Rate
		// In the first second after a decrease the growth per second goes from growthPerSecond
		// to twice that (it doubles every growthDoubling of quiet, here 500 ms).
		assert.Greater(t, grown, rate*(1+growthPerSecond))
		assert.Less(t, grown, rate*(1+4*growthPerSecond)+2*growthFloor)

		// Creates offered slower than the rate do not grow it.
		for range 20 {
			time.Sleep(time.Second)
			p, _, _ := a.Acquire(testQueue, 1000, 0, time.Now())
			require.False(t, p.binding)
			a.Release(p, Succeeded, 0, time.Now())
		}
		assert.Equal(t, grown, a.Queue(testQueue).Rate)
	})
}

func TestAtLongRoundTripsSlowStartBeginsAtInitialRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// At 200 ms, one create in flight is 5 creates per second, and doubling from there to
		// a quota of 1,000/s takes eight round trips. Once the first answer tells the round
		// trip, the limit has a floor of initialRate over it on top of what slow start grew.
		a := New()
		first := take(t, a, testQueue, 1000, atOnce)
		time.Sleep(200 * time.Millisecond)
		succeedAll(a, first)
		grown := float64(initialLimit) + atOnce*slowStartGrowth
		assert.Equal(t, grown+initialRate*0.2, a.Queue(testQueue).Limit)

		// The floor follows the smoothed round trip and is never stored: when a slow first
		// answer (a cold connection) is followed by fast ones, it fades, and what is left is
		// the limit slow start grew on its own plus initialRate over the round trip now, not
		// 20 in flight at 20 ms, 1,000 creates per second.
		for range 60 {
			p := take(t, a, testQueue, 1000, 1)[0] // one at a time, below half of the limit: not binding
			time.Sleep(20 * time.Millisecond)
			a.Release(p, Succeeded, 0, time.Now())
		}
		got := a.Queue(testQueue)
		assert.Less(t, got.RTT, 25*time.Millisecond)
		assert.InDelta(t, grown+initialRate*got.RTT.Seconds(), got.Limit, 1e-9)
		assert.Less(t, got.Limit, 5.0)

		// At 30 ms the floor is 3 in flight.
		b := New()
		first = take(t, b, testQueue, 1000, atOnce)
		time.Sleep(30 * time.Millisecond)
		succeedAll(b, first)
		assert.InDelta(t, float64(initialLimit)+atOnce*slowStartGrowthOf(30*time.Millisecond)+initialRate*0.03, b.Queue(testQueue).Limit, 1e-9)
	})
}

func TestSlowStartGrowsWhenAnswersComeBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A creator that answers within the same instant (an in-memory fake, a coarse clock)
		// gives no round trip sample; slow start must still grow by whole steps then.
		a := New()
		for range 10 + atOnce - initialLimit {
			succeedAll(a, take(t, a, testQueue, 1000, limitOf(a)))
		}
		assert.Zero(t, a.Queue(testQueue).RTT)
		assert.Greater(t, a.Queue(testQueue).Limit, 100.0)
	})
}

func TestEveryDecreaseSetsTheRateAtMostALittleBelowTheAcceptedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		const rtt = 100 * time.Millisecond
		throttleAfter(t, a, 30, rtt)
		rate := a.Queue(testQueue).Rate
		// Another process takes most of the quota: for ten round trips, one create in four
		// this process sends succeeds. One decrease per round by decreaseFactor would leave the
		// rate at about a third of what it was, still far above what the queue takes from it;
		// the decreases follow the accepted rate down (reading it over the last two round
		// trips, so a round trip or two behind). Once they take it below collapseShare of the
		// rate slow start's end set, the queue starts slow start again (restartIfCollapsed):
		// the rate checked is the last one the decreases set before that.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var got QueueLimit
		restarted := false
		start := time.Now()
		for i := 0; time.Since(start) < 10*rtt; i++ {
			p := acquireWhenAllowed(t, a)
			time.Sleep(time.Until(p.start))
			wg.Go(func() {
				time.Sleep(rtt)
				if i%4 == 0 {
					a.Release(p, Succeeded, 0, time.Now())
				} else {
					a.Release(p, Throttled, 0, time.Now())
				}
				mu.Lock()
				defer mu.Unlock()
				if l := a.Queue(testQueue); l.Rate == 0 {
					restarted = true
				} else if !restarted {
					got = l
				}
			})
		}
		wg.Wait()
		t.Logf("rate %.1f/s after %d decreases; slow start again: %v", got.Rate, got.Decreases, restarted)
		assert.LessOrEqual(t, got.Decreases, 12, "about one decrease per round trip")
		byFactor := rate * math.Pow(decreaseFactor, float64(got.Decreases-1))
		assert.Less(t, got.Rate, byFactor/2, "%d decreases by the factor alone: %.1f/s", got.Decreases-1, byFactor)
		assert.GreaterOrEqual(t, got.Rate, minRate)
	})
}

func TestARejectionOfAQuietProcessLowersItsRateOnlyByTheFactor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A paced process that sends far less than its rate allows (a quiet spell of a
		// streaming job) and meets a rejection: what the queue accepted from it is what it had
		// to send, not what the quota lets through, so the rate falls by decreaseFactor, not
		// to that.
		a := New()
		throttleAfter(t, a, 30, 50*time.Millisecond)
		time.Sleep(time.Second)
		for range 10 {
			p := take(t, a, testQueue, 1000, 1)[0]
			require.False(t, p.binding)
			time.Sleep(50 * time.Millisecond)
			a.Release(p, Succeeded, 0, time.Now())
			time.Sleep(50 * time.Millisecond)
		}
		rate := a.Queue(testQueue).Rate
		p := take(t, a, testQueue, 1000, 1)[0]
		time.Sleep(50 * time.Millisecond)
		a.Release(p, Throttled, 0, time.Now())
		assert.InDelta(t, rate*decreaseFactor, a.Queue(testQueue).Rate, 1e-9)
	})
}

func TestTheAcceptedRateOfASmallShareIsReadOverEnoughAcceptances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One acceptance every 40 ms (25/s): two round trips of 5 ms hold none or one, which
		// reads as 0 or 50/s. The span is widened until it holds acceptedMinCount.
		var r acceptedRate
		for range 30 {
			r.add(time.Now())
			time.Sleep(40 * time.Millisecond)
		}
		got := r.perSecond(time.Now(), 5*time.Millisecond)
		assert.InDelta(t, 25, got, 3)
	})
}

// probeAboveOf is the rate past which testQueue of a probes: probeMargin above the rate the
// queue last refused.
func probeAboveOf(a *Adaptive) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queues[testQueue].ceiling * (1 + probeMargin)
}

// fastestGrowthUntilQuiet offers creates to testQueue of a (growFor) in spans of step until
// growthDoublings*growthDoubling have passed since the decrease at decreased, and returns the
// largest growth of the rate in one span, as a share of the rate.
func fastestGrowthUntilQuiet(t *testing.T, a *Adaptive, rtt, step time.Duration, decreased time.Time) float64 {
	t.Helper()
	var fastest float64
	for time.Since(decreased)+step < growthDoublings*growthDoubling {
		r0 := a.Queue(testQueue).Rate
		growFor(t, a, rtt, step)
		fastest = max(fastest, a.Queue(testQueue).Rate/r0-1)
	}
	return fastest
}

func TestAQueueLongFreeOfRejectionsGrowsItsRateFaster(t *testing.T) {
	// A process whose peers finished leaves a quota free that its rate must grow into: the
	// growth per second doubles with every growthDoubling without a decrease, and once the
	// rate has passed probeMargin above the rate the queue refused, it probes, growing by a
	// share of itself per round trip (TestAProcessLeftAloneTakesUpTheQuotaItsPeersLeft). At a
	// long round trip, growth stays at most maxGrowthPerRound per round trip until then, so
	// that the rate does not run far past the quota before a rejection can come back.
	synctest.Test(t, func(t *testing.T) {
		const rtt = 10 * time.Millisecond
		a := New()
		throttleAfter(t, a, 30, rtt)
		// Creates offered faster than the rate, each answered a round trip after its start,
		// all succeeding (growFor).
		r0 := a.Queue(testQueue).Rate
		growFor(t, a, rtt, time.Second)
		r1 := a.Queue(testQueue).Rate
		growFor(t, a, rtt, 2*time.Second)
		r3 := a.Queue(testQueue).Rate
		growFor(t, a, rtt, time.Second)
		r4 := a.Queue(testQueue).Rate
		first, fourth := r1/r0-1, r4/r3-1
		t.Logf("grew %.0f%% in the first second, %.0f%% in the fourth", 100*first, 100*fourth)
		assert.Less(t, first, 4*growthPerSecond)
		assert.Greater(t, fourth, 32*growthPerSecond*0.5)
		assert.Greater(t, fourth, 5*first)
	})

	// At 200 ms, a growth of maxGrowthPerRound per round trip is 15% per second, for as long
	// as a decrease came within growthDoublings*growthDoubling; after that, once past
	// probeMargin above the rate the queue refused, the rate probes for room beyond it
	// (TestAProcessLeftAloneTakesUpTheQuotaItsPeersLeft).
	synctest.Test(t, func(t *testing.T) {
		const rtt = 200 * time.Millisecond
		a := New()
		decreased := throttleAfter(t, a, 30, rtt)
		probeAbove := probeAboveOf(a)
		fastest := fastestGrowthUntilQuiet(t, a, rtt, rtt, decreased)
		assert.Less(t, fastest, 1.2*maxGrowthPerRound, "grew %.1f%% in a round trip", 100*fastest)
		assert.Greater(t, fastest, 2*growthPerSecond*rtt.Seconds(), "the growth doubled")
		r0 := a.Queue(testQueue).Rate
		growFor(t, a, rtt, 10*rtt)
		perRound := math.Pow(a.Queue(testQueue).Rate/r0, 1.0/10) - 1
		t.Logf("%.1f%% a round trip at most until %v after the decrease (the rate %.0f%% of the ceiling), %.1f%% a round trip in the next ten", 100*fastest, growthDoublings*growthDoubling, 100*r0/probeAbove*(1+probeMargin), 100*perRound)
		assert.Greater(t, perRound, 2*maxGrowthPerRound, "the rate probes once no decrease came for long")
	})
}

func TestARateThatPassedItsCeilingSoonAfterADecreaseDoesNotProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Processes that share a quota take turns at its decreases: one whose rate passed
		// probeMargin above the rate the queue refused in a peer's turn has not found room the
		// quota did not have. It grows as near a decrease (by at most 160% a second here, 9.6%
		// a slowStartRound) until growthDoublings*growthDoubling have passed, and only then
		// probes (25% a slowStartRound at most).
		const rtt = 20 * time.Millisecond
		a := New()
		decreased := throttleAfter(t, a, 30, rtt)
		probeAbove := probeAboveOf(a)
		for a.Queue(testQueue).Rate <= probeAbove {
			growFor(t, a, rtt, slowStartRound)
		}
		passed := time.Since(decreased)
		require.Less(t, passed+2*slowStartRound, growthDoublings*growthDoubling, "the rate passed its ceiling soon after the decrease")
		fastest := fastestGrowthUntilQuiet(t, a, rtt, slowStartRound, decreased)
		t.Logf("passed the ceiling and margin %v after the decrease; grew by at most %.1f%% a slowStartRound until %v", passed, 100*fastest, growthDoublings*growthDoubling)
		assert.Less(t, fastest, 1.1*float64(1<<growthDoublings)*growthPerSecond*slowStartRound.Seconds())
	})
}

func TestFailuresOtherThanResourceExhaustedLeaveTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		for _, p := range take(t, a, testQueue, 10, atOnce) {
			a.Release(p, Other, 0, time.Now())
		}
		assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 10}, a.Queue(testQueue))
	})
}

func TestRetryInfoPausesTheQueueUntilItsDelayHasPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		ps := takeAsLetThrough(t, a, testQueue, 10, 2)
		start := time.Now()
		a.Release(ps[0], Throttled, 3*time.Second, time.Now())
		a.Release(ps[1], Throttled, time.Second, time.Now()) // a shorter one does not shorten it
		_, ok, until := a.Acquire(testQueue, 10, 0, time.Now())
		assert.False(t, ok)
		assert.Equal(t, start.Add(3*time.Second), until)
		assert.Equal(t, start.Add(3*time.Second), a.Queue(testQueue).PausedUntil)
		_, ok, _ = a.Acquire(otherQueue, 10, 0, time.Now())
		assert.True(t, ok, "another queue is not paused")

		time.Sleep(3*time.Second - time.Nanosecond)
		_, ok, _ = a.Acquire(testQueue, 10, 0, time.Now())
		assert.False(t, ok, "still paused a nanosecond before the end")
		time.Sleep(time.Nanosecond)
		_, ok, _ = a.Acquire(testQueue, 10, 0, time.Now())
		assert.True(t, ok, "free again when the delay has passed")
	})
}

func TestNewAdaptiveSharesNothing(t *testing.T) {
	assert.NotSame(t, New(), New())
}

func TestTheLimitIsSharedWithinAnAdaptiveAndIndependentAcrossQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		// Two users of the same Adaptive and queue, say two DoFn instances, share one limit.
		first := takeAsLetThrough(t, a, testQueue, 8, 2)
		second := takeAsLetThrough(t, a, testQueue, 8, 2)
		assert.True(t, refused(a, testQueue, 8), "4 in flight: the shared limit")
		succeedAll(a, append(first, second...))

		// Another queue of the same Adaptive, and the same queue of another one, are untouched.
		assert.Equal(t, QueueLimit{}, a.Queue(otherQueue))
		take(t, a, otherQueue, 8, atOnce)
		assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 8, InFlight: atOnce}, a.Queue(otherQueue))
		other := New()
		take(t, other, testQueue, 8, atOnce)
		assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 8, InFlight: atOnce}, other.Queue(testQueue))
	})
}

func TestTheCapIsTheLargestMaxInFlightOfItsUsers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		take(t, a, testQueue, 1, 1)
		assert.Equal(t, QueueLimit{Limit: 1, Cap: 1, InFlight: 1}, a.Queue(testQueue), "a cap of the initial limit is the limit")
		take(t, a, testQueue, 10, 1)
		assert.Equal(t, QueueLimit{Limit: 10, Cap: 10, InFlight: 2}, a.Queue(testQueue), "a limit at its cap follows the cap up")
		take(t, a, testQueue, 4, 1)
		assert.Equal(t, 10, a.Queue(testQueue).Cap, "a smaller cap does not lower it")
	})
}

func TestReleaseWakesTheWatchersOfItsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := New()
		mine, others := make(chan struct{}, 1), make(chan struct{}, 1)
		a.Watch(testQueue, 4, 0, mine)
		a.Watch(otherQueue, 4, 0, others)
		ps := takeAsLetThrough(t, a, testQueue, 4, 2)
		a.Release(ps[0], Succeeded, 0, time.Now())
		a.Release(ps[1], Succeeded, 0, time.Now()) // the signal does not block when one is pending
		assert.Len(t, mine, 1)
		assert.Empty(t, others)
		<-mine
		a.Unwatch(testQueue, mine)
		a.Release(take(t, a, testQueue, 4, 1)[0], Succeeded, 0, time.Now())
		assert.Empty(t, mine, "no signal after unwatch")
	})
}

func TestAfterALongQuietSpellTheRateGrowsByAShareOfItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// With the probe out of reach (the rate the queue refused set far above), a rate that
		// met no decrease for growthDoublings*growthDoubling grows by a share of itself, not of
		// the smaller rate its first rejection set: by at least 80% a second here, where a
		// share of the first rate would be about half that.
		const rtt = 10 * time.Millisecond
		a := New()
		throttleAfter(t, a, 30, rtt)
		a.mu.Lock()
		a.queues[testQueue].ceiling = math.Inf(1)
		a.mu.Unlock()
		growFor(t, a, rtt, 3*time.Second)
		r3 := a.Queue(testQueue).Rate
		growFor(t, a, rtt, time.Second)
		fourth := a.Queue(testQueue).Rate/r3 - 1
		t.Logf("grew %.0f%% in the fourth second, from %.0f/s (the first rejection set %.0f/s)", 100*fourth, r3, a.Queue(testQueue).Unit)
		assert.Greater(t, fourth, 32*growthPerSecond*0.5)
	})
}

func TestThePacedRateStopsGrowingWhenTheEnginesCannotSendFaster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Nothing refuses the creates, and the rate grows and probes past the rate the queue
		// refused; but the engines have at most growForInFlight creates in flight, 10,000 a
		// second at 100 ms. Past that no create waits for its slot, and only a create the rate
		// held back grows it: the rate stops near what the engines can send instead of growing
		// by a quarter every round trip.
		const rtt = 100 * time.Millisecond
		a := New()
		throttleAfter(t, a, 30, rtt)
		growFor(t, a, rtt, 8*time.Second)
		st := a.Queue(testQueue)
		most := growForInFlight / rtt.Seconds()
		t.Logf("rate %.0f/s after 8 s of successes; the engines send at most %.0f/s", st.Rate, most)
		assert.Greater(t, st.Rate, 0.5*most, "the rate probed towards what the engines can send")
		assert.Less(t, st.Rate, 1.5*most)
	})
}
