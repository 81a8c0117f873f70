package cloudtaskstest_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

func TestCreateQueueFillsServiceDefaults(t *testing.T) {
	_, client := start(t)
	q, err := client.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{
		Parent: location, Queue: &cloudtaskspb.Queue{Name: queueA, State: cloudtaskspb.Queue_PAUSED},
	})
	require.NoError(t, err)
	assert.Equal(t, queueA, q.GetName())
	assert.Equal(t, cloudtaskspb.Queue_RUNNING, q.GetState(), "state is output only")
	assert.Equal(t, 500.0, q.GetRateLimits().GetMaxDispatchesPerSecond())
	assert.Equal(t, int32(100), q.GetRateLimits().GetMaxBurstSize())
	assert.Equal(t, int32(1000), q.GetRateLimits().GetMaxConcurrentDispatches())
	assert.Equal(t, int32(100), q.GetRetryConfig().GetMaxAttempts())
	assert.Equal(t, 100*time.Millisecond, q.GetRetryConfig().GetMinBackoff().AsDuration())
	assert.Equal(t, time.Hour, q.GetRetryConfig().GetMaxBackoff().AsDuration())
	assert.Equal(t, int32(16), q.GetRetryConfig().GetMaxDoublings())

	got, err := client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, q.String(), got.String())
}

func TestCreateQueueKeepsGivenLimitsAndDerivesBurst(t *testing.T) {
	_, client := start(t)
	q, err := client.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{
		Parent: location, Queue: &cloudtaskspb.Queue{
			Name:        queueA,
			RateLimits:  &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 2.5, MaxConcurrentDispatches: 3, MaxBurstSize: 77},
			RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: -1, MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(5 * time.Second), MaxDoublings: 2},
		},
	})
	require.NoError(t, err)
	assert.Equal(t, 2.5, q.GetRateLimits().GetMaxDispatchesPerSecond())
	assert.Equal(t, int32(3), q.GetRateLimits().GetMaxBurstSize(), "burst is output only: the rate rounded up")
	assert.Equal(t, int32(3), q.GetRateLimits().GetMaxConcurrentDispatches())
	assert.Equal(t, int32(-1), q.GetRetryConfig().GetMaxAttempts())
	assert.Equal(t, 5*time.Second, q.GetRetryConfig().GetMaxBackoff().AsDuration())
	assert.Equal(t, int32(2), q.GetRetryConfig().GetMaxDoublings())
}

func TestCreateQueueRejections(t *testing.T) {
	srv, client := start(t)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	long := strings.Repeat("q", 101)
	cases := []struct {
		name   string
		parent string
		queue  *cloudtaskspb.Queue
		want   codes.Code
	}{
		{"existing queue", location, &cloudtaskspb.Queue{Name: queueA}, codes.AlreadyExists},
		{"missing queue", location, nil, codes.InvalidArgument},
		{"queue id with underscore", location, &cloudtaskspb.Queue{Name: location + "/queues/bad_id"}, codes.InvalidArgument},
		{"queue id too long", location, &cloudtaskspb.Queue{Name: location + "/queues/" + long}, codes.InvalidArgument},
		{"empty queue id", location, &cloudtaskspb.Queue{Name: location + "/queues/"}, codes.InvalidArgument},
		{"bad parent", "projects/p", &cloudtaskspb.Queue{Name: queueB}, codes.InvalidArgument},
		{"queue outside parent", "projects/other/locations/us-central1", &cloudtaskspb.Queue{Name: queueB}, codes.InvalidArgument},
		{"rate above 500", location, &cloudtaskspb.Queue{Name: queueB, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 501}}, codes.InvalidArgument},
		{"rate NaN", location, &cloudtaskspb.Queue{Name: queueB, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: math.NaN()}}, codes.InvalidArgument},
		{"rate +Inf", location, &cloudtaskspb.Queue{Name: queueB, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: math.Inf(1)}}, codes.InvalidArgument},
		{"rate -Inf", location, &cloudtaskspb.Queue{Name: queueB, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: math.Inf(-1)}}, codes.InvalidArgument},
		{"concurrency above 5000", location, &cloudtaskspb.Queue{Name: queueB, RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 5001}}, codes.InvalidArgument},
		{"max attempts below -1", location, &cloudtaskspb.Queue{Name: queueB, RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: -2}}, codes.InvalidArgument},
		{"min backoff above max", location, &cloudtaskspb.Queue{Name: queueB, RetryConfig: &cloudtaskspb.RetryConfig{
			MinBackoff: durationpb.New(time.Minute), MaxBackoff: durationpb.New(time.Second)}}, codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: tc.parent, Queue: tc.queue})
			requireCode(t, tc.want, err)
		})
	}
	_, err = client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueB})
	requireCode(t, codes.NotFound, err)
}

func TestUnknownQueueIsNotFoundEverywhere(t *testing.T) {
	_, client := start(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"GetQueue": func() error { _, err := client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA}); return err },
		"PauseQueue": func() error {
			_, err := client.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: queueA})
			return err
		},
		"ResumeQueue": func() error {
			_, err := client.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: queueA})
			return err
		},
		"PurgeQueue": func() error {
			_, err := client.PurgeQueue(ctx, &cloudtaskspb.PurgeQueueRequest{Name: queueA})
			return err
		},
		"DeleteQueue": func() error { return client.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: queueA}) },
		"CreateTask": func() error {
			_, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
			return err
		},
		"ListTasks": func() error {
			_, err := client.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: queueA}).Next()
			return err
		},
		"GetTask": func() error {
			_, err := client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: queueA + "/tasks/t1"})
			return err
		},
		"DeleteTask": func() error {
			return client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: queueA + "/tasks/t1"})
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { requireCode(t, codes.NotFound, call()) })
	}
}

func TestMalformedQueueNamesAreInvalidArgument(t *testing.T) {
	_, client := start(t)
	ctx := context.Background()
	for _, name := range []string{"", "queue-a", location, location + "/queues/a/b", "projects//locations/l/queues/q", location + "/queues/a.b"} {
		t.Run(name, func(t *testing.T) {
			_, err := client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: name})
			requireCode(t, codes.InvalidArgument, err)
			_, err = client.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: name})
			requireCode(t, codes.InvalidArgument, err)
		})
	}
}

func TestPauseResumePurgeDelete(t *testing.T) {
	clock := newFakeClock()
	srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)

	q, err := client.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_PAUSED, q.GetState())
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", []byte("{}"))})
	require.NoError(t, err, "a paused queue accepts tasks")
	require.Len(t, srv.Tasks(queueA), 1)

	q, err = client.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_RUNNING, q.GetState())

	clock.Advance(time.Minute)
	q, err = client.PurgeQueue(ctx, &cloudtaskspb.PurgeQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Empty(t, srv.Tasks(queueA))
	assert.Equal(t, clock.Now().Truncate(time.Microsecond), q.GetPurgeTime().AsTime())

	require.NoError(t, client.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: queueA}))
	_, err = client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	requireCode(t, codes.NotFound, err)
	assert.Nil(t, srv.Tasks(queueA))
}

func TestServerPauseAndResumeHelpers(t *testing.T) {
	srv, client := start(t)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	require.NoError(t, srv.PauseQueue(queueA))
	q, err := client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_PAUSED, q.GetState())
	require.NoError(t, srv.ResumeQueue(queueA))
	q, err = client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_RUNNING, q.GetState())
	requireCode(t, codes.NotFound, srv.PauseQueue(queueB))
}

func TestListQueuesIsSortedPagedAndFiltered(t *testing.T) {
	srv, client := start(t)
	ctx := context.Background()
	for _, id := range []string{"c", "a", "e", "b", "d"} {
		_, err := srv.CreateQueue(location + "/queues/" + id)
		require.NoError(t, err)
	}
	_, err := srv.CreateQueue("projects/other/locations/us-central1/queues/z")
	require.NoError(t, err)
	require.NoError(t, srv.PauseQueue(location+"/queues/d"))

	it := client.ListQueues(ctx, &cloudtaskspb.ListQueuesRequest{Parent: location, PageSize: 2})
	var ids []string
	pages := 0
	for {
		q, err := it.Next()
		if err == iterator.Done {
			break
		}
		require.NoError(t, err)
		ids = append(ids, q.GetName()[len(location+"/queues/"):])
		if it.PageInfo().Remaining() == 0 {
			pages++
		}
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, ids)
	assert.Equal(t, 3, pages, "five queues in pages of two")

	it = client.ListQueues(ctx, &cloudtaskspb.ListQueuesRequest{Parent: location, Filter: "state: PAUSED"})
	q, err := it.Next()
	require.NoError(t, err)
	assert.Equal(t, location+"/queues/d", q.GetName())
	_, err = it.Next()
	assert.Equal(t, iterator.Done, err)

	_, err = client.ListQueues(ctx, &cloudtaskspb.ListQueuesRequest{Parent: location, Filter: "name: x"}).Next()
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.ListQueues(ctx, &cloudtaskspb.ListQueuesRequest{Parent: "projects/p"}).Next()
	requireCode(t, codes.InvalidArgument, err)
}

func TestUpdateQueueAppliesTheMask(t *testing.T) {
	srv, client := start(t)
	ctx := context.Background()
	_, err := client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{
		Name: queueA, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 50, MaxConcurrentDispatches: 7},
	}})
	require.NoError(t, err)
	require.NoError(t, srv.PauseQueue(queueA))

	q, err := client.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: queueA,
			RateLimits:  &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 4, MaxConcurrentDispatches: 99},
			RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 3, MaxDoublings: 0}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits.max_dispatches_per_second", "retry_config.max_attempts", "retry_config.max_doublings"}},
	})
	require.NoError(t, err)
	assert.Equal(t, 4.0, q.GetRateLimits().GetMaxDispatchesPerSecond())
	assert.Equal(t, int32(4), q.GetRateLimits().GetMaxBurstSize())
	assert.Equal(t, int32(7), q.GetRateLimits().GetMaxConcurrentDispatches(), "not in the mask")
	assert.Equal(t, int32(3), q.GetRetryConfig().GetMaxAttempts())
	assert.Equal(t, int32(0), q.GetRetryConfig().GetMaxDoublings(), "zero named in the mask is kept")
	assert.Equal(t, time.Hour, q.GetRetryConfig().GetMaxBackoff().AsDuration(), "untouched default")
	assert.Equal(t, cloudtaskspb.Queue_PAUSED, q.GetState(), "UpdateQueue does not change state")

	// Without a mask every updatable field is replaced.
	q, err = client.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{Queue: &cloudtaskspb.Queue{
		Name: queueA, RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 2}}})
	require.NoError(t, err)
	assert.Equal(t, 500.0, q.GetRateLimits().GetMaxDispatchesPerSecond())
	assert.Equal(t, int32(2), q.GetRateLimits().GetMaxConcurrentDispatches())
	assert.Equal(t, int32(100), q.GetRetryConfig().GetMaxAttempts())

	for _, path := range []string{"state", "name", "purge_time", "no_such_field", "rate_limits.no_such"} {
		_, err = client.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
			Queue: &cloudtaskspb.Queue{Name: queueA}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{path}}})
		requireCode(t, codes.InvalidArgument, err)
	}
	_, err = client.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{Queue: &cloudtaskspb.Queue{
		Name: queueA, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1000}}})
	requireCode(t, codes.InvalidArgument, err)

	// UpdateQueue creates a queue that does not exist.
	q, err = client.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{Queue: &cloudtaskspb.Queue{
		Name: queueB, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1}}})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_RUNNING, q.GetState())
	assert.Equal(t, int32(1), q.GetRateLimits().GetMaxBurstSize())
}

func TestUpdateQueueRejectsANonFiniteRate(t *testing.T) {
	srv, client := start(t)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := client.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{
			Queue:      &cloudtaskspb.Queue{Name: queueA, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: r}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"rate_limits.max_dispatches_per_second"}},
		})
		requireCode(t, codes.InvalidArgument, err)
		assert.Contains(t, err.Error(), "max_dispatches_per_second", "rate %v", r)
	}
	q, err := client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, 500.0, q.GetRateLimits().GetMaxDispatchesPerSecond(), "the rejected updates changed nothing")
}
