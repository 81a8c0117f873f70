package cloudtaskstest

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// v2Service serves the Cloud Tasks v2 API from a store. Methods it does not
// override (IAM, batch, CMEK) answer UNIMPLEMENTED.
type v2Service struct {
	cloudtaskspb.UnimplementedCloudTasksServer
	store *store
	// run dispatches a task now (RunTask).
	run func(ctx context.Context, name string, view cloudtaskspb.Task_View) (*cloudtaskspb.Task, error)
}

func (v *v2Service) ListQueues(_ context.Context, r *cloudtaskspb.ListQueuesRequest) (*cloudtaskspb.ListQueuesResponse, error) {
	qs, next, err := v.store.listQueues(r.GetParent(), r.GetFilter(), r.GetPageSize(), r.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &cloudtaskspb.ListQueuesResponse{Queues: qs, NextPageToken: next}, nil
}

func (v *v2Service) GetQueue(_ context.Context, r *cloudtaskspb.GetQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.store.getQueue(r.GetName())
}

func (v *v2Service) CreateQueue(_ context.Context, r *cloudtaskspb.CreateQueueRequest) (*cloudtaskspb.Queue, error) {
	if err := checkLocation("parent", r.GetParent()); err != nil {
		return nil, err
	}
	if r.GetQueue() == nil {
		return nil, invalid("queue: required")
	}
	if err := checkQueueName("queue.name", r.GetQueue().GetName()); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(r.GetQueue().GetName(), r.GetParent()+"/queues/") {
		return nil, invalid("queue.name: %s is not in parent %s", echo(r.GetQueue().GetName()), echo(r.GetParent()))
	}
	return v.store.createQueue(r.GetQueue())
}

func (v *v2Service) UpdateQueue(_ context.Context, r *cloudtaskspb.UpdateQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.store.updateQueue(r.GetQueue(), r.GetUpdateMask().GetPaths())
}

func (v *v2Service) DeleteQueue(_ context.Context, r *cloudtaskspb.DeleteQueueRequest) (*emptypb.Empty, error) {
	if err := v.store.deleteQueue(r.GetName()); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (v *v2Service) PurgeQueue(_ context.Context, r *cloudtaskspb.PurgeQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.store.purgeQueue(r.GetName())
}

func (v *v2Service) PauseQueue(_ context.Context, r *cloudtaskspb.PauseQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.store.setQueueState(r.GetName(), cloudtaskspb.Queue_PAUSED)
}

func (v *v2Service) ResumeQueue(_ context.Context, r *cloudtaskspb.ResumeQueueRequest) (*cloudtaskspb.Queue, error) {
	return v.store.setQueueState(r.GetName(), cloudtaskspb.Queue_RUNNING)
}

func (v *v2Service) ListTasks(_ context.Context, r *cloudtaskspb.ListTasksRequest) (*cloudtaskspb.ListTasksResponse, error) {
	ts, next, err := v.store.listTasks(r.GetParent(), r.GetResponseView(), r.GetPageSize(), r.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &cloudtaskspb.ListTasksResponse{Tasks: ts, NextPageToken: next}, nil
}

func (v *v2Service) GetTask(_ context.Context, r *cloudtaskspb.GetTaskRequest) (*cloudtaskspb.Task, error) {
	return v.store.getTask(r.GetName(), r.GetResponseView())
}

func (v *v2Service) CreateTask(_ context.Context, r *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	return v.store.createTask(r)
}

func (v *v2Service) DeleteTask(_ context.Context, r *cloudtaskspb.DeleteTaskRequest) (*emptypb.Empty, error) {
	if err := v.store.deleteTask(r.GetName()); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (v *v2Service) RunTask(ctx context.Context, r *cloudtaskspb.RunTaskRequest) (*cloudtaskspb.Task, error) {
	return v.run(ctx, r.GetName(), r.GetResponseView())
}

// v2beta3Service serves GetQueue of the v2beta3 API, the only API that shows
// a queue's tombstone_ttl and its stats. Every other v2beta3 method answers
// UNIMPLEMENTED.
type v2beta3Service struct {
	betapb.UnimplementedCloudTasksServer
	store *store
}

// GetQueue answers every field the server keeps but stats when the request
// has no read mask, as the service does; with a mask, the fields it names,
// stats included when named. A path that is not a field of Queue is
// INVALID_ARGUMENT.
func (v *v2beta3Service) GetQueue(_ context.Context, r *betapb.GetQueueRequest) (*betapb.Queue, error) {
	paths := r.GetReadMask().GetPaths()
	withStats := false
	for _, p := range paths {
		if !isQueuePath(strings.Split(p, ".")) {
			return nil, invalid("read_mask: %s is not a field of Queue", echo(p))
		}
		withStats = withStats || p == "stats" || strings.HasPrefix(p, "stats.")
	}
	q, ttl, stats, err := v.store.queueWithTTL(r.GetName(), withStats)
	if err != nil {
		return nil, err
	}
	out, err := toBetaQueue(q, ttl)
	if err != nil {
		return nil, err
	}
	if stats != nil {
		out.Stats = &betapb.QueueStats{TasksCount: stats.tasks, ConcurrentDispatchesCount: stats.running}
		if !stats.oldest.IsZero() {
			out.Stats.OldestEstimatedArrivalTime = timestamppb.New(stats.oldest)
		}
	}
	if len(paths) == 0 {
		return out, nil
	}
	masked := &betapb.Queue{}
	for _, p := range paths {
		if err := copyPath(masked.ProtoReflect(), out.ProtoReflect(), strings.Split(p, ".")); err != nil {
			return nil, invalid("read_mask: %s is not a field of Queue", echo(p))
		}
	}
	return masked, nil
}

// isQueuePath reports whether path (a field-mask path split at dots) names a
// field of the v2beta3 Queue or of a message below one.
func isQueuePath(path []string) bool {
	md := (&betapb.Queue{}).ProtoReflect().Descriptor()
	for i, name := range path {
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return false
		}
		if i < len(path)-1 {
			if fd.Message() == nil || fd.IsList() || fd.IsMap() {
				return false
			}
			md = fd.Message()
		}
	}
	return len(path) > 0
}

// toBetaQueue converts a v2 queue to its v2beta3 form. RateLimits,
// RetryConfig, HttpTarget and AppEngineRouting have the same field numbers
// in both versions, so they go through the wire format.
func toBetaQueue(q *cloudtaskspb.Queue, ttl time.Duration) (*betapb.Queue, error) {
	out := &betapb.Queue{
		Name:      q.GetName(),
		State:     betapb.Queue_State(q.GetState()),
		PurgeTime: q.GetPurgeTime(),
		Type:      betapb.Queue_PUSH,
	}
	if q.GetRateLimits() != nil {
		out.RateLimits = &betapb.RateLimits{}
		if err := convert(q.GetRateLimits(), out.RateLimits); err != nil {
			return nil, err
		}
	}
	if q.GetRetryConfig() != nil {
		out.RetryConfig = &betapb.RetryConfig{}
		if err := convert(q.GetRetryConfig(), out.RetryConfig); err != nil {
			return nil, err
		}
	}
	if q.GetHttpTarget() != nil {
		out.HttpTarget = &betapb.HttpTarget{}
		if err := convert(q.GetHttpTarget(), out.HttpTarget); err != nil {
			return nil, err
		}
	}
	if q.GetAppEngineRoutingOverride() != nil {
		routing := &betapb.AppEngineRouting{}
		if err := convert(q.GetAppEngineRoutingOverride(), routing); err != nil {
			return nil, err
		}
		out.QueueType = &betapb.Queue_AppEngineHttpQueue{AppEngineHttpQueue: &betapb.AppEngineHttpQueue{AppEngineRoutingOverride: routing}}
	}
	if ttl > 0 {
		out.TombstoneTtl = durationpb.New(ttl)
	}
	return out, nil
}

func convert(from, to proto.Message) error {
	b, err := proto.Marshal(from)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, to)
}
