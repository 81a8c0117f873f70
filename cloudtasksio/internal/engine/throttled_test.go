package engine

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Tests of Engine.Throttled, the time the engine holds requests back under a quota
// (throttled.go).

func retryAfter(d time.Duration) error {
	return retryInfoStatus(codes.ResourceExhausted, durationpb.New(d)).Err()
}

func TestThrottledTimeIsTheTimeAPausedQueueHoldsItsCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"a": {retryAfter(3 * time.Second)}})
		o := adaptiveOptions(NewAdaptive())
		o.Jitter = baseOptions().Jitter
		h := newHarness(t, f, o)
		require.NoError(t, h.submitID("a"))
		synctest.Wait() // a is refused: its queue pauses for 3s, and a parks as long
		for _, id := range []string{"b", "c", "d"} {
			require.NoError(t, h.submitID(id))
		}
		time.Sleep(time.Second)
		assert.Equal(t, time.Second, h.e.Throttled(), "the clock runs while the creates are held")
		require.NoError(t, h.flush())

		assert.Equal(t, 3*time.Second, h.e.Throttled(), "from the refusal until the pause ended")
		for _, id := range []string{"a", "b", "c", "d"} {
			assert.Equal(t, 3*time.Second, h.createdAt[id], id)
		}
		time.Sleep(time.Minute)
		assert.Equal(t, 3*time.Second, h.e.Throttled(), "and stopped when the engine let them go")
	})
}

func TestARetryParkedForItsRetryInfoDelayIsThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"a": {retryAfter(3 * time.Second)}})
		h := newHarness(t, f, adaptiveOptions(NewAdaptive()))
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.flush())
		assert.Equal(t, 3*time.Second, h.createdAt["a"])
		assert.Equal(t, 3*time.Second, h.e.Throttled(), "the delay the service asked for, not the 100ms backoff")
	})
}

func TestThrottledTimeIsZeroWithoutAQuota(t *testing.T) {
	for _, c := range []struct {
		name     string
		adaptive bool
		err      error
	}{
		{"UNAVAILABLE backs off", true, errUnavailable},
		{"DEADLINE_EXCEEDED backs off", true, status.Error(codes.DeadlineExceeded, "slow")},
		{"RESOURCE_EXHAUSTED without RetryInfo backs off", true, status.Error(codes.ResourceExhausted, "quota")},
		{"a RetryInfo delay shorter than the backoff", true, retryAfter(10 * time.Millisecond)},
		{"adaptive concurrency off ignores RetryInfo", false, retryAfter(3 * time.Second)},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := scripted(map[string][]error{"a": repeat(c.err, 3)})
				o := baseOptions()
				if c.adaptive {
					o.Adaptive = NewAdaptive()
				}
				h := newHarness(t, f, o)
				require.NoError(t, h.submitID("a"))
				require.NoError(t, h.flush())
				require.Equal(t, 4, f.total(), "a failed three times, then was created")
				assert.Positive(t, h.createdAt["a"], "a waited for its retries")
				assert.Zero(t, h.e.Throttled())
			})
		})
	}
}

func TestSlowStartHoldingCreatesBackIsNotThrottling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(string, int) (time.Duration, error) { return 20 * time.Millisecond, nil })
		o := adaptiveOptions(NewAdaptive())
		h := newHarness(t, f, o)
		for i := range 300 {
			require.NoError(t, h.submitID(fmt.Sprint(i)))
		}
		require.NoError(t, h.flush())
		require.Len(t, h.created, 300)
		assert.Greater(t, h.maxParked, 10, "slow start held creates back while its limit grew")
		assert.Zero(t, h.e.Throttled(), "no quota held them")
	})
}

func TestThrottledTimeIsTheTimeAPacedQueueHoldsItsCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(nil)
		o := adaptiveOptions(NewAdaptive())
		o.StartRate = 10 // creates per second: the 21 creates take 2s
		h := newHarness(t, f, o)
		for i := range 21 {
			require.NoError(t, h.submitID(fmt.Sprint(i)))
		}
		require.NoError(t, h.flush())
		require.Equal(t, 21, f.total())
		last := f.times("20", h.start)[0]
		assert.InDelta(t, 2*time.Second, last, float64(150*time.Millisecond), "the rate paced the creates")
		assert.Equal(t, last, h.e.Throttled(), "held from the second create until the last one started")
	})
}

func TestAFailedEngineStopsItsThrottleClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"a": {retryAfter(3 * time.Second)}})
		h := newHarness(t, f, adaptiveOptions(NewAdaptive()))
		require.NoError(t, h.submitID("a"))
		synctest.Wait()
		require.NoError(t, h.submitID("b"))
		time.Sleep(time.Second)
		h.e.Fail(errors.New("the bundle failed"))
		time.Sleep(time.Minute)
		assert.Equal(t, time.Second, h.e.Throttled(), "the held requests were abandoned when the engine failed")
	})
}
