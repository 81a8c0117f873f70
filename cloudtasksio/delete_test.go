package cloudtasksio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/googleapis/gax-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	register.Function1x2(keyOfCancellation)
	register.Function1x2(queueOfCancellation)
	register.Function1x2(previousKey)
}

// cancellation is the element of the Delete tests that carry more than a key.
type cancellation struct {
	Queue string
	Order string
}

// keyOfCancellation is a Delete's TaskIDFn: "order-<Order>"; it fails for order "nokey".
func keyOfCancellation(c cancellation) (string, error) {
	if c.Order == "nokey" {
		return "", errors.New("no key for this order")
	}
	if c.Order == "" {
		return "", nil
	}
	return "order-" + c.Order, nil
}

// queueOfCancellation is a Delete's QueueFn: queue Queue of project p, location l, unchecked.
func queueOfCancellation(c cancellation) (Queue, error) {
	return Queue{Project: "p", Location: "l", Name: c.Queue}, nil
}

const deleteQueue = "projects/p/locations/l/queues/deletes"

// newDeleteServer starts a storing-only server with the queue of the Delete tests, and counts
// the DeleteTask calls it answers.
func newDeleteServer(t *testing.T) (*cloudtaskstest.Server, *atomic.Int64) {
	t.Helper()
	srv := freshAddrServer(t) // the queue reads of an earlier server on the same port are cached
	_, err := srv.CreateQueue(deleteQueue)
	require.NoError(t, err)
	var calls atomic.Int64
	srv.Observe("DeleteTask", func(cloudtaskstest.Call) { calls.Add(1) })
	return srv, &calls
}

// createNamed creates, in queue, the task Write names from key.
func createNamed(t *testing.T, srv *cloudtaskstest.Server, queue, key string) string {
	t.Helper()
	client, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: srv.Addr})
	require.NoError(t, err)
	q, err := ParseQueue(queue)
	require.NoError(t, err)
	task, err := client.CreateTask(t.Context(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{Name: taskName(q, key),
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.com/orders"}}}})
	require.NoError(t, err)
	return task.GetName()
}

// fastDeletes is the Delete tests' writer: default budgets, short waits.
var fastDeletes = WriterOptions{RecoveryInitialBackoff: time.Millisecond, RecoveryMaxBackoff: time.Millisecond,
	NotFoundRecoveryInitialBackoff: time.Millisecond, NotFoundRecoveryMaxBackoff: time.Millisecond}

// newDeleteFn returns a set-up Delete DoFn for cfg, which gets srv's address, over elements of
// the type of elem.
func newDeleteFn(t *testing.T, srv *cloudtaskstest.Server, cfg DeleteConfig, elem any) *deleteFn {
	t.Helper()
	cfg.EmulatorEndpoint = srv.Addr
	if cfg.Queue.IsZero() && cfg.QueueFn == nil {
		q, err := ParseQueue(deleteQueue)
		require.NoError(t, err)
		cfg.Queue = q
	}
	spec, err := compileDelete(cfg, typeOf(elem))
	require.NoError(t, err)
	f := &deleteFn{Spec: spec}
	require.NoError(t, f.Setup())
	return f
}

// runDeleteBundle runs one bundle of elems through f in a context that records metrics, and
// returns its dead letters, counters and error.
func runDeleteBundle(t *testing.T, f *deleteFn, elems ...any) ([]deadletter.FailedElement, map[string]int64, error) {
	t.Helper()
	ctx, counters := metricsContext()
	dl := &deadLetters{}
	require.NoError(t, f.StartBundle(ctx, dl.emit))
	for _, e := range elems {
		if err := f.ProcessElement(ctx, 7, e, dl.emit); err != nil {
			_ = f.FinishBundle(ctx, dl.emit)
			return dl.out, counters(), err
		}
	}
	err := f.FinishBundle(ctx, dl.emit)
	return dl.out, counters(), err
}

func TestDeleteRemovesTheTaskNamedFromEachKeyAndCountsTheGoneApart(t *testing.T) {
	srv, calls := newDeleteServer(t)
	client, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: srv.Addr})
	require.NoError(t, err)
	for _, key := range []string{"a", "b", "c", "deleted"} {
		createNamed(t, srv, deleteQueue, key)
	}
	other := createNamed(t, srv, deleteQueue, "kept")
	q, _ := ParseQueue(deleteQueue)
	require.NoError(t, client.DeleteTask(t.Context(), &cloudtaskspb.DeleteTaskRequest{Name: taskName(q, "deleted")}))
	calls.Store(0)

	f := newDeleteFn(t, srv, DeleteConfig{Writer: fastDeletes}, "")
	out, counters, err := runDeleteBundle(t, f, "a", "b", "c", "deleted", "never")
	require.NoError(t, err)
	assert.Empty(t, out)
	tasks := srv.Tasks(deleteQueue)
	require.Len(t, tasks, 1, "only the task of a key not given is left")
	assert.Equal(t, other, tasks[0].GetName())
	assert.Equal(t, int64(5), calls.Load(), "one DeleteTask per key; a task not there is not retried")
	assert.Equal(t, int64(3), counters[MetricRecordsDeleted])
	assert.Equal(t, int64(2), counters[MetricTasksAlreadyGone], "deleted before, and never created")
	assert.Zero(t, counters[MetricRecordsSendErrors])
	assert.Zero(t, counters[MetricRecordsSend], "a delete is no create")
}

func TestDeleteOfATaskInAMissingQueueRetriesOnTheNotFoundBudgetThenFailsTheBundle(t *testing.T) {
	srv, calls := newDeleteServer(t)
	for _, policy := range []FailurePolicy{FailBundle, DeadLetter} {
		calls.Store(0)
		f := newDeleteFn(t, srv, DeleteConfig{Queue: Queue{Project: "p", Location: "l", Name: "missing"}, Writer: fastDeletes, OnFailure: policy}, "")
		out, counters, err := runDeleteBundle(t, f, "a")
		require.Error(t, err, "%v", policy)
		assert.Equal(t, codes.NotFound, status.Code(err))
		assert.Contains(t, err.Error(), "cloudtasksio: deleting task \"projects/p/locations/l/queues/missing/tasks/"+TaskID("a")+"\" failed with NOT_FOUND after 3 attempt(s)")
		assert.Contains(t, err.Error(), "the queue does not exist")
		assert.Equal(t, int64(3), calls.Load(), "the NOT_FOUND budget's three attempts")
		assert.Empty(t, out, "%v: a missing queue is no element's failure", policy)
		assert.Zero(t, counters[MetricTasksAlreadyGone], "a missing queue never makes a delete look done")
		assert.Equal(t, int64(3), counters[MetricErrorClass("NOT_FOUND")])
	}
}

func TestDeleteRetriesTransientFailures(t *testing.T) {
	srv, calls := newDeleteServer(t)
	createNamed(t, srv, deleteQueue, "a")
	srv.InjectErrors("DeleteTask", codes.Unavailable, codes.Unavailable)
	f := newDeleteFn(t, srv, DeleteConfig{Writer: fastDeletes}, "")
	_, counters, err := runDeleteBundle(t, f, "a")
	require.NoError(t, err)
	assert.Empty(t, srv.Tasks(deleteQueue))
	assert.Equal(t, int64(3), calls.Load())
	assert.Equal(t, int64(2), counters[MetricErrorClass("UNAVAILABLE")])
	assert.Equal(t, int64(1), counters[MetricRecordsDeleted])
}

func TestDeletePermissionDeniedFailsTheBundleWhateverThePolicy(t *testing.T) {
	srv, _ := newDeleteServer(t)
	srv.InjectErrors("DeleteTask", codes.PermissionDenied)
	f := newDeleteFn(t, srv, DeleteConfig{Writer: fastDeletes, OnFailure: LogAndDrop}, "")
	_, _, err := runDeleteBundle(t, f, "a")
	require.Error(t, err)
	assert.Equal(t, codes.PermissionDenied, status.Code(err))
}

// rejectKey makes srv answer INVALID_ARGUMENT to the delete of the task of key.
func rejectKey(srv *cloudtaskstest.Server, key string) {
	srv.AddReactor("DeleteTask", cloudtaskstest.ReactorFunc(func(req proto.Message) (bool, proto.Message, error) {
		if req.(*cloudtaskspb.DeleteTaskRequest).GetName() == deleteQueue+"/tasks/"+TaskID(key) {
			return true, nil, status.Error(codes.InvalidArgument, "the name is malformed")
		}
		return false, nil, nil
	}))
}

func TestDeleteFailurePolicies(t *testing.T) {
	elems := []any{cancellation{Order: "1"}, cancellation{Order: "bad"}, cancellation{Order: "nokey"}, cancellation{Order: ""}, cancellation{Order: "2"}}
	setup := func(t *testing.T, policy FailurePolicy) *deleteFn {
		srv, _ := newDeleteServer(t)
		rejectKey(srv, "order-bad")
		return newDeleteFn(t, srv, DeleteConfig{TaskIDFn: keyOfCancellation, Writer: fastDeletes, OnFailure: policy}, cancellation{})
	}

	t.Run("FailBundle", func(t *testing.T) {
		_, counters, err := runDeleteBundle(t, setup(t, FailBundle), elems...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "under the FailBundle policy")
		assert.Equal(t, int64(1), counters[MetricRecordsSendErrors], "the bundle stops at its first failure")
	})

	t.Run("LogAndDrop", func(t *testing.T) {
		logs := captureLogs(t)
		out, counters, err := runDeleteBundle(t, setup(t, LogAndDrop), elems...)
		require.NoError(t, err)
		assert.Empty(t, out)
		assert.Equal(t, int64(3), counters[MetricRecordsSendErrors])
		assert.Equal(t, int64(2), counters[MetricTasksAlreadyGone], "orders 1 and 2 had no task")
		lines := logLines(logs, "cloudtasksio: dropped")
		require.Len(t, lines, 3)
		assert.Contains(t, lines[0]+lines[1]+lines[2], "DeleteConfig.TaskIDFn failed: no key for this order")
		assert.Contains(t, lines[0]+lines[1]+lines[2], "DeleteConfig.TaskIDFn returned an empty key")
		assert.Contains(t, lines[0]+lines[1]+lines[2], "INVALID_ARGUMENT")
	})

	t.Run("DeadLetter", func(t *testing.T) {
		out, counters, err := runDeleteBundle(t, setup(t, DeadLetter), elems...)
		require.NoError(t, err)
		require.Len(t, out, 3)
		assert.Equal(t, int64(3), counters[MetricRecordsSendErrors])
		byCode := map[string][]deadletter.FailedElement{}
		for _, fe := range out {
			assert.Equal(t, DeleteConnector, fe.Connector)
			assert.Equal(t, deleteQueue, fe.Destination)
			byCode[fe.Code] = append(byCode[fe.Code], fe)
			_, err := FailedTask(fe)
			assert.ErrorContains(t, err, `not "cloudtasks"`, "a failed delete is never taken for a failed create")
		}
		require.Len(t, byCode[CodeTaskID], 2)
		for _, fe := range byCode[CodeTaskID] {
			assert.Empty(t, fe.Payload, "no task was named")
		}
		require.Len(t, byCode[CodeInvalidArgument], 1)
		fe := byCode[CodeInvalidArgument][0]
		assert.Contains(t, fe.Error, "Cloud Tasks rejected the deletion of task")
		req := &cloudtaskspb.DeleteTaskRequest{}
		require.NoError(t, proto.Unmarshal(fe.Payload, req))
		assert.Equal(t, deleteQueue+"/tasks/"+TaskID("order-bad"), req.GetName())
		elem, err := deadletter.DecodeElement[cancellation](fe)
		require.NoError(t, err)
		assert.Equal(t, cancellation{Order: "bad"}, elem)
	})
}

// keyedCancellation names its task as Write would: by its task-id field.
type keyedCancellation struct {
	Reason string `json:"reason"`
	Key    string `cloudtasks:"task-id"`
}

func TestDeleteWithoutTaskIDFnReadsTheTaskIDFieldAsWriteDoes(t *testing.T) {
	srv, _ := newDeleteServer(t)
	createNamed(t, srv, deleteQueue, "order-1")
	kept := createNamed(t, srv, deleteQueue, "order-2")
	f := newDeleteFn(t, srv, DeleteConfig{Writer: fastDeletes, OnFailure: DeadLetter}, keyedCancellation{})
	out, counters, err := runDeleteBundle(t, f, keyedCancellation{Key: "order-1"}, keyedCancellation{Reason: "no key"})
	require.NoError(t, err)
	tasks := srv.Tasks(deleteQueue)
	require.Len(t, tasks, 1)
	assert.Equal(t, kept, tasks[0].GetName())
	assert.Equal(t, int64(1), counters[MetricRecordsDeleted])

	require.Len(t, out, 1, "the element with an empty task-id field")
	fe := out[0]
	assert.Equal(t, CodeTaskID, fe.Code)
	assert.Equal(t, DeleteConnector, fe.Connector)
	assert.Equal(t, deleteQueue, fe.Destination)
	assert.Empty(t, fe.Payload, "no task was named")
	assert.Contains(t, fe.Error, `the "task-id" field of cloudtasksio.keyedCancellation is empty`)
	elem, err := deadletter.DecodeElement[keyedCancellation](fe)
	require.NoError(t, err)
	assert.Equal(t, keyedCancellation{Reason: "no key"}, elem)
}

func TestDeleteWithATaskIDFnIgnoresTheTaskIDField(t *testing.T) {
	srv, _ := newDeleteServer(t)
	createNamed(t, srv, deleteQueue, "order-1")
	kept := createNamed(t, srv, deleteQueue, "order-1/v2")
	f := newDeleteFn(t, srv, DeleteConfig{TaskIDFn: previousKey, Writer: fastDeletes}, keyedCancellation{})
	_, _, err := runDeleteBundle(t, f, keyedCancellation{Reason: "order-1", Key: "order-1/v2"})
	require.NoError(t, err)
	tasks := srv.Tasks(deleteQueue)
	require.Len(t, tasks, 1)
	assert.Equal(t, kept, tasks[0].GetName(), "the TaskIDFn's key, not the field's, is deleted")
}

// previousKey is a Delete's TaskIDFn over an element whose task-id field holds another key.
func previousKey(c keyedCancellation) (string, error) { return c.Reason, nil }

// TestTheWorkerChecksHowTheKeyIsRead decodes specs as a worker does: one that reads a task-id
// field is accepted, one whose element type has lost both the field and a TaskIDFn is refused
// with the construction error.
func TestTheWorkerChecksHowTheKeyIsRead(t *testing.T) {
	spec, err := compileDelete(DeleteConfig{Queue: Queue{Project: "p", Location: "l", Name: "q"}, EmulatorEndpoint: "127.0.0.1:1"},
		typeOf(keyedCancellation{}))
	require.NoError(t, err)
	wire, err := json.Marshal(spec)
	require.NoError(t, err)
	decoded := &deleteSpec{}
	require.NoError(t, json.Unmarshal(wire, decoded))
	f := &deleteFn{Spec: decoded}
	require.NoError(t, f.Setup())
	key, err := f.key(keyedCancellation{Key: "order-1"})
	require.NoError(t, err)
	assert.Equal(t, "order-1", key)

	decoded.Elem = &beam.EncodedType{T: typeOf(cancellation{})}
	err = (&deleteFn{Spec: decoded}).Setup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DeleteConfig.TaskIDFn is not set")
	assert.Contains(t, err.Error(), `cloudtasks:"task-id"`)
}

func TestDeleteResolvesEachElementsQueue(t *testing.T) {
	srv, _ := newDeleteServer(t)
	_, err := srv.CreateQueue("projects/p/locations/l/queues/other")
	require.NoError(t, err)
	createNamed(t, srv, deleteQueue, "order-1")
	createNamed(t, srv, "projects/p/locations/l/queues/other", "order-1")
	w := fastDeletes
	w.PerDestinationMetrics = true
	f := newDeleteFn(t, srv, DeleteConfig{QueueFn: queueOfCancellation, TaskIDFn: keyOfCancellation, Writer: w,
		OnFailure: DeadLetter}, cancellation{})
	_, counters, err := runDeleteBundle(t, f, cancellation{Queue: "other", Order: "1"})
	require.NoError(t, err)
	assert.Empty(t, srv.Tasks("projects/p/locations/l/queues/other"))
	assert.Len(t, srv.Tasks(deleteQueue), 1, "the same key in another queue is another task")
	assert.Equal(t, int64(1), counters[MetricRecordsDeleted])
	assert.Equal(t, int64(1), counters[MetricDestinationRecordsDeleted("projects/p/locations/l/queues/other")])

	_, _, err = runDeleteBundle(t, f, cancellation{Queue: "q_bad", Order: "1"})
	require.Error(t, err, "an invalid queue fails the bundle, whatever the policy")
	assert.Contains(t, err.Error(), "DeleteConfig.QueueFn returned an invalid queue")
}

func TestDeleteConfigErrorsNameTheField(t *testing.T) {
	q := Queue{Project: "p", Location: "l", Name: "q"}
	for _, tc := range []struct {
		cfg  DeleteConfig
		elem any
		want string
	}{
		{DeleteConfig{}, "", "no destination: set DeleteConfig.Queue or DeleteConfig.QueueFn"},
		{DeleteConfig{Queue: q, QueueFn: queueOfCancellation}, cancellation{}, "DeleteConfig.Queue and DeleteConfig.QueueFn are both set"},
		{DeleteConfig{Queue: Queue{Project: "p", Location: "l", Name: "q_bad"}}, "", "DeleteConfig.Queue.Name"},
		{DeleteConfig{Queue: q}, cancellation{}, "DeleteConfig.TaskIDFn is not set, so the elements must be the keys (string) or carry them in a `cloudtasks:\"task-id\"` field, but they are cloudtasksio.cancellation"},
		{DeleteConfig{Queue: q}, urlOnly{}, "DeleteConfig.TaskIDFn is not set, so the elements must be the keys (string) or carry them"},
		{DeleteConfig{Queue: q}, numberedCancellation{}, `DeleteConfig.TaskIDFn is not set and element type cloudtasksio.numberedCancellation cannot give its "task-id" field: formats: field Key (cloudtasks:"task-id") of cloudtasksio.numberedCancellation: has Go type int, want string`},
		{DeleteConfig{Queue: q, TaskIDFn: queueOfCancellation}, cancellation{}, "TaskIDFn"},
		{DeleteConfig{QueueFn: keyOfCancellation, TaskIDFn: keyOfCancellation}, cancellation{}, "QueueFn"},
		{DeleteConfig{Queue: q, OnFailure: 7}, "", "DeleteConfig.OnFailure"},
		{DeleteConfig{Queue: q, Writer: WriterOptions{RecoveryMaxAttempts: -1}}, "", "WriterOptions.RecoveryMaxAttempts"},
		{DeleteConfig{Queue: q, Writer: WriterOptions{QueuePreflight: PreflightFail}}, "", "WriterOptions.QueuePreflight"},
		{DeleteConfig{Queue: q, Writer: WriterOptions{QueueHealthInterval: time.Minute}}, "", "WriterOptions.QueueHealthInterval"},
		{DeleteConfig{Queue: q, EmulatorEndpoint: "127.0.0.1:1", ServiceAccountKeyFile: "key.json"}, "", "DeleteConfig."},
	} {
		_, s := beam.NewPipelineWithRoot()
		_, err := TryDelete(s, tc.cfg, beam.Create(s, tc.elem))
		require.Error(t, err, "%+v", tc.cfg)
		assert.Contains(t, err.Error(), tc.want)
		assert.Regexp(t, "^cloudtasksio: ", err.Error())
		assert.NotRegexp(t, `(^|[^A-Za-z])Config\.`, err.Error(), "the fields are named as DeleteConfig's")
	}
	assert.Panics(t, func() {
		_, s := beam.NewPipelineWithRoot()
		Delete(s, DeleteConfig{}, beam.Create(s, "a"))
	})
}

// urlOnly has metadata but no task-id field: Delete needs a TaskIDFn for it.
type urlOnly struct {
	URL string `cloudtasks:"url"`
}

// numberedCancellation has a task-id field Write would refuse: not a string.
type numberedCancellation struct {
	Key int `cloudtasks:"task-id"`
}

// slowDeleter answers every DeleteTask after 100ms, and records how many calls it served at
// once, the deadline of each call's context and how many call options each call had.
type slowDeleter struct {
	mu             sync.Mutex
	inFlight, most int
	calls          int
	deadlines      []time.Time
	options        []int
}

func (d *slowDeleter) DeleteTask(ctx context.Context, _ *cloudtaskspb.DeleteTaskRequest, opts ...gax.CallOption) error {
	d.mu.Lock()
	d.calls++
	d.inFlight++
	d.most = max(d.most, d.inFlight)
	dl, _ := ctx.Deadline()
	d.deadlines = append(d.deadlines, dl)
	d.options = append(d.options, len(opts))
	d.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	d.mu.Lock()
	d.inFlight--
	d.mu.Unlock()
	return nil
}

func TestDeleteKeepsMaxInFlightTasksAndTheAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec, err := compileDelete(DeleteConfig{Queue: Queue{Project: "p", Location: "l", Name: "q"}, EmulatorEndpoint: "127.0.0.1:1",
			Writer: WriterOptions{MaxInFlightTasks: 3, AdaptiveConcurrency: AdaptiveConcurrencyOff, AttemptTimeout: 2 * time.Second}}, typeOf(""))
		require.NoError(t, err)
		f := &deleteFn{Spec: spec}
		require.NoError(t, f.Setup())
		d := &slowDeleter{}
		f.start(clientDeleter{d}, engineOptions(f.Spec.Writer), f) // what StartBundle does, without a server
		ctx, counters := metricsContext()
		start := time.Now()
		for i := range 12 {
			require.NoError(t, f.ProcessElement(ctx, 0, fmt.Sprint("key-", i), discardDeadLetters))
		}
		require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))

		assert.Equal(t, 12, d.calls)
		assert.Equal(t, 3, d.most, "never more deletes in flight than MaxInFlightTasks, and the cap is used")
		assert.Equal(t, 400*time.Millisecond, time.Since(start), "four rounds of three")
		for _, dl := range d.deadlines {
			assert.False(t, dl.IsZero(), "each call runs under the attempt timeout")
		}
		assert.Equal(t, []int{1}, slices.Compact(d.options), "each call turns the client's own retries off")
		assert.Equal(t, int64(12), counters()[MetricRecordsDeleted])
	})
}

func TestDeletesKeepAdaptiveStatesApartFromCreates(t *testing.T) {
	client := clientSpec{EmulatorEndpoint: "127.0.0.1:1", ServiceAccountKeyFile: ownSetting("adaptive-deletes")} // a setting of its own
	w := WriterOptions{}
	assert.Same(t, adaptiveState(w, client, true), adaptiveState(w, client, true), "the deletes of one client setting share one state")
	assert.NotSame(t, adaptiveState(w, client, true), adaptiveState(w, client, false), "and not the creates'")
	assert.Nil(t, adaptiveState(WriterOptions{AdaptiveConcurrency: AdaptiveConcurrencyOff}, client, true))
}
