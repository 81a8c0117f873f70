package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Tests of the adaptive concurrency controller on its own: acquire and release as the engine
// calls them. The engine's use of it is tested in adaptive_engine_test.go.

const otherQueue = "projects/p/locations/l/queues/other"

// take acquires n permits for queue, failing the test when one is refused.
func take(t *testing.T, a *Adaptive, queue string, cap, n int) []permit {
	t.Helper()
	ps := make([]permit, n)
	for i := range ps {
		p, ok, _ := a.acquire(queue, cap, time.Now())
		require.True(t, ok, "permit %d of %d refused; state %+v", i+1, n, a.Queue(queue))
		ps[i] = p
	}
	return ps
}

// refused reports whether acquire refuses a create to queue now, giving back the permit when
// it does not.
func refused(a *Adaptive, queue string, cap int) bool {
	p, ok, _ := a.acquire(queue, cap, time.Now())
	if ok {
		a.release(p, outcomeOther, 0, time.Now())
	}
	return !ok
}

// limitOf is the whole number of creates testQueue's limit lets through at once, initialLimit
// for a queue not used yet.
func limitOf(a *Adaptive) int {
	if l := a.Queue(testQueue); l.Cap > 0 {
		return int(l.Limit)
	}
	return initialLimit
}

// succeedAll answers every permit with success at now.
func succeedAll(a *Adaptive, ps []permit) {
	for _, p := range ps {
		a.release(p, outcomeSucceeded, 0, time.Now())
	}
}

func TestSlowStartBeginsSmallAndGrowsOnlyWhileCreatesSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		const cap = 100
		// A queue nobody has written to starts at initialLimit creates in flight, not at the cap:
		// a process that starts does not send a cap's worth into a quota it knows nothing about.
		first := take(t, a, testQueue, cap, initialLimit)
		assert.True(t, refused(a, testQueue, cap), "create %d waits for the limit of %d", initialLimit+1, initialLimit)
		assert.Equal(t, float64(initialLimit), a.Queue(testQueue).Limit)

		// Each success of a create sent while at least half of the limit was in use adds
		// slowStartGrowth: the limit doubles every round trip. Here the first create went
		// out alone, the other three did not.
		time.Sleep(20 * time.Millisecond)
		succeedAll(a, first)
		got := a.Queue(testQueue)
		assert.Equal(t, float64(initialLimit)+3*slowStartGrowth, got.Limit)
		assert.Equal(t, 20*time.Millisecond, got.RTT, "the round trip is measured")
		assert.Zero(t, got.Rate, "no rejection yet: not paced")

		// Failures that say nothing about the quota neither grow nor shrink it.
		for _, p := range take(t, a, testQueue, cap, int(got.Limit)) {
			a.release(p, outcomeOther, 0, time.Now())
		}
		assert.Equal(t, got.Limit, a.Queue(testQueue).Limit)
	})
}

func TestSlowStartReachesTheCapAndHoldsNothingBackThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		const cap = 50
		rounds := 0
		for limitOf(a) < cap && rounds < 100 {
			ps := take(t, a, testQueue, cap, limitOf(a))
			time.Sleep(10 * time.Millisecond)
			succeedAll(a, ps)
			rounds++
		}
		assert.Equal(t, float64(cap), a.Queue(testQueue).Limit)
		// From 4 to 50, doubling every round trip (a little less: the first creates of a round
		// go out before half of the limit is in use).
		assert.GreaterOrEqual(t, rounds, 4)
		assert.LessOrEqual(t, rounds, 6)
		// At the cap the limit is open: the engines' own caps are what bound them, and nothing
		// is paced.
		take(t, a, testQueue, cap, 2*cap)
		got := a.Queue(testQueue)
		assert.Equal(t, 2*cap, got.InFlight)
		assert.Zero(t, got.Rate)
	})
}

func TestALimitThatIsNotUsedDoesNotGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		// A trickle of one create at a time: it never uses half of the limit of 4 beyond the
		// first, so a later flood still starts from a small limit.
		for range 50 {
			p := take(t, a, testQueue, 1000, 1)[0]
			time.Sleep(10 * time.Millisecond)
			a.release(p, outcomeSucceeded, 0, time.Now())
		}
		assert.Equal(t, float64(initialLimit), a.Queue(testQueue).Limit)
	})
}

// throttleAfter runs slow start on testQueue, all creates succeeding after rtt, until the limit
// is at least limit, then answers one more round RESOURCE_EXHAUSTED; it returns the time of the
// rejection.
func throttleAfter(t *testing.T, a *Adaptive, limit float64, rtt time.Duration) time.Time {
	t.Helper()
	for float64(limitOf(a)) < limit {
		ps := take(t, a, testQueue, 1000, limitOf(a))
		time.Sleep(rtt)
		succeedAll(a, ps)
	}
	ps := take(t, a, testQueue, 1000, 1)
	time.Sleep(rtt)
	a.release(ps[0], outcomeThrottled, 0, time.Now())
	return time.Now()
}

func TestTheFirstRejectionPacesTheQueueAtTheRateItAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		const rtt = 100 * time.Millisecond
		at := throttleAfter(t, a, 30, rtt)
		got := a.Queue(testQueue)
		assert.Equal(t, 1, got.Decreases)
		// The rate is set a little below the rate accepted over the last two round trips,
		// which grew from about 20 to 30 creates per round trip of 100 ms.
		assert.Greater(t, got.Rate, 150.0, "%+v", got)
		assert.Less(t, got.Rate, 300*setPoint, "%+v", got)

		// Creates now start one every 1/rate, each waiting for its slot; the permit counts
		// as in flight from the grant.
		gap := time.Duration(float64(time.Second) / got.Rate)
		var starts []time.Duration
		for range 5 {
			p, ok, _ := a.acquire(testQueue, 1000, at)
			require.True(t, ok)
			starts = append(starts, p.start.Sub(at))
		}
		for i := 1; i < len(starts); i++ {
			assert.InDelta(t, float64(gap), float64(starts[i]-starts[i-1]), float64(time.Microsecond), "starts %v", starts)
		}
		assert.Equal(t, 5, a.Queue(testQueue).InFlight)
	})
}

func TestRejectionsLowerThePacedRateOncePerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		throttleAfter(t, a, 30, 100*time.Millisecond)
		rate := a.Queue(testQueue).Rate
		now := time.Now()
		var round []permit
		for range 10 {
			p, ok, _ := a.acquire(testQueue, 1000, now)
			require.True(t, ok)
			round = append(round, p)
		}
		time.Sleep(time.Second)
		for _, p := range round {
			a.release(p, outcomeThrottled, 0, time.Now())
		}
		got := a.Queue(testQueue)
		assert.InDelta(t, rate*decreaseFactor, got.Rate, 1e-9, "ten rejections of one round: one decrease")
		assert.Equal(t, 2, got.Decreases)

		// It never falls below minRate.
		for range 100 {
			p, _, _ := a.acquire(testQueue, 1000, time.Now())
			a.release(p, outcomeThrottled, 0, time.Now())
		}
		assert.Equal(t, minRate, a.Queue(testQueue).Rate)
	})
}

func TestThePacedRateGrowsWhileItHoldsCreatesBackAndTheySucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		throttleAfter(t, a, 30, 100*time.Millisecond)
		rate := a.Queue(testQueue).Rate
		// Creates offered faster than the rate, all succeeding: for one second the rate grows
		// by growthPerSecond of itself plus growthFloor, compounded.
		start := time.Now()
		held := 0
		for time.Since(start) < time.Second {
			p, ok, _ := a.acquire(testQueue, 1000, time.Now())
			require.True(t, ok)
			if p.binding {
				held++
			}
			time.Sleep(time.Until(p.start))
			a.release(p, outcomeSucceeded, 0, time.Now())
		}
		assert.Greater(t, held, 100, "the rate held creates back")
		grown := a.Queue(testQueue).Rate
		assert.Greater(t, grown, rate*(1+growthPerSecond))
		assert.Less(t, grown, rate*(1+2*growthPerSecond)+2*growthFloor)

		// Creates offered slower than the rate do not grow it.
		for range 20 {
			time.Sleep(time.Second)
			p, _, _ := a.acquire(testQueue, 1000, time.Now())
			require.False(t, p.binding)
			a.release(p, outcomeSucceeded, 0, time.Now())
		}
		assert.Equal(t, grown, a.Queue(testQueue).Rate)
	})
}

func TestFailuresOtherThanResourceExhaustedLeaveTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		for _, p := range take(t, a, testQueue, 10, initialLimit) {
			a.release(p, outcomeOther, 0, time.Now())
		}
		assert.Equal(t, QueueLimit{Limit: initialLimit, Cap: 10}, a.Queue(testQueue))
	})
}

func TestRetryInfoPausesTheQueueUntilItsDelayHasPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		start := time.Now()
		ps := take(t, a, testQueue, 10, 2)
		a.release(ps[0], outcomeThrottled, 3*time.Second, time.Now())
		a.release(ps[1], outcomeThrottled, time.Second, time.Now()) // a shorter one does not shorten it
		_, ok, until := a.acquire(testQueue, 10, time.Now())
		assert.False(t, ok)
		assert.Equal(t, start.Add(3*time.Second), until)
		assert.Equal(t, start.Add(3*time.Second), a.Queue(testQueue).PausedUntil)
		_, ok, _ = a.acquire(otherQueue, 10, time.Now())
		assert.True(t, ok, "another queue is not paused")

		time.Sleep(3*time.Second - time.Nanosecond)
		_, ok, _ = a.acquire(testQueue, 10, time.Now())
		assert.False(t, ok, "still paused a nanosecond before the end")
		time.Sleep(time.Nanosecond)
		_, ok, _ = a.acquire(testQueue, 10, time.Now())
		assert.True(t, ok, "free again when the delay has passed")
	})
}

func TestNewAdaptiveSharesNothing(t *testing.T) {
	assert.NotSame(t, NewAdaptive(), NewAdaptive())
}

func TestTheLimitIsSharedWithinAnAdaptiveAndIndependentAcrossQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		// Two users of the same Adaptive and queue, say two DoFn instances, share one limit.
		first := take(t, a, testQueue, 8, 2)
		second := take(t, a, testQueue, 8, 2)
		assert.True(t, refused(a, testQueue, 8), "4 in flight: the shared limit")
		succeedAll(a, append(first, second...))

		// Another queue of the same Adaptive, and the same queue of another one, are untouched.
		assert.Equal(t, QueueLimit{}, a.Queue(otherQueue))
		take(t, a, otherQueue, 8, initialLimit)
		assert.Equal(t, QueueLimit{Limit: initialLimit, Cap: 8, InFlight: initialLimit}, a.Queue(otherQueue))
		other := NewAdaptive()
		take(t, other, testQueue, 8, initialLimit)
		assert.Equal(t, QueueLimit{Limit: initialLimit, Cap: 8, InFlight: initialLimit}, other.Queue(testQueue))
	})
}

func TestTheCapIsTheLargestMaxInFlightOfItsUsers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		take(t, a, testQueue, 2, 1)
		assert.Equal(t, QueueLimit{Limit: 2, Cap: 2, InFlight: 1}, a.Queue(testQueue), "a cap below the initial limit is the limit")
		take(t, a, testQueue, 10, 1)
		assert.Equal(t, QueueLimit{Limit: 10, Cap: 10, InFlight: 2}, a.Queue(testQueue), "a limit at its cap follows the cap up")
		take(t, a, testQueue, 4, 1)
		assert.Equal(t, 10, a.Queue(testQueue).Cap, "a smaller cap does not lower it")
	})
}

func TestReleaseWakesTheWatchersOfItsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		mine, others := make(chan struct{}, 1), make(chan struct{}, 1)
		a.watch(testQueue, 4, mine)
		a.watch(otherQueue, 4, others)
		ps := take(t, a, testQueue, 4, 2)
		a.release(ps[0], outcomeSucceeded, 0, time.Now())
		a.release(ps[1], outcomeSucceeded, 0, time.Now()) // the signal does not block when one is pending
		assert.Len(t, mine, 1)
		assert.Empty(t, others)
		<-mine
		a.unwatch(testQueue, mine)
		a.release(take(t, a, testQueue, 4, 1)[0], outcomeSucceeded, 0, time.Now())
		assert.Empty(t, mine, "no signal after unwatch")
	})
}

func retryInfoStatus(code codes.Code, delay *durationpb.Duration) *status.Status {
	st, err := status.New(code, "Quota exceeded").WithDetails(&errdetails.RetryInfo{RetryDelay: delay})
	if err != nil {
		panic(err)
	}
	return st
}

func TestThrottleReadsResourceExhaustedAndItsRetryInfo(t *testing.T) {
	withDelay := retryInfoStatus(codes.ResourceExhausted, durationpb.New(1500*time.Millisecond))
	apiErr, ok := apierror.FromError(withDelay.Err())
	require.True(t, ok)
	for _, c := range []struct {
		name      string
		err       error
		throttled bool
		delay     time.Duration
	}{
		{"nil", nil, false, 0},
		{"unavailable", status.Error(codes.Unavailable, "down"), false, 0},
		{"bare resource exhausted", status.Error(codes.ResourceExhausted, "quota"), true, 0},
		{"with RetryInfo", withDelay.Err(), true, 1500 * time.Millisecond},
		{"gax APIError with RetryInfo", apiErr, true, 1500 * time.Millisecond},
		{"wrapped", fmt.Errorf("create: %w", withDelay.Err()), true, 1500 * time.Millisecond},
		{"under another status", fmt.Errorf("%w: %w", status.Error(codes.Internal, "x"), withDelay.Err()), true, 1500 * time.Millisecond},
		{"RetryInfo on another code is ignored", retryInfoStatus(codes.Unavailable, durationpb.New(time.Second)).Err(), false, 0},
		{"negative delay", retryInfoStatus(codes.ResourceExhausted, durationpb.New(-time.Second)).Err(), true, 0},
		{"invalid delay", retryInfoStatus(codes.ResourceExhausted, &durationpb.Duration{Seconds: 1, Nanos: -1}).Err(), true, 0},
		{"huge delay is bounded", retryInfoStatus(codes.ResourceExhausted, durationpb.New(time.Hour)).Err(), true, maxRetryDelay},
	} {
		t.Run(c.name, func(t *testing.T) {
			throttled, delay := throttle(c.err)
			assert.Equal(t, c.throttled, throttled)
			assert.Equal(t, c.delay, delay)
		})
	}
}
