package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The NOT_FOUND answers Cloud Tasks gives a DeleteTask: about the task (it never existed, or it
// ran or was deleted within its name's retention) and about the queue.
var (
	errTaskNotFound  = status.Error(codes.NotFound, "Requested entity was not found.")
	errTaskGone      = status.Error(codes.NotFound, "The task no longer exists, though a task with this name existed recently. The task either successfully completed or was deleted.")
	errQueueNotFound = status.Error(codes.NotFound, "Queue does not exist. If you just created the queue, wait at least a minute for the queue to initialize.")
)

// fakeDeleter is a fakeCreator that also deletes: a delete's id is its task id, and it is
// answered, counted and timed as a create of that id would be.
type fakeDeleter struct{ *fakeCreator }

func (f fakeDeleter) DeleteTask(ctx context.Context, req *cloudtaskspb.DeleteTaskRequest) error {
	id := req.GetName()[strings.LastIndex(req.GetName(), "/")+1:]
	create := &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.test/" + id}}}}
	_, err := f.CreateTask(ctx, create)
	return err
}

func deleteRequest(id string) *Request[string] {
	return &Request[string]{Delete: &cloudtaskspb.DeleteTaskRequest{Name: testQueue + "/tasks/" + id}, Tag: id}
}

// newDeleteHarness is newHarness over a fake that deletes.
func newDeleteHarness(t *testing.T, f *fakeCreator, o Options) *harness {
	h := newHarness(t, f, o)
	h.e = New[string](fakeDeleter{f}, o, h)
	return h
}

func TestADeleteOfATaskThatIsNotThereSucceedsAsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDeleteHarness(t, scripted(map[string][]error{"never": {errTaskNotFound}, "ran": {errTaskGone}}), baseOptions())
		for _, id := range []string{"deleted", "never", "ran"} {
			require.NoError(t, h.submit(deleteRequest(id)))
		}
		require.NoError(t, h.flush())
		assert.ElementsMatch(t, []string{"deleted", "never", "ran"}, h.created)
		assert.ElementsMatch(t, []string{"never", "ran"}, h.dedup, "a task that is not there is reported gone")
		assert.Equal(t, 3, h.f.total(), "a gone task is not retried")
		assert.Empty(t, h.failed, "a gone task is no failed attempt")
	})
}

func TestADeleteWhoseQueueIsMissingRetriesOnTheNotFoundBudgetThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDeleteHarness(t, scripted(map[string][]error{"a": repeat(errQueueNotFound, 10)}), baseOptions())
		require.NoError(t, h.submit(deleteRequest("a")))
		err := h.flush()
		require.Error(t, err)
		// The create's NOT_FOUND budget: 500ms..2s, 3 attempts.
		assert.Equal(t, ms(0, 500, 1500), h.f.times("a", h.start))
		assert.Equal(t, codes.NotFound, status.Code(err))
		assert.Contains(t, err.Error(), `deleting task "`+testQueue+`/tasks/a" failed with NOT_FOUND after 3 attempt(s)`)
		assert.Contains(t, err.Error(), "the queue does not exist")
		assert.Equal(t, []string{"a"}, h.terminal)
		assert.Empty(t, h.created, "a missing queue never makes a delete look done")
	})
}

func TestADeleteRetriesTransientFailuresOnTheTransientBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDeleteHarness(t, scripted(map[string][]error{"a": {errUnavailable, errUnavailable}, "b": {errUnavailable, errTaskGone}}), baseOptions())
		require.NoError(t, h.submit(deleteRequest("a")))
		require.NoError(t, h.submit(deleteRequest("b")))
		require.NoError(t, h.flush())
		assert.Equal(t, ms(0, 100, 300), h.f.times("a", h.start))
		assert.Equal(t, ms(0, 100), h.f.times("b", h.start))
		assert.ElementsMatch(t, []string{"a", "b"}, h.created)
		assert.Equal(t, []string{"b"}, h.dedup, "b's first attempt deleted it; the retry found it gone")
		assert.ElementsMatch(t, []string{"a:UNAVAILABLE", "b:UNAVAILABLE", "a:UNAVAILABLE"}, h.failed)
	})
}

func TestADeleteRejectedAsInvalidGoesToTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDeleteHarness(t, scripted(map[string][]error{"a": {status.Error(codes.InvalidArgument, "bad name")}}), baseOptions())
		require.NoError(t, h.submit(deleteRequest("a")))
		require.NoError(t, h.flush())
		require.Contains(t, h.rejected, "a")
		assert.Contains(t, h.rejected["a"].Error(), `Cloud Tasks rejected the deletion of task "`+testQueue+`/tasks/a" with INVALID_ARGUMENT: bad name`)
		assert.Equal(t, codes.InvalidArgument, status.Code(h.rejected["a"]))
	})
}

func TestADeleteAnsweredAlreadyExistsFailsTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newDeleteHarness(t, scripted(map[string][]error{"a": {status.Error(codes.AlreadyExists, "odd")}}), baseOptions())
		require.NoError(t, h.submit(deleteRequest("a")))
		err := h.flush()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not retryable")
		assert.Empty(t, h.created, "ALREADY_EXISTS says nothing of a delete")
	})
}

func TestSubmitRefusesARequestThatIsNotExactlyOneOperation(t *testing.T) {
	h := newHarness(t, newFake(func(string, int) (time.Duration, error) { return 0, nil }), baseOptions())
	both := newRequest("a")
	both.Delete = deleteRequest("a").Delete
	assert.ErrorContains(t, h.e.Submit(context.Background(), both), "exactly one of Create and Delete")
	assert.ErrorContains(t, h.e.Submit(context.Background(), &Request[string]{}), "exactly one of Create and Delete")
	assert.ErrorContains(t, h.e.Submit(context.Background(), deleteRequest("a")), "also a Deleter",
		"the harness's fake only creates")
}

func TestDeletesShareAnAdaptiveStateByTheQueueOfTheirTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := baseOptions()
		o.Adaptive = NewAdaptive()
		h := newDeleteHarness(t, scripted(map[string][]error{"b": {errTaskGone}}), o)
		require.NoError(t, h.submit(deleteRequest("a")))
		require.NoError(t, h.submit(deleteRequest("b")))
		require.NoError(t, h.flush())
		assert.Equal(t, []string{"a", "b"}, h.created)
		l := o.Adaptive.Queue(testQueue)
		assert.Equal(t, o.MaxInFlight, l.Cap, "the deletes were limited as deletes of queue %s", testQueue)
		assert.Zero(t, l.InFlight)
		assert.Zero(t, l.Decreases, "a gone task is a success, not a refusal")
	})
}

func TestClassifyDeleteTellsTheTaskFromTheQueue(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{errTaskNotFound, Gone},
		{errTaskGone, Gone},
		{status.Error(codes.NotFound, "Task does not exist."), Gone},
		{errQueueNotFound, NotFound},
		{status.Error(codes.NotFound, "queue not found"), NotFound},
		{status.Error(codes.AlreadyExists, "Requested entity already exists"), Terminal},
		{status.Error(codes.InvalidArgument, "bad"), Invalid},
		{errUnavailable, Transient},
		{status.Error(codes.PermissionDenied, "no"), Terminal},
		{errors.New("no status"), Terminal},
	} {
		assert.Equal(t, tc.want, ClassifyDelete(tc.err), "%v", tc.err)
	}
	assert.Equal(t, NotFound, Classify(errTaskNotFound, true), "a create's NOT_FOUND is always the queue's")
	assert.Equal(t, "Gone", Gone.String())
}
