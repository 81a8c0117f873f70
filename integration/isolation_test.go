package integration

import (
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeOf(tenantItem{}))
	register.Function1x2(queueOfTenantItem)
	register.Function1x1(codeAndQueue)
}

// tenantItem is an element of one tenant, whose queue it names.
type tenantItem struct {
	ID    string `json:"id"`
	Queue string `json:"-"`
}

// queueOfTenantItem is a QueueFn: the queue the element names.
func queueOfTenantItem(i tenantItem) (cloudtasksio.Queue, error) {
	return cloudtasksio.ParseQueue(i.Queue)
}

// codeAndQueue renders a dead letter as "<code> <queue path>".
func codeAndQueue(fe deadletter.FailedElement) string { return fe.Code + " " + fe.Destination }

// TestOneMissingQueueAmongTwoFailsOnlyItsOwnElements writes to two queues, one of which does
// not exist. By default the job fails; under DestinationIsolate the existing queue's tasks
// are created and the missing queue's elements are dead letters with code NOT_FOUND.
func TestOneMissingQueueAmongTwoFailsOnlyItsOwnElements(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	good := b.newQueue(t, nil)
	missing, err := cloudtasksio.NewQueue(testProject, testLocation, uniqueQueueID(t)+"-missing")
	require.NoError(t, err)
	var items []any
	for _, id := range []string{"a", "b", "c"} {
		items = append(items, tenantItem{ID: id, Queue: good.Path()}, tenantItem{ID: id, Queue: missing.Path()})
	}
	cfg := func(policy cloudtasksio.DestinationFailurePolicy) cloudtasksio.Config {
		return cloudtasksio.Config{QueueFn: queueOfTenantItem, EmulatorEndpoint: b.Addr,
			HTTP:      &cloudtasksio.HTTPTarget{URL: rec.URL + "/tenant", Body: formats.JSON()},
			OnFailure: cloudtasksio.DeadLetter, OnDestinationFailure: policy,
			Writer: cloudtasksio.WriterOptions{NotFoundRecoveryInitialBackoff: 10 * time.Millisecond,
				NotFoundRecoveryMaxBackoff: 10 * time.Millisecond, PerDestinationMetrics: true}}
	}

	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Write(s, cfg(cloudtasksio.DestinationFailBundle), beam.Create(s, items...))
	require.Error(t, ptest.Run(p), "by default the missing queue fails the job")

	p, s = beam.NewPipelineWithRoot()
	dead := cloudtasksio.Write(s, cfg(cloudtasksio.DestinationIsolate), beam.Create(s, items...))
	want := "NOT_FOUND " + missing.Path()
	passert.Equals(s, beam.ParDo(s, codeAndQueue, dead), want, want, want)
	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err, "under DestinationIsolate the missing queue fails only its own elements")
	counters := map[string]int64{}
	for _, c := range pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == cloudtasksio.MetricsNamespace }).Counters() {
		counters[c.Name()] += c.Result()
	}
	assert.Equal(t, int64(3), counters[cloudtasksio.MetricQueueFailures])
	assert.Equal(t, int64(3), counters[cloudtasksio.MetricDestinationQueueFailures(missing.Path())])
	assert.Equal(t, int64(3), counters[cloudtasksio.MetricDestinationRecordsSend(good.Path())])

	// Every task delivered is the existing queue's (the failed first run may have created some
	// of them too).
	for _, d := range rec.waitFor(t, b, 3) {
		assert.Equal(t, "/tenant", d.Path)
		assert.Equal(t, good.Name, d.Header.Get("X-CloudTasks-QueueName"))
	}
}
