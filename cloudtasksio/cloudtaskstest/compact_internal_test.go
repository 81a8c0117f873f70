package cloudtaskstest

import (
	"fmt"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A queue whose tasks never reach the dispatcher (a server without dispatch, a paused queue)
// does not keep the tasks it deleted: their heap items are dropped once they outnumber the
// live ones, so a long -no-dispatch run that deletes its tasks stays flat.
func TestDeletedTasksDoNotPileUpInAQueueThatDoesNotDispatch(t *testing.T) {
	srv := NewServer(WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	_, err := srv.CreateQueue(testQueue)
	require.NoError(t, err)
	body := make([]byte, 10<<10)
	keep := map[string]bool{}
	for i := range 2000 {
		name := fmt.Sprintf("%s/tasks/t%d", testQueue, i)
		_, err := srv.store.createTask(&cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: &cloudtaskspb.Task{
			Name: name, MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.com/", Body: body}}}})
		require.NoError(t, err)
		if i%100 == 0 {
			keep[name] = true // a few stay
			continue
		}
		require.NoError(t, srv.store.deleteTask(name))
	}
	srv.store.mu.Lock()
	due := len(srv.store.queues[testQueue].disp.due)
	srv.store.mu.Unlock()
	assert.LessOrEqual(t, due, 64+2*len(keep), "the deleted tasks' items were dropped")
	assert.Len(t, srv.Tasks(testQueue), len(keep), "the live tasks stay")
}
