package cloudtasksio

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// slowCreator takes latency for every call (on the fake clock inside a synctest bubble) and
// answers the first calls from script, then succeeds.
type slowCreator struct {
	latency time.Duration
	mu      sync.Mutex
	script  []error
	calls   int
}

func (c *slowCreator) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	select {
	case <-time.After(c.latency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if len(c.script) > 0 {
		err := c.script[0]
		c.script = c.script[1:]
		return nil, err
	}
	return req.GetTask(), nil
}

func TestCreateLatencyAndAttemptsPerTaskDistributions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		spec := eoSpec(t, "latency", eoPlainOrder{}, staged)
		spec.Writer.MaxInFlightTasks = 1 // one create at a time: the script hits the first envelope
		unavailable := status.Error(codes.Unavailable, "busy")
		creator := &slowCreator{latency: 40 * time.Millisecond, script: []error{unavailable, unavailable}}
		envs := stageAll(t, spec, plainOrders(5)...)
		ctx, counters := metricsContext()
		f := newStagedCreateFnWith(spec, creator)
		require.NoError(t, f.Setup())
		start := time.Now()
		require.NoError(t, createAll(ctx, f, envs))
		require.Equal(t, 7, creator.calls, "the first envelope took three attempts, the others one")
		assert.Greater(t, time.Since(start), 7*40*time.Millisecond, "the backoffs came on top of the calls")

		got := distributions(ctx)
		// count, sum, min, max
		assert.Equal(t, [4]int64{7, 7 * 40, 40, 40}, got[MetricCreateAttemptLatencyMillis],
			"one sample per attempt, failed ones included, each the call alone (not its backoff)")
		assert.Equal(t, [4]int64{5, 7, 1, 3}, got[MetricCreateAttemptsPerTask], "one sample per created task")
		assert.Equal(t, int64(5), counters()[MetricRecordsSend])
		assert.Equal(t, int64(2), counters()[MetricErrorClass("UNAVAILABLE")])
	})
}

func TestAnAssumedCreatedEnvelopeAddsNoAttemptSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.ExpiredEnvelopePolicy = ExpiredAssumeCreated
		spec := eoSpec(t, "assumed", eoOrder{}, staged)
		creator := &slowCreator{latency: 10 * time.Millisecond}
		ctx, _ := metricsContext()
		f := newStagedCreateFnWith(spec, creator)
		require.NoError(t, f.Setup())
		require.NoError(t, createAll(ctx, f, expiredEnvelope(t, spec, "k")))
		assert.Zero(t, creator.calls)
		got := distributions(ctx)
		assert.Zero(t, got[MetricCreateAttemptLatencyMillis][0], "nothing was sent")
		assert.Zero(t, got[MetricCreateAttemptsPerTask][0], "nor counted as created")
	})
}
