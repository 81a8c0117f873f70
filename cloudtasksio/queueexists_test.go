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

// A Delete over two queues, one missing: the default fails the bundle; DestinationIsolate
// dead-letters the missing queue's elements with NOT_FOUND and deletes the other's tasks,
// whether the missing queue's deletes are answered with the queue's text or the task's.
func TestDeleteOnDestinationFailure(t *testing.T) {
	elems := []any{cancellation{Queue: "deletes", Order: "1"}, cancellation{Queue: "missing", Order: "3"},
		cancellation{Queue: "deletes", Order: "2"}, cancellation{Queue: "missing", Order: "4"}}
	for _, text := range []string{"queue's", "generic"} {
		for _, policy := range []DestinationFailurePolicy{DestinationFailBundle, DestinationIsolate} {
			t.Run(text+"/"+policy.String(), func(t *testing.T) {
				srv, _ := newDeleteServer(t)
				if text == "generic" {
					answerMissingQueueGenerically(srv)
				}
				createNamed(t, srv, deleteQueue, "order-1")
				createNamed(t, srv, deleteQueue, "order-2")
				f := newDeleteFn(t, srv, DeleteConfig{QueueFn: queueOfCancellation, TaskIDFn: keyOfCancellation, Writer: fastDeletes,
					OnFailure: DeadLetter, OnDestinationFailure: policy}, cancellation{})
				out, counters, err := runDeleteBundle(t, f, elems...)
				if policy == DestinationFailBundle {
					require.Error(t, err)
					assert.Contains(t, err.Error(), missingQueue)
					assert.Equal(t, codes.NotFound, status.Code(err))
					assert.Empty(t, out)
					return
				}
				require.NoError(t, err)
				assert.Empty(t, srv.Tasks(deleteQueue), "the other queue's tasks are deleted")
				require.Len(t, out, 2)
				for _, fe := range out {
					assert.Equal(t, CodeNotFound, fe.Code)
					assert.Equal(t, missingQueue, fe.Destination)
					assert.Equal(t, DeleteConnector, fe.Connector)
				}
				assert.Equal(t, int64(2), counters[MetricRecordsDeleted])
				assert.Zero(t, counters[MetricTasksAlreadyGone], "a missing queue's deletes never count as done")
				assert.Equal(t, int64(2), counters[MetricQueueFailures])

				// The process remembers the queue: its next element is not sent.
				out, _, err = runDeleteBundle(t, f, cancellation{Queue: "missing", Order: "5"})
				require.NoError(t, err)
				require.Len(t, out, 1)
				assert.Contains(t, out[0].Error, "not sent")
			})
		}
	}
}

func TestDeleteIsolateNeedsAPolicyThatKeepsTheBundle(t *testing.T) {
	q, err := ParseQueue(deleteQueue)
	require.NoError(t, err)
	_, err = compileDelete(DeleteConfig{Queue: q, OnDestinationFailure: DestinationIsolate}, keyType)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DeleteConfig.OnDestinationFailure DestinationIsolate needs DeleteConfig.OnFailure LogAndDrop or DeadLetter")
	_, err = compileDelete(DeleteConfig{Queue: q, OnDestinationFailure: 7}, keyType)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "DeleteConfig.OnDestinationFailure")
}
