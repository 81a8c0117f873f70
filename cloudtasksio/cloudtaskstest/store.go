package cloudtaskstest

import (
	"log/slog"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
)

const (
	maxPageSize       = 1000
	minTombstoneSweep = 1024
)

// store holds the server's queues, tasks and released task names behind one
// mutex. Every method returns copies, never the stored messages. Its queue
// methods are in queues.go, its task methods in tasks.go; dispatch.go keeps
// the per-queue and per-task dispatch state it holds.
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
	quota      quotaState
	// changed is called (without mu held) after any change to what is
	// stored or due: a new, deleted or purged task, a paused, resumed,
	// reconfigured or deleted queue. It wakes the dispatcher and Wait.
	changed func()
}

// storeConfig is what a store is built with.
type storeConfig struct {
	now func() time.Time
	log *slog.Logger
	// hardReset makes PurgeQueue forget the purged names instead of keeping
	// them taken for the tombstone window.
	hardReset bool
	// changed is store.changed; nil: nobody listens.
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
	d     taskDispatch // guarded by store.mu
}

func newStore(cfg storeConfig) *store {
	if cfg.changed == nil {
		cfg.changed = func() {}
	}
	return &store{
		now:        cfg.now,
		log:        cfg.log,
		hardReset:  cfg.hardReset,
		changed:    cfg.changed,
		queues:     map[string]*queueState{},
		tasks:      map[string]*taskEntry{},
		tombstones: map[string]time.Time{},
		ttl:        map[string]time.Duration{},
		sweepAt:    minTombstoneSweep,
		quota:      quotaState{byQueue: map[string]CreateQuota{}, buckets: map[string]*tokenBucket{}},
	}
}

func (st *store) notify() { st.changed() }

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
