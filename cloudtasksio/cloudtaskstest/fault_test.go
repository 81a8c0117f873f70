package cloudtaskstest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betaclient "cloud.google.com/go/cloudtasks/apiv2beta3"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
)

func TestInjectErrorsAnswersTheScriptInOrder(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	srv.InjectErrors("CreateTask", codes.Unavailable, codes.OK, codes.ResourceExhausted)
	srv.InjectErrors("CreateTask", codes.InvalidArgument)

	create := func() error {
		_, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
		return err
	}
	requireCode(t, codes.Unavailable, create())
	require.NoError(t, create(), "codes.OK serves the call")
	requireCode(t, codes.ResourceExhausted, create())
	requireCode(t, codes.InvalidArgument, create())
	require.NoError(t, create(), "the script is used up")

	assert.Len(t, srv.Tasks(queueA), 2)
	st := srv.Stats()
	assert.Equal(t, 5, st.CreateTaskCalls)
	assert.Equal(t, 2, st.TasksCreated)
	assert.Equal(t, 3, st.InjectedErrors)
}

func TestInjectErrorsIsPerMethod(t *testing.T) {
	srv, client := start(t)
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	// Codes the client does not retry, so each call sees exactly one answer.
	srv.InjectErrors("GetQueue", codes.PermissionDenied, codes.Internal)
	srv.InjectErrors("PauseQueue", codes.FailedPrecondition)

	_, err = client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	requireCode(t, codes.PermissionDenied, err)
	_, err = client.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: queueA})
	requireCode(t, codes.FailedPrecondition, err)
	_, err = client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	requireCode(t, codes.Internal, err)
	q, err := client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_RUNNING, q.GetState(), "the injected PauseQueue did not pause")
}

func TestInjectErrorsPanicsOnUnknownMethod(t *testing.T) {
	srv := cloudtaskstest.NewServer()
	defer srv.Close()
	assert.Panics(t, func() { srv.InjectErrors("CreateTasks", codes.Internal) })
	assert.Panics(t, func() { srv.InjectErrors("v2beta3.Nope", codes.Internal) })
	assert.NotPanics(t, func() { srv.InjectErrors("v2beta3.GetQueue", codes.Internal) })
}

func TestLoseResponsesStoresTheTaskButAnswersUnavailable(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	srv.LoseResponses(1)

	req := &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: named(httpTask("http://127.0.0.1:1/x", nil), queueA+"/tasks/k1")}
	_, err = client.CreateTask(ctx, req)
	requireCode(t, codes.Unavailable, err)
	require.Len(t, srv.Tasks(queueA), 1, "the task was stored")

	_, err = client.CreateTask(ctx, req)
	requireCode(t, codes.AlreadyExists, err)

	// A failed call does not use up a lost response.
	srv.LoseResponses(1)
	_, err = client.CreateTask(ctx, req)
	requireCode(t, codes.AlreadyExists, err)
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	requireCode(t, codes.Unavailable, err)
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	require.NoError(t, err)

	st := srv.Stats()
	assert.Equal(t, 2, st.LostResponses)
	assert.Equal(t, 3, st.TasksCreated)
	assert.Equal(t, 2, st.AlreadyExists)
	assert.Len(t, srv.Tasks(queueA), 3)

	srv.ResetStats()
	assert.Equal(t, cloudtaskstest.Stats{}, srv.Stats())
}

func TestSetLatencyDelaysCreateTask(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	req := &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)}

	srv.SetLatency(200 * time.Millisecond)
	begin := time.Now()
	_, err = client.CreateTask(ctx, req)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(begin), 200*time.Millisecond)

	// A deadline shorter than the latency expires at the server.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = client.CreateTask(short, req)
	requireCode(t, codes.DeadlineExceeded, err)

	srv.SetLatency(0)
	_, err = client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
}

func TestSetRejectFuncAnswersInvalidArgument(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	srv.SetRejectFunc(func(r *cloudtaskspb.CreateTaskRequest) error {
		if string(r.GetTask().GetHttpRequest().GetBody()) == "poison" {
			return errors.New("poison pill refused")
		}
		return nil
	})
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", []byte("poison"))})
	requireCode(t, codes.InvalidArgument, err)
	assert.Contains(t, err.Error(), "poison pill refused")
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", []byte("fine"))})
	require.NoError(t, err)
	require.Len(t, srv.Tasks(queueA), 1)

	srv.SetRejectFunc(nil)
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", []byte("poison"))})
	require.NoError(t, err)
}

// pushConcurrently sends n CreateTask calls at once through one client and
// returns the highest number the server served at the same time.
func pushConcurrently(t *testing.T, srv *cloudtaskstest.Server, client *cloudtasks.Client, n int) int {
	t.Helper()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	srv.SetLatency(50 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := srv.Stats()
	require.Equal(t, n, st.TasksCreated)
	require.Equal(t, 0, st.CreateTaskInFlight)
	return st.MaxCreateTaskInFlight
}

func TestMaxConcurrentStreamsCapsCallsPerConnection(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithMaxConcurrentStreams(2), cloudtaskstest.WithoutDispatch())
	assert.Equal(t, 2, pushConcurrently(t, srv, client, 10))
}

func TestWithoutStreamCapCallsOverlapFreely(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	assert.Greater(t, pushConcurrently(t, srv, client, 10), 2, "the default cap of 100 lets more than 2 through")
}

func TestV2Beta3GetQueueReportsTombstoneTTL(t *testing.T) {
	srv := cloudtaskstest.NewServer()
	defer srv.Close()
	ctx := context.Background()
	client, err := betaclient.NewClient(ctx, srv.ClientOptions()...)
	require.NoError(t, err)
	defer client.Close()
	v2, err := srv.CreateQueue(queueA)
	require.NoError(t, err)

	q, err := client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Nil(t, q.GetTombstoneTtl(), "unset means the service default")
	assert.Equal(t, v2.GetRateLimits().GetMaxDispatchesPerSecond(), q.GetRateLimits().GetMaxDispatchesPerSecond())
	assert.Equal(t, v2.GetRateLimits().GetMaxBurstSize(), q.GetRateLimits().GetMaxBurstSize())
	assert.Equal(t, v2.GetRetryConfig().GetMaxBackoff().AsDuration(), q.GetRetryConfig().GetMaxBackoff().AsDuration())
	assert.Equal(t, betapb.Queue_RUNNING, q.GetState())

	srv.SetTombstoneTTL(queueA, 2*time.Hour)
	q, err = client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, q.GetTombstoneTtl().AsDuration())

	srv.SetTombstoneTTL(queueA, 0)
	q, err = client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Nil(t, q.GetTombstoneTtl())

	_, err = client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueB})
	requireCode(t, codes.NotFound, err)

	srv.InjectErrors("v2beta3.GetQueue", codes.PermissionDenied)
	_, err = client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueA})
	requireCode(t, codes.PermissionDenied, err)

	_, err = client.PauseQueue(ctx, &betapb.PauseQueueRequest{Name: queueA})
	requireCode(t, codes.Unimplemented, err)
}

func TestWithoutV2Beta3AnswersUnimplemented(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutV2Beta3())
	defer srv.Close()
	ctx := context.Background()
	client, err := betaclient.NewClient(ctx, srv.ClientOptions()...)
	require.NoError(t, err)
	defer client.Close()
	_, err = srv.CreateQueue(queueA)
	require.NoError(t, err)
	_, err = client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queueA})
	requireCode(t, codes.Unimplemented, err)
}

func TestCloseIsIdempotentAndStopsServing(t *testing.T) {
	srv := cloudtaskstest.NewServer()
	client, err := cloudtasks.NewClient(context.Background(), srv.ClientOptions()...)
	require.NoError(t, err)
	defer client.Close()
	_, err = srv.CreateQueue(queueA)
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	requireCode(t, codes.Unavailable, err)
}

func TestNewServerWithAddressReportsListenErrors(t *testing.T) {
	srv := cloudtaskstest.NewServer()
	defer srv.Close()
	_, err := cloudtaskstest.NewServerWithAddress(srv.Addr)
	require.Error(t, err, "the port is taken")
	_, err = cloudtaskstest.NewServerWithAddress("not-an-address")
	require.Error(t, err)
}

func TestWaitUntilSeesCreatesBeingServed(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	srv.SetLatency(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_, _ = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
		})
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, srv.WaitUntil(wctx, func(st cloudtaskstest.Stats) bool { return st.CreateTaskInFlight == 3 }))
	cancel() // the clients give up; the server's calls end with them
	wg.Wait()
	require.NoError(t, srv.Wait(wctx), "idle once the cancelled calls have ended")
	assert.Equal(t, 0, srv.Stats().CreateTaskInFlight)
	assert.Empty(t, srv.Tasks(queueA))
}
