package cloudtasksio_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// readmeOrder is the element type of the README's snippet, field for field.
type readmeOrder struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	Key    string `cloudtasks:"task-id"` // optional: named tasks, deduplicated on replay
}

// readmeOrders are three orders of which the second has no key.
func readmeOrders() []any {
	return []any{
		readmeOrder{ID: "1", Amount: 10, Key: "order-1"},
		readmeOrder{ID: "2", Amount: 20},
		readmeOrder{ID: "3", Amount: 30, Key: "order-3"},
	}
}

// readmeConfig is the README's snippet against srv.
func readmeConfig(emulator string, policy cloudtasksio.FailurePolicy) cloudtasksio.Config {
	return cloudtasksio.Config{
		Queue:            testQueue,
		HTTP:             validHTTP(),
		OnFailure:        policy,
		EmulatorEndpoint: emulator,
		Writer:           fastRetries,
	}
}

// An element whose task-id field is empty is that element's failure: the README's own snippet,
// with DeadLetter, must not fail the job on one record without a key.
func TestAnEmptyTaskIDFieldIsTheElementsFailureUnderDeadLetter(t *testing.T) {
	srv := newServer(t)
	counters, err := run(t, readmeConfig(srv.Addr, cloudtasksio.DeadLetter), readmeOrders(), func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, describeDeadLetter, dl),
			`TASK_ID cloudtasks projects/p/locations/l/queues/q {"id":"2","amount":20}`)
	})
	require.NoError(t, err)
	tasks := srv.Tasks(testQueue.Path())
	require.Len(t, tasks, 2, "the orders with a key are created")
	for _, task := range tasks {
		assert.Contains(t, []string{testQueue.Path() + "/tasks/" + cloudtasksio.TaskID("order-1"), testQueue.Path() + "/tasks/" + cloudtasksio.TaskID("order-3")}, task.GetName())
	}
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSend])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])
}

func TestAnEmptyTaskIDFieldIsDroppedUnderLogAndDrop(t *testing.T) {
	srv := newServer(t)
	counters, err := run(t, readmeConfig(srv.Addr, cloudtasksio.LogAndDrop), readmeOrders())
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 2)
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])
}

func TestAnEmptyTaskIDFieldFailsTheBundleUnderFailBundle(t *testing.T) {
	srv := newServer(t)
	_, err := run(t, readmeConfig(srv.Addr, cloudtasksio.FailBundle), readmeOrders())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(TASK_ID) under the FailBundle policy")
	assert.Contains(t, err.Error(), `the "task-id" field`)
}

// In exactly-once mode every failure fails the bundle; the empty key is reported as the
// element's TASK_ID failure.
func TestAnEmptyTaskIDFieldFailsTheBundleInExactlyOnceMode(t *testing.T) {
	srv := newServer(t)
	srv.SetTombstoneTTL(testQueue.Path(), 2*time.Hour)
	cfg := readmeConfig(srv.Addr, cloudtasksio.FailBundle)
	cfg.Delivery = cloudtasksio.ExactlyOnce
	_, err := run(t, cfg, readmeOrders())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exactly-once: an element for queue projects/p/locations/l/queues/q failed (TASK_ID)")
}

// A TaskIDFn that returns "" without an error is treated as the task-id field is.
func TestAnEmptyKeyFromTaskIDFnIsTheElementsFailure(t *testing.T) {
	srv := newServer(t)
	cfg := httpConfig(srv)
	cfg.Serializer, cfg.HTTP, cfg.TaskIDFn, cfg.OnFailure = serializeOrder, nil, keyOfOrder, cloudtasksio.DeadLetter
	elems := []any{order{ID: "1", Amount: 1}, order{ID: "empty", Amount: 1}}
	counters, err := run(t, cfg, elems, func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, describeDeadLetter, dl), "TASK_ID cloudtasks projects/p/locations/l/queues/q empty")
	})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 1)
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])

	cfg.OnFailure = cloudtasksio.FailBundle
	_, err = run(t, cfg, elems)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(TASK_ID) under the FailBundle policy")
	assert.Contains(t, err.Error(), "TaskIDFn returned an empty key")
}
