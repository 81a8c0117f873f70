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

func TestAdaptiveLimitStartsAtTheCapAndHoldsNothingBackThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		take(t, a, testQueue, 10, 10)
		// At the cap the limit is open: the engines' own caps are what bound them.
		take(t, a, testQueue, 10, 5)
		got := a.Queue(testQueue)
		assert.Equal(t, QueueLimit{Limit: 10, Cap: 10, InFlight: 15}, got)
	})
}

func TestResourceExhaustedHalvesTheLimitOncePerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		inFlight := take(t, a, testQueue, 100, 40)
		// The whole round is rejected: 40 answers to creates sent before the first decrease.
		for _, p := range inFlight {
			a.release(p, outcomeThrottled, 0, time.Now())
		}
		got := a.Queue(testQueue)
		assert.Equal(t, 20.0, got.Limit, "min(limit 100, 40 in flight) halved, once")
		assert.Equal(t, 1, got.Decreases)
		assert.Zero(t, got.InFlight)

		// The next round: a rejection of a create sent after the decrease decreases again.
		next := take(t, a, testQueue, 100, 20)
		assert.True(t, refused(a, testQueue, 100), "the 21st create waits for the limit of 20")
		a.release(next[0], outcomeThrottled, 0, time.Now())
		assert.Equal(t, 10.0, a.Queue(testQueue).Limit)
		for _, p := range next[1:] {
			a.release(p, outcomeThrottled, 0, time.Now())
		}
		assert.Equal(t, 10.0, a.Queue(testQueue).Limit, "the rest of that round decreases nothing")
		assert.Equal(t, 2, a.Queue(testQueue).Decreases)
	})
}

func TestTheLimitNeverFallsBelowOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		for range 20 {
			p := take(t, a, testQueue, 1000, 1)[0]
			a.release(p, outcomeThrottled, 0, time.Now())
		}
		got := a.Queue(testQueue)
		assert.Equal(t, 1.0, got.Limit)
		assert.Equal(t, 20, got.Decreases)
		// One create may still be in flight, and only one.
		take(t, a, testQueue, 1000, 1)
		assert.True(t, refused(a, testQueue, 1000))
	})
}

func TestSuccessesRaiseTheLimitByAboutOnePerRoundUpToTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		const cap = 8
		p := take(t, a, testQueue, cap, 1)[0]
		for range 5 {
			a.release(p, outcomeThrottled, 0, time.Now())
			p = take(t, a, testQueue, cap, 1)[0]
		}
		a.release(p, outcomeOther, 0, time.Now())
		require.Equal(t, 1.0, a.Queue(testQueue).Limit)

		// Each round sends as many creates as the limit allows, and all succeed.
		var rounds []float64
		for a.Queue(testQueue).Limit < cap && len(rounds) < 100 {
			limit := a.Queue(testQueue).Limit
			ps := take(t, a, testQueue, cap, int(limit))
			assert.True(t, refused(a, testQueue, cap), "the limit %v holds back create %d", limit, int(limit)+1)
			for _, p := range ps {
				a.release(p, outcomeSucceeded, 0, time.Now())
			}
			rounds = append(rounds, a.Queue(testQueue).Limit)
		}
		assert.Equal(t, float64(cap), a.Queue(testQueue).Limit, "the limit reaches the cap")
		// A round of floor(limit) successes adds a little less than one.
		prev := 1.0
		for _, l := range rounds {
			assert.True(t, l > prev && l <= prev+1, "round limits %v grow by at most one", rounds)
			prev = l
		}
		assert.Len(t, rounds, 9, "rounds from 1 to %d: %v", cap, rounds)
		for _, p := range take(t, a, testQueue, cap, 2*cap) {
			a.release(p, outcomeSucceeded, 0, time.Now())
		}
		assert.Equal(t, float64(cap), a.Queue(testQueue).Limit, "and never goes past it")
	})
}

func TestFailuresOtherThanResourceExhaustedLeaveTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		for _, p := range take(t, a, testQueue, 10, 10) {
			a.release(p, outcomeOther, 0, time.Now())
		}
		assert.Equal(t, QueueLimit{Limit: 10, Cap: 10}, a.Queue(testQueue))
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
		// Two users of the same Adaptive and queue, say two bundles, fill one limit.
		first := take(t, a, testQueue, 8, 4)
		second := take(t, a, testQueue, 8, 4)
		a.release(first[0], outcomeThrottled, 0, time.Now())
		assert.Equal(t, 4.0, a.Queue(testQueue).Limit, "8 in flight halved")
		assert.True(t, refused(a, testQueue, 8), "7 in flight: over the shared limit of 4")
		for _, p := range append(first[1:], second[1:]...) {
			a.release(p, outcomeSucceeded, 0, time.Now())
		}
		assert.Equal(t, 1, a.Queue(testQueue).InFlight)

		// Another queue of the same Adaptive, and the same queue of another one, are untouched.
		assert.Equal(t, QueueLimit{}, a.Queue(otherQueue))
		take(t, a, otherQueue, 8, 8)
		assert.Equal(t, QueueLimit{Limit: 8, Cap: 8, InFlight: 8}, a.Queue(otherQueue))
		other := NewAdaptive()
		take(t, other, testQueue, 8, 8)
		assert.Equal(t, QueueLimit{Limit: 8, Cap: 8, InFlight: 8}, other.Queue(testQueue))
	})
}

func TestTheCapIsTheLargestMaxInFlightOfItsUsers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive()
		take(t, a, testQueue, 4, 1)
		take(t, a, testQueue, 10, 1)
		assert.Equal(t, QueueLimit{Limit: 10, Cap: 10, InFlight: 2}, a.Queue(testQueue), "an untouched limit follows the cap up")
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
