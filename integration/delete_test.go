package integration

import (
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// reminder is a task due two days ahead, so that it waits in its queue to be deleted.
type reminder struct {
	ID  string    `json:"id"`
	Key string    `cloudtasks:"task-id"`
	At  time.Time `cloudtasks:"schedule-time"`
}

func init() { beam.RegisterType(reflect.TypeFor[reminder]()) }

// Delete, on every runner the suite runs on (prism, and the direct runner in CI's second
// pass): the tasks Write named from the elements' task-id field are deleted by the same
// elements; a key whose task is not there counts as gone; an element without a key is a dead
// letter, not a failed bundle.
func TestDeleteRemovesTheTasksWriteNamedFromTheSameElements(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	q := b.newQueue(t, nil)
	at := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Second)
	items := []any{reminder{ID: "a", Key: "key-a", At: at}, reminder{ID: "b", Key: "key-b", At: at}, reminder{ID: "c", Key: "key-c", At: at}}

	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
		HTTP: &cloudtasksio.HTTPTarget{URL: rec.URL + "/remind", Body: formats.JSON()}}, beam.Create(s, items...))
	require.NoError(t, ptest.Run(p))
	require.Len(t, b.pendingTasks(t, q), 3)

	p, s = beam.NewPipelineWithRoot()
	cancel := []any{items[0], items[2], reminder{ID: "z", Key: "key-z", At: at}, reminder{ID: "no-key", At: at}}
	dead := cloudtasksio.Delete(s, cloudtasksio.DeleteConfig{Queue: q, EmulatorEndpoint: b.Addr, OnFailure: cloudtasksio.DeadLetter},
		beam.Create(s, cancel...))
	passert.Equals(s, beam.ParDo(s, codeAndQueue, dead), "TASK_ID "+q.Path())
	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err, "an element without a key is a dead letter, not a failed bundle")

	counters := map[string]int64{}
	for _, c := range pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == cloudtasksio.MetricsNamespace }).Counters() {
		counters[c.Name()] += c.Result()
	}
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsDeleted])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricTasksAlreadyGone], "key-z had no task")
	pending := b.pendingTasks(t, q)
	require.Len(t, pending, 1)
	assert.Equal(t, q.Path()+"/tasks/"+cloudtasksio.TaskID("key-b"), pending[0].GetName())
}
