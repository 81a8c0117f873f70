package cloudtasksio

import (
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

const missingQueue = "projects/p/locations/l/queues/missing"

// answerMissingQueueGenerically makes srv answer a delete in the queue that does not exist as
// it answers a task that is not there: NOT_FOUND "Requested entity was not found.", the text
// that does not name the queue.
func answerMissingQueueGenerically(srv *cloudtaskstest.Server) {
	srv.AddReactor("DeleteTask", cloudtaskstest.ReactorFunc(func(req proto.Message) (bool, proto.Message, error) {
		if strings.HasPrefix(req.(*cloudtaskspb.DeleteTaskRequest).GetName(), missingQueue+"/") {
			return true, nil, status.Error(codes.NotFound, "Requested entity was not found.")
		}
		return false, nil, nil
	}))
}

// getQueueCalls counts srv's GetQueue calls per queue.
func getQueueCalls(srv *cloudtaskstest.Server) func(queue string) int {
	var mu sync.Mutex
	calls := map[string]int{}
	srv.Observe("GetQueue", func(c cloudtaskstest.Call) {
		mu.Lock()
		defer mu.Unlock()
		calls[c.Request.(*cloudtaskspb.GetQueueRequest).GetName()]++
	})
	return func(queue string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[queue]
	}
}

func TestDeleteIntoAMissingQueueFailsTheBundleWhateverTheNotFoundText(t *testing.T) {
	srv, _ := newDeleteServer(t)
	answerMissingQueueGenerically(srv)
	q, err := ParseQueue(missingQueue)
	require.NoError(t, err)
	for _, policy := range []FailurePolicy{FailBundle, DeadLetter} {
		f := newDeleteFn(t, srv, DeleteConfig{Queue: q, Writer: fastDeletes, OnFailure: policy}, "")
		out, _, err := runDeleteBundle(t, f, "a", "b")
		require.Error(t, err, "%v: the deletes of a missing queue are not done", policy)
		assert.Contains(t, err.Error(), "queue "+missingQueue+" does not exist")
		assert.Contains(t, err.Error(), "its deletes were not done")
		assert.Equal(t, codes.NotFound, status.Code(err))
		assert.Empty(t, out, "%v: a missing queue is no element's failure", policy)
	}
}

func TestDeleteReadsEachQueueWithGoneTasksOncePerProcess(t *testing.T) {
	srv, _ := newDeleteServer(t)
	answerMissingQueueGenerically(srv)
	const other = "projects/p/locations/l/queues/other"
	_, err := srv.CreateQueue(other)
	require.NoError(t, err)
	createNamed(t, srv, deleteQueue, "present")
	reads := getQueueCalls(srv)

	// Four instances, two bundles each, run at once: every delete is of a task never created.
	cfg := DeleteConfig{QueueFn: queueOfCancellation, TaskIDFn: keyOfCancellation, Writer: fastDeletes}
	var wg sync.WaitGroup
	for range 4 {
		f := newDeleteFn(t, srv, cfg, cancellation{})
		wg.Go(func() {
			for range 2 {
				_, counters, err := runDeleteBundle(t, f, cancellation{Order: "x", Queue: "deletes"}, cancellation{Order: "y", Queue: "other"})
				assert.NoError(t, err)
				assert.Equal(t, int64(2), counters[MetricTasksAlreadyGone])
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, reads(deleteQueue), "one read per queue for every instance and bundle of the process")
	assert.Equal(t, 1, reads(other))

	// A bundle whose deletes all succeeded reads nothing.
	f := newDeleteFn(t, srv, DeleteConfig{Writer: fastDeletes}, "")
	_, _, err = runDeleteBundle(t, f, "present")
	require.NoError(t, err)

	// A missing queue is read once too: its failure is remembered.
	q, err := ParseQueue(missingQueue)
	require.NoError(t, err)
	for range 3 {
		f := newDeleteFn(t, srv, DeleteConfig{Queue: q, Writer: fastDeletes}, "")
		_, _, err := runDeleteBundle(t, f, "a")
		require.Error(t, err)
	}
	assert.Equal(t, 1, reads(missingQueue))
	assert.Equal(t, 1, reads(deleteQueue))
}

// A read that fails for the moment proves nothing about the queue: the bundle fails, and the
// next one reads again.
func TestDeleteReadsTheQueueAgainAfterATransientFailure(t *testing.T) {
	srv, _ := newDeleteServer(t)
	reads := getQueueCalls(srv)
	srv.InjectErrors("GetQueue", codes.ResourceExhausted)
	f := newDeleteFn(t, srv, DeleteConfig{Writer: fastDeletes}, "")
	_, _, err := runDeleteBundle(t, f, "never")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "confirming that queue "+deleteQueue+" exists failed with RESOURCE_EXHAUSTED")
	_, counters, err := runDeleteBundle(t, f, "never")
	require.NoError(t, err, "the retried bundle reads the queue again")
	assert.Equal(t, int64(1), counters[MetricTasksAlreadyGone])
	assert.Equal(t, 2, reads(deleteQueue))
}
