package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/quickstart/quickstart"
)

// TestQuickstartCreatesFastAndDeliversAtTheQueueRate runs the quickstart's own code, on an
// in-process server of its own whatever the suite's backend.
func TestQuickstartCreatesFastAndDeliversAtTheQueueRate(t *testing.T) {
	const orders, rate = 300, 100
	var progress bytes.Buffer
	chart := filepath.Join(t.TempDir(), "run.svg")
	sum, err := quickstart.Run(context.Background(), exampleEnv(exampleCloudTasks(t), &progress), quickstart.Options{
		Orders: orders,
		Rate:   rate,
		Chart:  chart,
	})
	require.NoError(t, err)
	svg, err := os.ReadFile(chart)
	require.NoError(t, err, "the chart asked for is written")
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "Tasks created and delivered")
	assert.Equal(t, chart, sum.Chart)

	assert.Equal(t, int64(orders), sum.Orders)
	assert.Equal(t, int64(orders), sum.Sent)
	assert.Equal(t, orders, sum.TasksCreated)
	assert.Zero(t, sum.Deduplicated)
	assert.Zero(t, sum.Skipped)
	assert.Zero(t, sum.SendErrors)
	assert.Zero(t, sum.DeadLetters)
	assert.Equal(t, int64(orders), sum.Attempts, "one create attempt per order: nothing was retried")
	assert.Equal(t, int64(orders), sum.AttemptsPerTask.Count)
	assert.Equal(t, int64(1), sum.AttemptsPerTask.Max)
	assert.GreaterOrEqual(t, sum.AttemptLatency.Min, quickstart.DefaultCreateLatency.Milliseconds(), "no create beat the server's added latency")
	assert.Equal(t, orders, sum.Delivered, "every order delivered")
	assert.Equal(t, orders, sum.DistinctDelivered, "and each one once")

	assert.Equal(t, float64(rate), sum.Rate)
	require.Equal(t, 100, sum.Burst, "the server's burst for 100/s")
	// The queue starts with a full bucket of burst tokens and earns rate more per second, and
	// nothing can be delivered before the first task exists: the last delivery cannot come
	// sooner than (orders - burst) / rate after the first create, however the machine is
	// loaded. The margin only covers timer rounding.
	minDelivery := time.Duration(float64(orders-sum.Burst)/rate*float64(time.Second)) - 10*time.Millisecond
	assert.GreaterOrEqual(t, sum.LastDelivery.Sub(sum.FirstCreate), minDelivery, "delivery held to the queue's rate")
	assert.Greater(t, sum.CreatesPerSecond(), float64(rate), "creation is not held to the queue's rate")
	assert.Positive(t, sum.SteadyRate)

	assert.Contains(t, progress.String(), "created 300/300  delivered 300/300", "the final progress line")
	var out bytes.Buffer
	sum.Print(&out)
	assert.Contains(t, out.String(), "at most 100 dispatches/s (burst 100, 1000 concurrent)")
	assert.Contains(t, out.String(), "300 distinct tasks, 0 duplicate deliveries")
	assert.Contains(t, out.String(), "create attempts              300   createAttemptLatencyMillis: mean ")
	assert.Contains(t, out.String(), "Chart of tasks created and delivered over time: "+chart)
}
