package engine

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// returnedObserver records what Request.Returned holds when Created is called.
type returnedObserver struct {
	nopObserver[string]
	returned map[string]*cloudtaskspb.Task
	dedup    map[string]bool
}

func (o *returnedObserver) Created(_ context.Context, r *Request[string], deduplicated bool) {
	o.returned[r.Tag] = r.Returned()
	o.dedup[r.Tag] = deduplicated
}

func TestCreatedSeesTheTaskTheServiceReturned(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	creator := CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		if req.GetTask().GetName() != "" {
			return nil, status.Error(codes.AlreadyExists, "the task exists")
		}
		// The service names an unnamed task and stamps its times.
		return &cloudtaskspb.Task{Name: req.GetParent() + "/tasks/given-" + idOf(req),
			CreateTime: timestamppb.New(created), ScheduleTime: timestamppb.New(created.Add(time.Minute))}, nil
	})
	obs := &returnedObserver{returned: map[string]*cloudtaskspb.Task{}, dedup: map[string]bool{}}
	e := New[string](creator, baseOptions(), obs)
	ctx := context.Background()
	unnamed, named := newRequest("a"), namedRequest("b")
	require.Nil(t, unnamed.Returned(), "nothing is returned before the create")
	require.NoError(t, e.Submit(ctx, unnamed))
	require.NoError(t, e.Submit(ctx, named))
	require.NoError(t, e.Flush(ctx))

	got := obs.returned["a"]
	require.NotNil(t, got, "the unnamed task's create returned the stored task")
	assert.Equal(t, testQueue+"/tasks/given-a", got.GetName())
	assert.Equal(t, created, got.GetCreateTime().AsTime())
	assert.Equal(t, created.Add(time.Minute), got.GetScheduleTime().AsTime())
	assert.False(t, obs.dedup["a"])

	assert.Contains(t, obs.returned, "b")
	assert.Nil(t, obs.returned["b"], "ALREADY_EXISTS returns no task")
	assert.True(t, obs.dedup["b"])
}
