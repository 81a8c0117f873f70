package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// Two Write steps fed by one PCollection, writing to one queue with one client setting: the
// runner fuses them into one stage and Beam calls their DoFns one after the other on the
// bundle's goroutine, while they share the queue's adaptive concurrency state (one per client
// setting and process). A create slot one of them booked ahead could once keep the other
// waiting in its FinishBundle for good, since only the first could start it and it was not
// called again.
func TestTwoWritesOfOnePCollectionIntoOneQueueBothFinish(t *testing.T) {
	needsCloudtaskstest(t, "SetLatency")
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	b.Server.SetLatency(time.Millisecond) // a short round trip: slow start books slots ahead
	q := b.newQueue(t, nil)

	const n = 2000
	items := make([]any, n)
	for i := range items {
		items[i] = dispatchItem{ID: fmt.Sprint(i), Qty: i}
	}
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, items...)
	for _, step := range []string{"first", "second"} {
		cloudtasksio.Write(s.Scope(step), cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
			HTTP: &cloudtasksio.HTTPTarget{URL: "http://127.0.0.1:9/" + step, Body: formats.JSON()}}, in)
	}

	done := make(chan error, 1)
	go func() {
		_, err := ptest.RunWithMetrics(p)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Minute):
		t.Fatalf("the pipeline did not finish in 3 minutes; %d of %d tasks created", b.Server.Stats().TasksCreated, 2*n)
	}
	require.Equal(t, 2*n, b.Server.Stats().TasksCreated, "every element became a task in each step")
}
