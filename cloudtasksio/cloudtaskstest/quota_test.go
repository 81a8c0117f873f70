package cloudtaskstest_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

// The client sees a quota rejection as RESOURCE_EXHAUSTED with the
// RetryInfo detail the sink's adaptive concurrency reads. The clock is a
// fake (WithClock), so nothing here depends on real time.
func TestCreateQuotaReachesTheClientWithRetryInfo(t *testing.T) {
	clock := newFakeClock()
	srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch(),
		cloudtaskstest.WithCreateQuota(queueA, cloudtaskstest.CreateQuota{PerSecond: 2, Burst: 2, RetryInfo: true}))
	ctx := context.Background()
	for _, q := range []string{queueA, queueB} {
		_, err := srv.CreateQueue(q)
		require.NoError(t, err)
	}
	create := func(queue string) error {
		_, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: httpTask("http://127.0.0.1:1/x", []byte("{}"))})
		return err
	}
	require.NoError(t, create(queueA))
	require.NoError(t, create(queueA))
	err := create(queueA)
	requireCode(t, codes.ResourceExhausted, err)
	var ae *apierror.APIError
	require.True(t, errors.As(err, &ae), "error %T", err)
	require.NotNil(t, ae.Details().RetryInfo, "RetryInfo detail")
	assert.Equal(t, 500*time.Millisecond, ae.Details().RetryInfo.GetRetryDelay().AsDuration())

	for range 5 {
		require.NoError(t, create(queueB), "queue B has no quota")
	}
	clock.Advance(500 * time.Millisecond)
	require.NoError(t, create(queueA), "a token after 1/rate")

	st := srv.Stats()
	assert.Equal(t, 1, st.QuotaRejections)
	assert.Equal(t, map[string]int{queueA: 1}, st.QuotaRejectionsByQueue)
	assert.Equal(t, 8, st.TasksCreated)
	assert.Len(t, srv.Tasks(queueA), 3)
	srv.ResetStats()
	assert.Zero(t, srv.Stats().QuotaRejections)
	assert.Nil(t, srv.Stats().QuotaRejectionsByQueue)
}

func TestCreateQuotaRejectsBadSettings(t *testing.T) {
	cases := map[string]struct {
		queue string
		q     cloudtaskstest.CreateQuota
		want  string
	}{
		"negative rate":        {queueA, cloudtaskstest.CreateQuota{PerSecond: -1}, "PerSecond"},
		"NaN rate":             {queueA, cloudtaskstest.CreateQuota{PerSecond: math.NaN()}, "PerSecond"},
		"infinite rate":        {cloudtaskstest.AllQueues, cloudtaskstest.CreateQuota{PerSecond: math.Inf(1)}, "PerSecond"},
		"negative burst":       {queueA, cloudtaskstest.CreateQuota{PerSecond: 1, Burst: -1}, "Burst"},
		"burst without a rate": {queueA, cloudtaskstest.CreateQuota{Burst: 3}, "PerSecond above zero"},
		"malformed queue":      {"queue-a", cloudtaskstest.CreateQuota{PerSecond: 1}, "queue path"},
		"empty queue":          {"", cloudtaskstest.CreateQuota{PerSecond: 1}, "queue path"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := cloudtaskstest.NewServerWithAddress("127.0.0.1:0", cloudtaskstest.WithCreateQuota(tc.queue, tc.q))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "WithCreateQuota")
			assert.Contains(t, err.Error(), tc.want)
			assert.Panics(t, func() { cloudtaskstest.NewServer(cloudtaskstest.WithCreateQuota(tc.queue, tc.q)) })

			srv := cloudtaskstest.NewServer()
			t.Cleanup(func() { _ = srv.Close() })
			err = srv.SetCreateQuota(tc.queue, tc.q)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "SetCreateQuota")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
