package cloudtaskstest

import (
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	maxPageSize       = 1000
	minTombstoneSweep = 1024
)

// store holds the server's queues, tasks and released task names behind one
// mutex. Every method returns copies, never the stored messages.
type store struct {
	now func() time.Time
	log *slog.Logger
	// hardReset makes PurgeQueue forget the purged names instead of keeping
	// them taken for the tombstone window.
	hardReset bool

	mu         sync.Mutex
	queues     map[string]*queueState
	tasks      map[string]*taskEntry    // by full task name, all queues
	tombstones map[string]time.Time     // released task name -> when it frees up
	ttl        map[string]time.Duration // queue path -> SetTombstoneTTL value
	sweepAt    int
	seq        uint64
	reject     func(*cloudtaskspb.CreateTaskRequest) error
	// changed, when set, is called (without mu held) after any change that
	// can make a task due: a new task, a resumed or reconfigured queue.
	changed func()
}

type queueState struct {
	q     *cloudtaskspb.Queue
	tasks map[string]*taskEntry
	disp  queueDispatch
}

type taskEntry struct {
	seq   uint64
	t     *cloudtaskspb.Task // FULL, View unset
	queue *queueState

	// Dispatch bookkeeping, guarded by store.mu.
	removed       bool      // deleted, purged, succeeded or out of attempts
	running       bool      // an attempt is in flight
	gen           uint64    // bumped whenever the task leaves the due heap
	executions    int32     // attempts answered with a non-5xx status
	prevResponse  int       // HTTP status of the previous attempt, 0 if none
	retryReason   string    // why the previous attempt failed
	firstDispatch time.Time // when the first attempt was sent
}

func newStore(now func() time.Time, log *slog.Logger) *store {
	return &store{
		now:        now,
		log:        log,
		queues:     map[string]*queueState{},
		tasks:      map[string]*taskEntry{},
		tombstones: map[string]time.Time{},
		ttl:        map[string]time.Duration{},
		sweepAt:    minTombstoneSweep,
	}
}

func (st *store) notify() {
	if st.changed != nil {
		st.changed()
	}
}

func (st *store) setRejectFunc(fn func(*cloudtaskspb.CreateTaskRequest) error) {
	st.mu.Lock()
	st.reject = fn
	st.mu.Unlock()
}

func (st *store) setTombstoneTTL(queue string, d time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if d <= 0 {
		delete(st.ttl, queue)
		return
	}
	st.ttl[queue] = d
}

// tombstoneTTL returns the retention for names released from queue and
// whether it was set explicitly. mu must be held.
func (st *store) tombstoneTTL(queue string) (time.Duration, bool) {
	if d, ok := st.ttl[queue]; ok {
		return d, true
	}
	return DefaultTombstoneTTL, false
}

// --- queues ---

func (st *store) createQueue(in *cloudtaskspb.Queue) (*cloudtaskspb.Queue, error) {
	if in == nil {
		return nil, invalid("queue: required")
	}
	if err := checkQueueName("queue.name", in.GetName()); err != nil {
		return nil, err
	}
	if err := validateQueueConfig(in); err != nil {
		return nil, err
	}
	q := proto.Clone(in).(*cloudtaskspb.Queue)
	q.State = cloudtaskspb.Queue_RUNNING
	q.PurgeTime = nil
	normalizeQueue(q, false)

	st.mu.Lock()
	if _, ok := st.queues[q.Name]; ok {
		st.mu.Unlock()
		return nil, alreadyExists()
	}
	st.queues[q.Name] = &queueState{q: q, tasks: map[string]*taskEntry{}}
	out := proto.Clone(q).(*cloudtaskspb.Queue)
	st.mu.Unlock()
	st.logQueue("queue created", out)
	return out, nil
}

func (st *store) logQueue(msg string, q *cloudtaskspb.Queue) {
	st.log.Info(msg, "queue", q.GetName(), "state", q.GetState().String(),
		"max_dispatches_per_second", q.GetRateLimits().GetMaxDispatchesPerSecond(),
		"max_burst_size", q.GetRateLimits().GetMaxBurstSize(),
		"max_concurrent_dispatches", q.GetRateLimits().GetMaxConcurrentDispatches(),
		"max_attempts", q.GetRetryConfig().GetMaxAttempts())
}

func validateQueueConfig(q *cloudtaskspb.Queue) error {
	if err := validateRateLimits(q.GetRateLimits()); err != nil {
		return err
	}
	if rc := q.GetRetryConfig(); rc != nil {
		return validateRetryConfig("queue.retry_config", rc)
	}
	return nil
}

func (st *store) getQueue(name string) (*cloudtaskspb.Queue, error) {
	if err := checkQueueName("name", name); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, ok := st.queues[name]
	if !ok {
		return nil, notFound()
	}
	return proto.Clone(qs.q).(*cloudtaskspb.Queue), nil
}

// queueWithTTL returns a copy of the queue and its explicit tombstone TTL
// (0 when unset).
func (st *store) queueWithTTL(name string) (*cloudtaskspb.Queue, time.Duration, error) {
	if err := checkQueueName("name", name); err != nil {
		return nil, 0, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, ok := st.queues[name]
	if !ok {
		return nil, 0, notFound()
	}
	d, set := st.tombstoneTTL(name)
	if !set {
		d = 0
	}
	return proto.Clone(qs.q).(*cloudtaskspb.Queue), d, nil
}

func (st *store) listQueues(parent, filter string, pageSize int32, token string) ([]*cloudtaskspb.Queue, string, error) {
	if err := checkLocation("parent", parent); err != nil {
		return nil, "", err
	}
	want, err := parseStateFilter(filter)
	if err != nil {
		return nil, "", err
	}
	size, err := pageSizeOf(pageSize)
	if err != nil {
		return nil, "", err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var names []string
	for name, qs := range st.queues {
		if strings.HasPrefix(name, parent+"/queues/") && name > token &&
			(want == cloudtaskspb.Queue_STATE_UNSPECIFIED || qs.q.State == want) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	next := ""
	if len(names) > size {
		names = names[:size]
		next = names[size-1]
	}
	out := make([]*cloudtaskspb.Queue, len(names))
	for i, n := range names {
		out[i] = proto.Clone(st.queues[n].q).(*cloudtaskspb.Queue)
	}
	return out, next, nil
}

// parseStateFilter accepts the one ListQueues filter the server supports,
// "state: PAUSED" (or RUNNING, DISABLED).
func parseStateFilter(f string) (cloudtaskspb.Queue_State, error) {
	f = strings.TrimSpace(f)
	if f == "" {
		return cloudtaskspb.Queue_STATE_UNSPECIFIED, nil
	}
	k, v, ok := strings.Cut(f, ":")
	if ok && strings.TrimSpace(k) == "state" {
		if s, ok := cloudtaskspb.Queue_State_value[strings.TrimSpace(v)]; ok && s != 0 {
			return cloudtaskspb.Queue_State(s), nil
		}
	}
	return 0, invalid("filter: only \"state: RUNNING|PAUSED|DISABLED\" is supported by cloudtaskstest")
}

func pageSizeOf(n int32) (int, error) {
	switch {
	case n < 0:
		return 0, invalid("page_size: must not be negative")
	case n == 0 || n > maxPageSize:
		return maxPageSize, nil
	}
	return int(n), nil
}

// updatableQueueFields are the Queue fields UpdateQueue may change; the mask
// may also name their sub-fields.
var updatableQueueFields = []string{
	"app_engine_routing_override", "http_target", "rate_limits", "retry_config", "stackdriver_logging_config",
}

func (st *store) updateQueue(in *cloudtaskspb.Queue, paths []string) (*cloudtaskspb.Queue, error) {
	if in == nil {
		return nil, invalid("queue: required")
	}
	if err := checkQueueName("queue.name", in.GetName()); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		paths = updatableQueueFields
	}
	src := proto.Clone(in).(*cloudtaskspb.Queue)
	keepZeroDoublings := false
	for _, p := range paths {
		top, _, _ := strings.Cut(p, ".")
		if !slices.Contains(updatableQueueFields, top) {
			return nil, invalid("update_mask: %s cannot be updated", echo(p))
		}
		if p == "retry_config.max_doublings" {
			keepZeroDoublings = true
		}
	}

	st.mu.Lock()
	qs, exists := st.queues[in.GetName()]
	var q *cloudtaskspb.Queue
	if exists {
		q = proto.Clone(qs.q).(*cloudtaskspb.Queue)
	} else {
		q = &cloudtaskspb.Queue{Name: in.GetName(), State: cloudtaskspb.Queue_RUNNING}
	}
	st.mu.Unlock()

	for _, p := range paths {
		if err := copyPath(q.ProtoReflect(), src.ProtoReflect(), strings.Split(p, ".")); err != nil {
			return nil, invalid("update_mask: %s is not a field of Queue", echo(p))
		}
	}
	if err := validateQueueConfig(q); err != nil {
		return nil, err
	}
	normalizeQueue(q, keepZeroDoublings)

	st.mu.Lock()
	if cur, ok := st.queues[q.Name]; ok {
		// Keep state changes made since the copy was taken.
		q.State, q.PurgeTime = cur.q.State, cur.q.PurgeTime
		cur.q = q
	} else {
		st.queues[q.Name] = &queueState{q: q, tasks: map[string]*taskEntry{}}
	}
	out := proto.Clone(q).(*cloudtaskspb.Queue)
	st.mu.Unlock()
	st.logQueue("queue updated", out)
	st.notify()
	return out, nil
}

// copyPath copies the field at path (a field-mask path split at dots) from
// src to dst, clearing it in dst when src does not have it.
func copyPath(dst, src protoreflect.Message, path []string) error {
	fd := dst.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	if fd == nil {
		return errUnknownField
	}
	if len(path) == 1 {
		if src.Has(fd) {
			dst.Set(fd, src.Get(fd))
		} else {
			dst.Clear(fd)
		}
		return nil
	}
	if fd.Message() == nil || fd.IsList() || fd.IsMap() {
		return errUnknownField
	}
	return copyPath(dst.Mutable(fd).Message(), src.Get(fd).Message(), path[1:])
}

var errUnknownField = invalid("unknown field")

func (st *store) setQueueState(name string, s cloudtaskspb.Queue_State) (*cloudtaskspb.Queue, error) {
	if err := checkQueueName("name", name); err != nil {
		return nil, err
	}
	st.mu.Lock()
	qs, ok := st.queues[name]
	if !ok {
		st.mu.Unlock()
		return nil, notFound()
	}
	qs.q.State = s
	out := proto.Clone(qs.q).(*cloudtaskspb.Queue)
	st.mu.Unlock()
	st.notify()
	return out, nil
}

func (st *store) purgeQueue(name string) (*cloudtaskspb.Queue, error) {
	if err := checkQueueName("name", name); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, ok := st.queues[name]
	if !ok {
		return nil, notFound()
	}
	now := st.now()
	for _, e := range qs.tasks {
		st.removeLocked(e, now)
		if st.hardReset {
			delete(st.tombstones, e.t.Name)
		}
	}
	if st.hardReset {
		for n := range st.tombstones {
			if strings.HasPrefix(n, name+"/tasks/") {
				delete(st.tombstones, n)
			}
		}
	}
	qs.disp.due = nil
	qs.q.PurgeTime = timestamppb.New(now.Truncate(time.Microsecond))
	return proto.Clone(qs.q).(*cloudtaskspb.Queue), nil
}

func (st *store) deleteQueue(name string) error {
	if err := checkQueueName("name", name); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, ok := st.queues[name]
	if !ok {
		return notFound()
	}
	now := st.now()
	for _, e := range qs.tasks {
		st.removeLocked(e, now)
	}
	delete(st.queues, name)
	return nil
}

// --- tasks ---

// removeLocked drops a stored task and keeps its name taken for the queue's
// tombstone window. mu must be held.
func (st *store) removeLocked(e *taskEntry, now time.Time) {
	e.removed = true
	name := e.t.Name
	delete(e.queue.tasks, name)
	delete(st.tasks, name)
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
	st.mu.Lock()
	_, ok := st.queues[parent]
	reject := st.reject
	st.mu.Unlock()
	if !ok {
		return nil, notFound()
	}
	now := st.now()
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
		return nil, notFound()
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
	if _, err := splitTaskName("name", name); err != nil {
		return nil, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.tasks[name]
	if !ok {
		return nil, notFound()
	}
	return render(e.t, view), nil
}

func (st *store) deleteTask(name string) error {
	if _, err := splitTaskName("name", name); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.tasks[name]
	if !ok {
		return notFound()
	}
	st.removeLocked(e, st.now())
	return nil
}

// sortedLocked returns the queue's tasks in creation order. mu must be held.
func sortedLocked(qs *queueState) []*taskEntry {
	es := make([]*taskEntry, 0, len(qs.tasks))
	for _, e := range qs.tasks {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *taskEntry) int { return cmpUint(a.seq, b.seq) })
	return es
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
		return nil, "", notFound()
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
