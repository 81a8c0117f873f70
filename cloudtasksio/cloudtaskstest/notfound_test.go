package cloudtaskstest_test

import (
	"context"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// The service's NOT_FOUND texts (validate.go says where they were recorded).
const (
	textNotFound      = "Requested entity was not found."
	textQueueNotFound = "Queue does not exist. If you just created the queue, wait at least a minute for the queue to initialize."
	textTaskGone      = "The task no longer exists, though a task with this name existed recently. The task either successfully completed or was deleted."
)

// requireNotFound checks that err is NOT_FOUND with the service's text want.
func requireNotFound(t *testing.T, want string, err error, what string) {
	t.Helper()
	requireCode(t, codes.NotFound, err)
	assert.Equal(t, want, status.Convert(err).Message(), what)
}

func TestNotFoundAnswersTellAMissingQueueFromAMissingTask(t *testing.T) {
	clock := newFakeClock()
	srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	missingQueue := location + "/queues/missing"
	task, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	require.NoError(t, err)

	// A queue that does not exist, whatever the call.
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: missingQueue, Task: httpTask("http://127.0.0.1:1/x", nil)})
	requireNotFound(t, textQueueNotFound, err, "CreateTask into a missing queue")
	requireNotFound(t, textQueueNotFound, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: missingQueue + "/tasks/t1"}), "DeleteTask in a missing queue")
	_, err = client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: missingQueue + "/tasks/t1"})
	requireNotFound(t, textQueueNotFound, err, "GetTask in a missing queue")
	_, err = client.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: missingQueue}).Next()
	requireNotFound(t, textQueueNotFound, err, "ListTasks of a missing queue")
	requireNotFound(t, textNotFound, client.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: missingQueue}), "DeleteQueue of a missing queue")

	// A task that never existed in a queue that does.
	requireNotFound(t, textNotFound, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: queueA + "/tasks/never"}), "DeleteTask of a task never created")
	_, err = client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: queueA + "/tasks/never"})
	requireNotFound(t, textNotFound, err, "GetTask of a task never created")

	// A task deleted: gone while its name is taken, then as if it never existed.
	require.NoError(t, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}))
	requireNotFound(t, textTaskGone, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}), "DeleteTask of a deleted task")
	_, err = client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: task.GetName()})
	requireNotFound(t, textTaskGone, err, "GetTask of a deleted task")
	clock.Advance(cloudtaskstest.DefaultTombstoneTTL)
	requireNotFound(t, textNotFound, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}), "DeleteTask once the name is free")

	// A queue deleted with its tasks.
	other, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	require.NoError(t, err)
	require.NoError(t, client.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: queueA}))
	requireNotFound(t, textQueueNotFound, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: other.GetName()}), "DeleteTask in a deleted queue")
}

func TestADispatchedTaskIsGoneWhileItsNameIsTaken(t *testing.T) {
	srv, client := start(t)
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	ts, ch := target(t, 200)
	task, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL+"/x", nil)})
	require.NoError(t, err)
	next(t, ch)
	waitGone(t, srv, task.GetName())
	requireNotFound(t, textTaskGone, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}),
		"DeleteTask of a task that ran")
}
