package cloudtaskstest

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The store's task methods: names and tombstones, create, read, list and
// delete, and the NOT_FOUND answers about a task (validate.go says where
// their texts come from).

// removeLocked drops a stored task and keeps its name taken for the queue's
// tombstone window. mu must be held.
func (st *store) removeLocked(e *taskEntry, now time.Time) {
	e.d.removed = true
	name := e.t.Name
	delete(e.queue.tasks, name)
	delete(st.tasks, name)
	e.queue.disp.compact(len(e.queue.tasks))
	ttl, _ := st.tombstoneTTL(e.queue.q.Name)
	st.tombstones[name] = now.Add(ttl)
	if len(st.tombstones) >= st.sweepAt {
		for n, until := range st.tombstones {
			if !now.Before(until) {
				delete(st.tombstones, n)
			}
		}
		st.sweepAt = max(minTombstoneSweep, 2*len(st.tombstones))
	}
}

// nameTakenLocked reports whether a task name is held or within its
// tombstone window. mu must be held.
func (st *store) nameTakenLocked(name string, now time.Time) bool {
	if _, ok := st.tasks[name]; ok {
		return true
	}
	if until, ok := st.tombstones[name]; ok {
		if now.Before(until) {
			return true
		}
		delete(st.tombstones, name)
	}
	return false
}

func (st *store) createTask(req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	parent := req.GetParent()
	if err := checkQueueName("parent", parent); err != nil {
		return nil, err
	}
	now := st.now()
	st.mu.Lock()
	_, ok := st.queues[parent]
	reject := st.reject
	var quotaErr error
	if ok {
		quotaErr = st.takeCreateTokenLocked(parent, now)
	}
	st.mu.Unlock()
	if !ok {
		return nil, queueNotFound()
	}
	if quotaErr != nil {
		return nil, quotaErr
	}
	if err := validateTask(parent, req.GetTask(), now); err != nil {
		return nil, err
	}
	if reject != nil {
		if err := reject(req); err != nil {
			return nil, invalid("%s", err.Error())
		}
	}

	t := proto.Clone(req.GetTask()).(*cloudtaskspb.Task)
	t.CreateTime = timestamppb.New(now.Truncate(time.Second))
	if t.ScheduleTime == nil {
		t.ScheduleTime = timestamppb.New(now.Truncate(time.Microsecond))
	} else {
		t.ScheduleTime = timestamppb.New(t.ScheduleTime.AsTime().Truncate(time.Microsecond))
	}
	t.DispatchCount, t.ResponseCount, t.FirstAttempt, t.LastAttempt, t.View = 0, 0, nil, nil, 0
	switch mt := t.MessageType.(type) {
	case *cloudtaskspb.Task_HttpRequest:
		mt.HttpRequest.HttpMethod = effectiveMethod(mt.HttpRequest.HttpMethod)
	case *cloudtaskspb.Task_AppEngineHttpRequest:
		mt.AppEngineHttpRequest.HttpMethod = effectiveMethod(mt.AppEngineHttpRequest.HttpMethod)
	}

	st.mu.Lock()
	qs, ok := st.queues[parent]
	if !ok { // deleted meanwhile
		st.mu.Unlock()
		return nil, queueNotFound()
	}
	if t.Name == "" {
		for {
			t.Name = parent + "/tasks/" + strconv.FormatUint(rand.Uint64N(1<<63-1)+1, 10)
			if !st.nameTakenLocked(t.Name, now) {
				break
			}
		}
	} else if st.nameTakenLocked(t.Name, now) {
		st.mu.Unlock()
		return nil, alreadyExists()
	}
	st.seq++
	e := &taskEntry{seq: st.seq, t: t, queue: qs}
	qs.tasks[t.Name] = e
	st.tasks[t.Name] = e
	qs.disp.push(e)
	out := render(t, req.GetResponseView())
	st.mu.Unlock()
	st.notify()
	return out, nil
}

// render copies a stored task for a response in the given view. BASIC (the
// default) leaves out the request body and headers of either target, which
// can be large or sensitive.
func render(t *cloudtaskspb.Task, view cloudtaskspb.Task_View) *cloudtaskspb.Task {
	c := proto.Clone(t).(*cloudtaskspb.Task)
	if view != cloudtaskspb.Task_FULL {
		view = cloudtaskspb.Task_BASIC
		switch mt := c.MessageType.(type) {
		case *cloudtaskspb.Task_HttpRequest:
			mt.HttpRequest.Body, mt.HttpRequest.Headers = nil, nil
		case *cloudtaskspb.Task_AppEngineHttpRequest:
			mt.AppEngineHttpRequest.Body, mt.AppEngineHttpRequest.Headers = nil, nil
		}
	}
	c.View = view
	return c
}

func (st *store) getTask(name string, view cloudtaskspb.Task_View) (*cloudtaskspb.Task, error) {
	queue, err := splitTaskName("name", name)
	if err != nil {
		return nil, err
	}
	now := st.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.tasks[name]
	if !ok {
		return nil, st.missingTaskLocked(queue, name, now)
	}
	return render(e.t, view), nil
}

func (st *store) deleteTask(name string) error {
	queue, err := splitTaskName("name", name)
	if err != nil {
		return err
	}
	now := st.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.tasks[name]
	if !ok {
		return st.missingTaskLocked(queue, name, now)
	}
	st.removeLocked(e, now)
	return nil
}

// missingTaskLocked is the NOT_FOUND answer about the task called name in queue, which the
// store does not hold: the queue's when the queue does not exist, taskGone while the name is
// within its tombstone window (the task ran or was deleted), else the plain one. mu must be
// held.
func (st *store) missingTaskLocked(queue, name string, now time.Time) error {
	if _, ok := st.queues[queue]; !ok {
		return queueNotFound()
	}
	if until, ok := st.tombstones[name]; ok && now.Before(until) {
		return taskGone()
	}
	return notFound()
}

// sortedLocked returns the queue's tasks in creation order. mu must be held.
func sortedLocked(qs *queueState) []*taskEntry {
	es := make([]*taskEntry, 0, len(qs.tasks))
	for _, e := range qs.tasks {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *taskEntry) int { return cmp.Compare(a.seq, b.seq) })
	return es
}

func (st *store) listTasks(parent string, view cloudtaskspb.Task_View, pageSize int32, token string) ([]*cloudtaskspb.Task, string, error) {
	if err := checkQueueName("parent", parent); err != nil {
		return nil, "", err
	}
	size, err := pageSizeOf(pageSize)
	if err != nil {
		return nil, "", err
	}
	var after uint64
	if token != "" {
		after, err = strconv.ParseUint(token, 10, 64)
		if err != nil {
			return nil, "", invalid("page_token: not a token returned by ListTasks")
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, ok := st.queues[parent]
	if !ok {
		return nil, "", queueNotFound()
	}
	var out []*cloudtaskspb.Task
	var last uint64
	for _, e := range sortedLocked(qs) {
		if e.seq <= after {
			continue
		}
		if len(out) == size {
			return out, strconv.FormatUint(last, 10), nil
		}
		out = append(out, render(e.t, view))
		last = e.seq
	}
	return out, "", nil
}

func (st *store) snapshotTasks(queue string) []*cloudtaskspb.Task {
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, ok := st.queues[queue]
	if !ok {
		return nil
	}
	es := sortedLocked(qs)
	out := make([]*cloudtaskspb.Task, len(es))
	for i, e := range es {
		out[i] = render(e.t, cloudtaskspb.Task_FULL)
	}
	return out
}

func (st *store) snapshotTask(name string) (*cloudtaskspb.Task, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.tasks[name]
	if !ok {
		return nil, false
	}
	return render(e.t, cloudtaskspb.Task_FULL), true
}
