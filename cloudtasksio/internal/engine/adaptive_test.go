package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine/adaptive"
)

// Tests of slow start's pace through engines, and of what a RESOURCE_EXHAUSTED answer tells
// the controller (throttle). The controller is tested on its own in package adaptive; the
// engine's use of it against throttling fakes in adaptive_engine_test.go.

const otherQueue = "projects/p/locations/l/queues/other"

func TestAtShortRoundTripsSlowStartDoublesAtMostOncePerSlowStartRound(t *testing.T) {
	// At a 5 ms round trip a quota's bucket of a tenth of a second holds twenty round trips:
	// doubling every round trip would reach thousands of creates per second before the first
	// rejection could come back. Each success adds rtt/slowStartRound of slowStartGrowth, so
	// the limit grows about as fast per slowStartRound as it would per round trip at a round
	// trip of slowStartRound.
	reach := func(rtt time.Duration) (took time.Duration) {
		synctest.Test(t, func(t *testing.T) {
			a := NewAdaptive()
			f := (&throttlingFake{latency: rtt}).init()
			o := adaptiveOptions(a)
			o.MaxInFlight = 1000
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- run(context.Background(), f, o, testQueue, 5000) }()
			for a.Queue(testQueue).Limit < 64 {
				require.Less(t, time.Since(start), 10*time.Second, "slow start never reached 64")
				time.Sleep(time.Millisecond)
			}
			took = time.Since(start)
			require.NoError(t, <-done)
		})
		return took
	}
	short, long := reach(5*time.Millisecond), reach(slowStartRound)
	t.Logf("from %d to 64 creates in flight: %v at 5 ms, %v at %v", atOnce, short, long, slowStartRound)
	// Four doublings. Unscaled, 5 ms would take a fifth of the time 25 ms takes.
	assert.Greater(t, short, long/2)
	assert.Less(t, short, 2*long)
	assert.Greater(t, short, 3*slowStartRound)
}

func TestAtLongRoundTripsSlowStartDoublesEveryRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Slow start spreads its limit over the round trip at 1+slowStartGrowth times the
		// limit's rate: at the limit's rate, the creates of one round trip would wait for the
		// successes of the one before and the limit would grow by about 1.6 a round trip, not
		// 2, taking a third longer to reach a quota.
		const rtt = 200 * time.Millisecond
		f := (&throttlingFake{latency: rtt}).init()
		start := time.Now()
		var mu sync.Mutex
		perRound := make([]int, 6)
		creator := CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
			mu.Lock()
			if round := int(time.Since(start) / rtt); round < len(perRound) {
				perRound[round]++
			}
			mu.Unlock()
			return f.CreateTask(ctx, req)
		})
		o := adaptiveOptions(NewAdaptive())
		o.MaxInFlight = 1000
		require.NoError(t, run(context.Background(), creator, o, testQueue, 3000))
		t.Logf("creates sent per round trip: %v", perRound)
		// The first round trip goes at initialRate; from the second on, each doubles the one
		// before (a little less: a create sent with less than half of the limit in use does
		// not grow it).
		assert.Equal(t, initialLimit+int(initialRate*rtt.Seconds())-1, perRound[0])
		for r := 2; r < 5; r++ {
			assert.GreaterOrEqual(t, float64(perRound[r]), 1.85*float64(perRound[r-1]), "round trip %d: %v", r, perRound)
		}
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
		{"huge delay is bounded", retryInfoStatus(codes.ResourceExhausted, durationpb.New(time.Hour)).Err(), true, adaptive.MaxRetryDelay},
	} {
		t.Run(c.name, func(t *testing.T) {
			throttled, delay := throttle(c.err)
			assert.Equal(t, c.throttled, throttled)
			assert.Equal(t, c.delay, delay)
		})
	}
}
