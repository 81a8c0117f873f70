package cloudtasksio

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

func TestPerQueueStateDroppedDuringBundlesIsRebuiltAndTheClientStaysOpen(t *testing.T) {
	const queues = 12
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	for i := range queues {
		_, err := srv.CreateQueue("projects/p/locations/l/queues/" + manyQueueName(i))
		require.NoError(t, err)
	}
	reads := countGetQueue(srv)
	cfg := Config{QueueFn: queueOfSpreadOrder, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		EmulatorEndpoint: srv.Addr}
	spec, err := compile(cfg, typeOf(spreadOrder{}))
	require.NoError(t, err)

	// Two DoFn instances of one process, with per-queue state bounded at 3 queues instead of
	// 10,000, so that a bundle over 12 queues drops state while creates are in flight.
	states := &gcpconn.Cache[preflightKey, *preflightResult]{MaxEntries: 3}
	limits := engine.NewAdaptive()
	limits.MaxQueues = 3
	instances := make([]*writeFn, 2)
	for i := range instances {
		f := &writeFn{Spec: spec}
		require.NoError(t, f.Setup())
		f.preflight.cache = states
		f.adaptive = limits
		instances[i] = f
	}
	client, err := sharedClient(t.Context(), spec.Client)
	require.NoError(t, err)

	ctx, counters := metricsContext()
	for bundle := range 3 {
		for n, f := range instances {
			require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
			for i := range queues {
				require.NoError(t, f.ProcessElement(ctx, 0, spreadOrder{Queue: manyQueueName(i), ID: bundle*100 + n*10 + i}, discardDeadLetters))
			}
			require.NoError(t, f.FinishBundle(ctx, discardDeadLetters), "bundle %d of instance %d", bundle, n)
			assert.LessOrEqual(t, states.Len(), 3)
			assert.LessOrEqual(t, limits.Len(), 3)
		}
	}
	again, err := sharedClient(t.Context(), spec.Client)
	require.NoError(t, err)
	assert.Same(t, client, again, "the client is never dropped or replaced")
	total := 0
	for i := range queues {
		total += len(srv.Tasks("projects/p/locations/l/queues/" + manyQueueName(i)))
	}
	assert.Equal(t, 3*2*queues, total, "every task was created through the one client")
	assert.Zero(t, counters()[MetricRecordsSendErrors])
	assert.Equal(t, int64(3*2*queues), reads.Load(),
		"with room for 3 queues, each queue's preflight was dropped before it came back, and read again each time")
}
