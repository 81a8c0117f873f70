package cloudtaskstest

import (
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The store's queue methods: create, read, list, update, pause and resume,
// purge and delete.

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
		if err := validateRetryConfig("queue.retry_config", rc); err != nil {
			return err
		}
	}
	if ht := q.GetHttpTarget(); ht != nil {
		return validateHTTPTarget(ht)
	}
	return nil
}

// queueLocked returns the queue called name, or the status error for a bad
// name or a missing queue. The caller holds st.mu.
func (st *store) queueLocked(name string) (*queueState, error) {
	if err := checkQueueName("name", name); err != nil {
		return nil, err
	}
	qs, ok := st.queues[name]
	if !ok {
		return nil, notFound()
	}
	return qs, nil
}

func (st *store) getQueue(name string) (*cloudtaskspb.Queue, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, err := st.queueLocked(name)
	if err != nil {
		return nil, err
	}
	return proto.Clone(qs.q).(*cloudtaskspb.Queue), nil
}

// queueWithTTL returns a copy of the queue, its explicit tombstone TTL (0
// when unset) and, when withStats is set, what the v2beta3 Queue.stats
// reports of it, all seen at one moment.
func (st *store) queueWithTTL(name string, withStats bool) (*cloudtaskspb.Queue, time.Duration, *queueStats, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, err := st.queueLocked(name)
	if err != nil {
		return nil, 0, nil, err
	}
	d, set := st.tombstoneTTL(name)
	if !set {
		d = 0
	}
	var stats *queueStats
	if withStats {
		stats = qs.statsLocked()
	}
	return proto.Clone(qs.q).(*cloudtaskspb.Queue), d, stats, nil
}

// queueStats is what the server reports of a queue's tasks in the v2beta3
// Queue.stats: the fields it knows exactly.
type queueStats struct {
	tasks   int64     // tasks stored: not yet sent, being sent, or waiting for a retry
	oldest  time.Time // the earliest schedule time among them; zero when there is none
	running int64     // attempts sent and not yet answered
}

// statsLocked counts the queue's tasks. The caller holds store.mu.
func (qs *queueState) statsLocked() *queueStats {
	s := &queueStats{tasks: int64(len(qs.tasks)), running: int64(qs.disp.running)}
	for _, e := range qs.tasks {
		if at := e.t.GetScheduleTime().AsTime(); s.oldest.IsZero() || at.Before(s.oldest) {
			s.oldest = at
		}
	}
	return s
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

	// The copy, its change and the write back happen under one hold of the lock, so two
	// concurrent updates of one queue each see the other's change (the work under it is a
	// few field copies and checks, no I/O).
	st.mu.Lock()
	var q *cloudtaskspb.Queue
	if qs, exists := st.queues[in.GetName()]; exists {
		q = proto.Clone(qs.q).(*cloudtaskspb.Queue)
	} else {
		q = &cloudtaskspb.Queue{Name: in.GetName(), State: cloudtaskspb.Queue_RUNNING}
	}
	for _, p := range paths {
		if err := copyPath(q.ProtoReflect(), src.ProtoReflect(), strings.Split(p, ".")); err != nil {
			st.mu.Unlock()
			return nil, invalid("update_mask: %s is not a field of Queue", echo(p))
		}
	}
	if err := validateQueueConfig(q); err != nil {
		st.mu.Unlock()
		return nil, err
	}
	normalizeQueue(q, keepZeroDoublings)
	if cur, ok := st.queues[q.Name]; ok {
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
	st.mu.Lock()
	qs, err := st.queueLocked(name)
	if err != nil {
		st.mu.Unlock()
		return nil, err
	}
	qs.q.State = s
	out := proto.Clone(qs.q).(*cloudtaskspb.Queue)
	st.mu.Unlock()
	st.notify()
	return out, nil
}

func (st *store) purgeQueue(name string) (*cloudtaskspb.Queue, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, err := st.queueLocked(name)
	if err != nil {
		return nil, err
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
	st.mu.Lock()
	defer st.mu.Unlock()
	qs, err := st.queueLocked(name)
	if err != nil {
		return err
	}
	now := st.now()
	for _, e := range qs.tasks {
		st.removeLocked(e, now)
	}
	delete(st.queues, name)
	return nil
}
