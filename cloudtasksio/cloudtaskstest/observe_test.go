package cloudtaskstest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// calls collects what an observer saw.
type calls struct {
	mu  sync.Mutex
	got []cloudtaskstest.Call
}

func (c *calls) add(call cloudtaskstest.Call) {
	c.mu.Lock()
	c.got = append(c.got, call)
	c.mu.Unlock()
}

func (c *calls) all() []cloudtaskstest.Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]cloudtaskstest.Call(nil), c.got...)
}

func TestObserveSeesEveryCallWithoutChangingIt(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	var creates, every calls
	stop := srv.Observe("CreateTask", creates.add)
	srv.Observe("*", every.add)
	srv.InjectErrors("CreateTask", codes.Unavailable)
	srv.LoseResponses(1)

	for range 3 {
		_, _ = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", []byte("b"))})
	}
	_, err = client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)

	got := creates.all()
	require.Len(t, got, 3)
	assert.Equal(t, codes.Unavailable, status.Code(got[0].Err), "the injected error")
	assert.Nil(t, got[0].Response)
	assert.Equal(t, codes.Unavailable, status.Code(got[1].Err), "the lost response")
	require.NoError(t, got[2].Err)
	assert.Equal(t, queueA, got[2].Request.(*cloudtaskspb.CreateTaskRequest).GetParent())
	assert.Contains(t, got[2].Response.(*cloudtaskspb.Task).GetName(), queueA+"/tasks/")
	for _, c := range got {
		assert.Equal(t, "CreateTask", c.Method)
		assert.False(t, c.End.Before(c.Start))
	}
	assert.Len(t, srv.Tasks(queueA), 2, "observing stored what the calls stored, no more")

	all := every.all()
	require.Len(t, all, 4)
	assert.Equal(t, "GetQueue", all[3].Method)

	stop()
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	require.NoError(t, err)
	assert.Len(t, creates.all(), 3, "a stopped observer sees nothing more")
	assert.Len(t, every.all(), 5)
}

func TestInjectErrorCarriesStatusDetails(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	st, err := status.New(codes.ResourceExhausted, "quota exceeded").WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)})
	require.NoError(t, err)
	srv.InjectError("GetQueue", st.Err(), nil)
	srv.InjectError("CreateTask", st.Err())

	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	got, ok := status.FromError(err)
	require.True(t, ok, "a status error: %v", err)
	assert.Equal(t, codes.ResourceExhausted, got.Code())
	assert.Equal(t, "quota exceeded", got.Message())
	require.Len(t, got.Details(), 1)
	info, ok := got.Details()[0].(*errdetails.RetryInfo)
	require.True(t, ok, "detail %T", got.Details()[0])
	assert.Equal(t, 2*time.Second, info.GetRetryDelay().AsDuration())
	assert.Equal(t, 1, srv.Stats().InjectedErrors)
	assert.Empty(t, srv.Tasks(queueA))
}

func TestReactorsScriptAnswersByRequest(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	// Refuse tasks for one path, answer a made-up task for another, serve the rest.
	srv.AddReactor("CreateTask", cloudtaskstest.ReactorFunc(func(req proto.Message) (bool, proto.Message, error) {
		switch req.(*cloudtaskspb.CreateTaskRequest).GetTask().GetHttpRequest().GetUrl() {
		case "http://127.0.0.1:1/denied":
			return true, nil, status.Error(codes.PermissionDenied, "no")
		case "http://127.0.0.1:1/faked":
			return true, &cloudtaskspb.Task{Name: queueA + "/tasks/faked"}, nil
		}
		return false, nil, nil
	}))
	create := func(url string) (*cloudtaskspb.Task, error) {
		return client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(url, nil)})
	}
	_, err = create("http://127.0.0.1:1/denied")
	requireCode(t, codes.PermissionDenied, err)
	task, err := create("http://127.0.0.1:1/faked")
	require.NoError(t, err)
	assert.Equal(t, queueA+"/tasks/faked", task.GetName())
	_, err = create("http://127.0.0.1:1/served")
	require.NoError(t, err)

	stored := srv.Tasks(queueA)
	require.Len(t, stored, 1, "only the call no reactor handled stored a task")
	assert.Equal(t, "http://127.0.0.1:1/served", stored[0].GetHttpRequest().GetUrl())
	assert.Equal(t, 1, srv.Stats().InjectedErrors)

	srv.AddReactor("GetQueue", cloudtaskstest.ReactorFunc(func(proto.Message) (bool, proto.Message, error) { return true, nil, nil }))
	_, err = client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	requireCode(t, codes.Internal, err) // handled with neither an answer nor an error
}

func TestFaultAndObserverAPIsPanicOnUnknownMethods(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	defer srv.Close()
	assert.PanicsWithValue(t, `cloudtaskstest.InjectError: unknown method "CreateTasks" (use a v2 method name such as "CreateTask", or "v2beta3.GetQueue")`,
		func() { srv.InjectError("CreateTasks", nil) })
	assert.Panics(t, func() { srv.AddReactor("Nope", nil) })
	assert.Panics(t, func() { srv.Observe("v2beta3.Nope", func(cloudtaskstest.Call) {}) })
	assert.NotPanics(t, func() { srv.Observe("*", func(cloudtaskstest.Call) {})() })
}
