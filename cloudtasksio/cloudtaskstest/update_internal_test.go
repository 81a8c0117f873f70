package cloudtaskstest

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/require"
)

// Two UpdateQueue calls that change different fields of one queue at the same time must both
// take effect: each reads the queue, changes its field and writes the queue back, and a write
// based on a copy taken before the other's write would undo it.
func TestConcurrentUpdatesOfOneQueueKeepEachOthersChanges(t *testing.T) {
	st := newStore(storeConfig{now: time.Now, log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const name = "projects/p/locations/l/queues/q"
	_, err := st.updateQueue(&cloudtaskspb.Queue{Name: name}, nil)
	require.NoError(t, err)

	for round := 1; round <= 500; round++ {
		var wg sync.WaitGroup
		var rateErr, retryErr error
		wg.Go(func() {
			_, rateErr = st.updateQueue(&cloudtaskspb.Queue{Name: name,
				RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: float64(round)}},
				[]string{"rate_limits.max_dispatches_per_second"})
		})
		wg.Go(func() {
			_, retryErr = st.updateQueue(&cloudtaskspb.Queue{Name: name,
				RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: int32(round)}},
				[]string{"retry_config.max_attempts"})
		})
		wg.Wait()
		require.NoError(t, rateErr)
		require.NoError(t, retryErr)

		st.mu.Lock()
		q := st.queues[name].q
		rate, attempts := q.GetRateLimits().GetMaxDispatchesPerSecond(), q.GetRetryConfig().GetMaxAttempts()
		st.mu.Unlock()
		require.Equal(t, float64(round), rate, "round %d: the rate limit update was lost", round)
		require.Equal(t, int32(round), attempts, "round %d: the retry config update was lost", round)
	}
}
