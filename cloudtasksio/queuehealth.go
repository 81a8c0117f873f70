package cloudtasksio

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
)

// Queue health (WriterOptions.QueueHealthInterval): each worker process reads the queues it
// writes to again, at most once per queue and interval, for every DoFn instance of the process.
// A bundle that writes to a queue starts its read once the interval has passed, and no bundle
// waits for a read: a queue that no bundle writes to is not read, so the reads stop with the
// writes, and nothing runs between bundles but the reads under way (portable runners never call
// Teardown, so nothing could stop a timer). The first read of a queue is the preflight's, made
// through the same reader. Each read asks the v2beta3 API for the queue's state, its overrides
// and its stats, and falls back to the v2 API, which has no stats, on a server that refuses
// the v2beta3 read. What a read finds updates the preflight's findings and the queue gauges.

const (
	minQueueHealthInterval = 10 * time.Second
	maxQueueHealthInterval = 24 * time.Hour
	// maxHealthReadsUnderWay bounds the re-reads under way in a process at once: a bundle over
	// many queues whose interval has passed starts that many and leaves the others to the
	// next bundles, as nothing waits for them.
	maxHealthReadsUnderWay = 8
)

// healthReadMask is the v2beta3 read mask of a health read: what the preflight's findings
// need, and the stats, which the service answers only when the mask names them.
var healthReadMask = []string{"name", "state", "http_target", "app_engine_http_queue", "stats"}

// healthReadsUnderWay counts the re-reads under way in the process (maxHealthReadsUnderWay).
var healthReadsUnderWay atomic.Int64

// queueHealthReader reads a queue in v2 form and, from the v2beta3 API (beta), its stats.
type queueHealthReader interface {
	readHealth(ctx context.Context, queue string, beta bool) (*cloudtaskspb.Queue, *betapb.QueueStats, error)
}

// apiHealthReader reads through the shared clients of a client setting.
type apiHealthReader struct{ spec clientSpec }

func (r apiHealthReader) readHealth(ctx context.Context, queue string, beta bool) (*cloudtaskspb.Queue, *betapb.QueueStats, error) {
	if !beta {
		q, err := v2QueueReader(r).readQueue(ctx, queue)
		return q, nil, err
	}
	spec := r.spec
	spec.ChannelPoolSize = 0 // a read per queue and interval needs no connection pool
	client, err := betaClients.get(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	q, err := client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queue, ReadMask: &fieldmaskpb.FieldMask{Paths: healthReadMask}})
	if err != nil {
		return nil, nil, err
	}
	v2, err := v2QueueOf(q)
	return v2, q.GetStats(), err
}

// v2QueueOf returns what the preflight's findings read of a v2beta3 queue, in v2 form. The
// messages below the queue have the same field numbers in both versions.
func v2QueueOf(q *betapb.Queue) (*cloudtaskspb.Queue, error) {
	out := &cloudtaskspb.Queue{Name: q.GetName(), State: cloudtaskspb.Queue_State(q.GetState())}
	if t := q.GetHttpTarget(); t != nil {
		out.HttpTarget = &cloudtaskspb.HttpTarget{}
		if err := convertProto(t, out.HttpTarget); err != nil {
			return nil, err
		}
	}
	if r := q.GetAppEngineHttpQueue().GetAppEngineRoutingOverride(); r != nil {
		out.AppEngineRoutingOverride = &cloudtaskspb.AppEngineRouting{}
		if err := convertProto(r, out.AppEngineRoutingOverride); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func convertProto(from, to proto.Message) error {
	b, err := proto.Marshal(from)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, to)
}

// healthKey selects one queue's health: the queue as one client setting sees it.
type healthKey struct {
	client clientSpec
	queue  string
}

// queueHealth is what a worker process knows of one queue's health, kept in queueHealths
// (caches.go) and shared by every DoFn instance of the process.
type queueHealth struct {
	mu         sync.Mutex
	started    time.Time             // when the latest read started; zero before the first
	reading    bool                  // a re-read is under way
	v2Only     bool                  // the server refused the v2beta3 read: read v2, without stats
	stopped    bool                  // PERMISSION_DENIED or UNIMPLEMENTED: not read again
	latest     *healthRead           // the latest read that ended; nil before
	preflightQ *cloudtaskspb.Queue   // the queue as the preflight's latest read saw it: what it reported
	reported   map[taskSets][]string // per kind of task, the findings last reported under PreflightWarn
	reads      int64                 // reads ended ...
	failures   int64                 // ... and failed
	counted    [2]int64              // reads and failures already counted in the metrics
	failLogged bool                  // the failure of the latest read was logged
}

// healthRead is what one read found; never changed once recorded.
type healthRead struct {
	at    time.Time           // when the read ended
	queue *cloudtaskspb.Queue // nil when the read failed
	stats *betapb.QueueStats  // nil when the server gave none
}

func newQueueHealth() (*queueHealth, error) { return &queueHealth{}, nil }

// read reads the queue once and records what it found.
func (h *queueHealth) read(ctx context.Context, reader queueHealthReader, queue string, preflight bool) (*cloudtaskspb.Queue, error) {
	ctx, cancel := context.WithTimeout(ctx, preflightReadTimeout)
	defer cancel()
	h.mu.Lock()
	beta := !h.v2Only
	h.mu.Unlock()
	q, stats, err := reader.readHealth(ctx, queue, beta)
	if c := status.Code(err); beta && (c == codes.Unimplemented || c == codes.InvalidArgument) {
		// An emulator without the v2beta3 API, or a server refusing the read mask.
		h.mu.Lock()
		h.v2Only = true
		h.mu.Unlock()
		q, stats, err = reader.readHealth(ctx, queue, false)
	}
	h.record(ctx, queue, q, stats, err, preflight)
	return q, err
}

// record keeps what a read found as the queue's latest, and logs a failed re-read once until a
// read succeeds again (the preflight logs the failures of its own reads).
func (h *queueHealth) record(ctx context.Context, queue string, q *cloudtaskspb.Queue, stats *betapb.QueueStats, err error, preflight bool) {
	h.mu.Lock()
	h.reads++
	if err == nil {
		h.latest = &healthRead{at: time.Now(), queue: q, stats: stats}
		h.failLogged = false
		if preflight {
			h.preflightQ, h.reported = q, nil
		}
		h.mu.Unlock()
		return
	}
	h.latest = &healthRead{at: time.Now()}
	h.failures++
	code := status.Code(err)
	stop := code == codes.PermissionDenied || code == codes.Unimplemented
	h.stopped = h.stopped || stop
	// A stop is logged even after other failures: it is the last line about the queue.
	log := !preflight && (stop || !h.failLogged)
	h.failLogged = h.failLogged || log
	h.mu.Unlock()
	switch {
	case !log:
	case code == codes.PermissionDenied:
		infof(ctx, "queue health: not reading queue %s again: PERMISSION_DENIED (grant cloudtasks.queues.get, for example with roles/cloudtasks.viewer, to have its state and backlog reported)", queue)
	case code == codes.Unimplemented:
		infof(ctx, "queue health: not reading queue %s again: the server does not implement GetQueue (UNIMPLEMENTED; an emulator?)", queue)
	default:
		warnf(ctx, "queue health: reading queue %s failed with %s; its queueState gauge is 0 until a read succeeds, one interval later or more", queue, engine.OutermostCode(err))
	}
}

// startDue starts a re-read of the queue if interval has passed since the latest read started
// and none is under way, unless the process has maxHealthReadsUnderWay under way already. The
// first read of a queue is the preflight's: with the preflight on, the re-reads start one
// interval after the queue's first use.
func (h *queueHealth) startDue(reader queueHealthReader, queue string, interval time.Duration, preflightOn bool) {
	now := time.Now()
	h.mu.Lock()
	if h.started.IsZero() && preflightOn {
		h.started = now
	}
	due := !h.reading && !h.stopped && (h.started.IsZero() || now.Sub(h.started) >= interval)
	if !due || healthReadsUnderWay.Add(1) > maxHealthReadsUnderWay {
		if due {
			healthReadsUnderWay.Add(-1)
		}
		h.mu.Unlock()
		return
	}
	h.reading, h.started = true, now
	h.mu.Unlock()
	go func() {
		defer healthReadsUnderWay.Add(-1)
		// The read serves every instance and outlives the bundle that started it: it runs on
		// a context of its own.
		_, _ = h.read(context.Background(), reader, queue, false)
		h.mu.Lock()
		h.reading = false
		h.mu.Unlock()
	}()
}

// queueGauges are a queue's gauge values, as its latest read found them.
type queueGauges struct {
	read     bool  // a read has ended
	state    int64 // Queue.State's number; 0 when the read failed
	stats    bool  // the read gave the stats
	tasks    int64
	oldestAt int64 // seconds from the oldest task's estimated arrival to the read
}

// report returns the queue's gauges and the reads and failures not counted yet, which it
// marks counted.
func (h *queueHealth) report() (g queueGauges, reads, failures int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reads, failures = h.reads-h.counted[0], h.failures-h.counted[1]
	h.counted = [2]int64{h.reads, h.failures}
	r := h.latest
	if r == nil {
		return g, reads, failures
	}
	g.read = true
	if r.queue == nil {
		return g, reads, failures
	}
	g.state = int64(r.queue.GetState())
	if r.stats != nil {
		g.stats, g.tasks = true, r.stats.GetTasksCount()
		if a := r.stats.GetOldestEstimatedArrivalTime(); a != nil {
			g.oldestAt = max(0, int64(r.at.Sub(a.AsTime())/time.Second))
		}
	}
	return g, reads, failures
}

// worse returns the larger of each of g's and o's values.
func (g queueGauges) worse(o queueGauges) queueGauges {
	return queueGauges{read: g.read || o.read, state: max(g.state, o.state), stats: g.stats || o.stats,
		tasks: max(g.tasks, o.tasks), oldestAt: max(g.oldestAt, o.oldestAt)}
}

func (g queueGauges) set(ctx context.Context, state, tasks, age string) {
	beam.NewGauge(MetricsNamespace, state).Set(ctx, g.state)
	if g.stats {
		beam.NewGauge(MetricsNamespace, tasks).Set(ctx, g.tasks)
		beam.NewGauge(MetricsNamespace, age).Set(ctx, g.oldestAt)
	}
}
