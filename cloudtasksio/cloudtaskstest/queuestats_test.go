package cloudtaskstest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betaclient "cloud.google.com/go/cloudtasks/apiv2beta3"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// newBetaClient returns a v2beta3 client of srv, closed when the test ends.
func newBetaClient(t *testing.T, srv *cloudtaskstest.Server) *betaclient.Client {
	t.Helper()
	client, err := betaclient.NewClient(context.Background(), srv.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func getBeta(t *testing.T, client *betaclient.Client, queue string, paths ...string) *betapb.Queue {
	t.Helper()
	req := &betapb.GetQueueRequest{Name: queue}
	if paths != nil {
		req.ReadMask = &fieldmaskpb.FieldMask{Paths: paths}
	}
	q, err := client.GetQueue(context.Background(), req)
	require.NoError(t, err)
	return q
}

func TestV2Beta3GetQueueReportsStatsOnlyWhenTheReadMaskNamesThem(t *testing.T) {
	clock := newFakeClock()
	srv, v2 := start(t, cloudtaskstest.WithoutDispatch(), cloudtaskstest.WithClock(clock.Now))
	beta := newBetaClient(t, srv)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	ctx := context.Background()

	whole := getBeta(t, beta, queueA)
	assert.Nil(t, whole.GetStats(), "without a mask every field but stats")
	assert.Equal(t, queueA, whole.GetName())
	assert.NotNil(t, whole.GetRateLimits())

	empty := getBeta(t, beta, queueA, "stats")
	assert.True(t, proto.Equal(&betapb.Queue{Stats: &betapb.QueueStats{}}, empty),
		"an empty queue: no tasks, no arrival time, and only the field the mask names: %v", empty)

	first := clock.Now()
	_, err = v2.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/a", nil)})
	require.NoError(t, err)
	clock.Advance(time.Minute)
	second, err := v2.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/b", nil)})
	require.NoError(t, err)
	later := httpTask("http://127.0.0.1:1/c", nil)
	later.ScheduleTime = timestamppb.New(clock.Now().Add(time.Hour))
	_, err = v2.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: later})
	require.NoError(t, err)

	q := getBeta(t, beta, queueA, "name", "state", "stats")
	assert.Equal(t, queueA, q.GetName())
	assert.Equal(t, betapb.Queue_RUNNING, q.GetState())
	assert.Nil(t, q.GetRateLimits(), "a field the mask leaves out is not answered")
	assert.Equal(t, int64(3), q.GetStats().GetTasksCount())
	assert.Equal(t, first.Truncate(time.Microsecond), q.GetStats().GetOldestEstimatedArrivalTime().AsTime(),
		"the earliest schedule time among the queue's tasks")
	assert.Zero(t, q.GetStats().GetConcurrentDispatchesCount())

	tasks := srv.Tasks(queueA)
	for _, task := range tasks {
		if task.GetScheduleTime().AsTime().Equal(first.Truncate(time.Microsecond)) {
			require.NoError(t, v2.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}))
		}
	}
	q = getBeta(t, beta, queueA, "stats.tasks_count", "stats.oldest_estimated_arrival_time")
	assert.Equal(t, int64(2), q.GetStats().GetTasksCount())
	assert.Equal(t, second.GetScheduleTime().AsTime(), q.GetStats().GetOldestEstimatedArrivalTime().AsTime())

	require.NoError(t, srv.PauseQueue(queueA))
	assert.Equal(t, betapb.Queue_PAUSED, getBeta(t, beta, queueA, "state").GetState())

	for _, bad := range []string{"nope", "stats.nope", "name.x", ""} {
		_, err := beta.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueA, ReadMask: &fieldmaskpb.FieldMask{Paths: []string{bad}}})
		requireCode(t, codes.InvalidArgument, err)
	}
}

func TestV2Beta3GetQueueCountsTheDispatchesAwaitingAnAnswer(t *testing.T) {
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(target.Close)
	srv, v2 := start(t)
	beta := newBetaClient(t, srv)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	_, err = v2.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(target.URL+"/slow", nil)})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.WaitUntil(ctx, func(s cloudtaskstest.Stats) bool { return s.DispatchesInFlight == 1 }))
	stats := getBeta(t, beta, queueA, "stats").GetStats()
	assert.Equal(t, int64(1), stats.GetTasksCount(), "a task being sent is still in the queue")
	assert.Equal(t, int64(1), stats.GetConcurrentDispatchesCount())

	close(release)
	require.NoError(t, srv.Wait(ctx))
	stats = getBeta(t, beta, queueA, "stats").GetStats()
	assert.Zero(t, stats.GetTasksCount(), "the task succeeded and left the queue")
	assert.Nil(t, stats.GetOldestEstimatedArrivalTime())
	assert.Zero(t, stats.GetConcurrentDispatchesCount())
}

func TestV2Beta3GetQueueShowsTheQueueOverrides(t *testing.T) {
	srv, v2 := start(t, cloudtaskstest.WithoutDispatch())
	beta := newBetaClient(t, srv)
	override := &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{
		Host: proto.String("elsewhere.example.com"), PathOverride: &cloudtaskspb.PathOverride{Path: "/routed"},
		UriOverrideEnforceMode: cloudtaskspb.UriOverride_ALWAYS}}
	routing := &cloudtaskspb.AppEngineRouting{Service: "worker", Version: "v3"}
	_, err := v2.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: location,
		Queue: &cloudtaskspb.Queue{Name: queueA, HttpTarget: override, AppEngineRoutingOverride: routing}})
	require.NoError(t, err)

	q := getBeta(t, beta, queueA, "http_target", "app_engine_http_queue")
	want := &betapb.Queue{
		HttpTarget: &betapb.HttpTarget{UriOverride: &betapb.UriOverride{
			Host: proto.String("elsewhere.example.com"), PathOverride: &betapb.PathOverride{Path: "/routed"},
			UriOverrideEnforceMode: betapb.UriOverride_ALWAYS}},
		QueueType: &betapb.Queue_AppEngineHttpQueue{AppEngineHttpQueue: &betapb.AppEngineHttpQueue{
			AppEngineRoutingOverride: &betapb.AppEngineRouting{Service: "worker", Version: "v3"}}},
	}
	assert.True(t, proto.Equal(want, q), "got %v", q)

	_, err = srv.CreateQueue(queueB)
	require.NoError(t, err)
	plain := getBeta(t, beta, queueB, "http_target", "app_engine_http_queue")
	assert.Nil(t, plain.GetHttpTarget())
	assert.Nil(t, plain.GetAppEngineHttpQueue(), "a queue without a routing override has no App Engine part")
}
