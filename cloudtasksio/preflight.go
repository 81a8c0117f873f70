package cloudtasksio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// The queue preflight. When it first writes to a queue, each worker process reads the queue
// once (v2 GetQueue) and reports what would make the tasks it creates behave otherwise than
// the sink built them: a queue that is not dispatching (PAUSED, DISABLED), a queue-level URL
// override that replaces the URL of every HTTP task, or a queue-level App Engine routing
// override that replaces the routing the sink set. WriterOptions.QueuePreflight decides
// whether a finding is a warning or fails the bundle.

// QueuePreflight selects what the writer does with the queue preflight: the read of each queue
// (v2 GetQueue), once per worker process, as it first writes there.
type QueuePreflight int

const (
	// PreflightWarn (the default) logs one WARN line and counts one queuePreflight* metric per
	// finding, and creates the tasks anyway. Neither the creates nor the bundle's end wait for
	// the read: the line is logged when the read ends, and the metric is counted by the first
	// bundle of the process that ends (or meets the queue) after it.
	PreflightWarn QueuePreflight = iota
	// PreflightFail reads the queue before its first create and fails the bundle on a
	// finding, with an error naming the queue and the reason, for jobs that must not create tasks a misconfigured queue would hold back or
	// redirect. The queue is read again on the next bundle, so a job whose runner retries
	// bundles (Dataflow) goes on by itself once the queue is fixed.
	PreflightFail
	// PreflightOff skips the read.
	PreflightOff
)

// String returns the constant's name ("PreflightWarn", "PreflightFail", "PreflightOff"), or
// "QueuePreflight(<n>)" for an unknown value.
func (p QueuePreflight) String() string {
	return enumName("QueuePreflight", int(p), "PreflightWarn", "PreflightFail", "PreflightOff")
}

// queuePreflightByValue maps the values of the sink.queue-preflight option key.
var queuePreflightByValue = map[string]QueuePreflight{"warn": PreflightWarn, "fail": PreflightFail, "off": PreflightOff}

// queuePreflightValues lists those values for errors and docs.
var queuePreflightValues = []string{"warn", "fail", "off"}

// preflightReadTimeout bounds the queue read, the client's own retries of UNAVAILABLE and
// DEADLINE_EXCEEDED included.
const preflightReadTimeout = 20 * time.Second

// queueReader reads a queue's v2 configuration.
type queueReader interface {
	readQueue(ctx context.Context, queue string) (*cloudtaskspb.Queue, error)
}

// v2QueueReader reads queues through the shared Cloud Tasks client of the sink's setting.
type v2QueueReader struct{ spec clientSpec }

func (r v2QueueReader) readQueue(ctx context.Context, queue string) (*cloudtaskspb.Queue, error) {
	client, err := sharedClient(ctx, r.spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, preflightReadTimeout)
	defer cancel()
	return client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queue})
}

// preflightKey selects one queue read: a queue as one client setting sees it, under one mode
// (a warning already logged under PreflightWarn must not let a PreflightFail sink of the same
// process pass), for tasks that set what sets says (what the findings depend on).
type preflightKey struct {
	client clientSpec
	queue  string
	mode   QueuePreflight
	sets   taskSets
}

// preflightResult is what one read of a queue found for the tasks of its key, kept in
// preflights (caches.go).
type preflightResult struct {
	refused codes.Code // PERMISSION_DENIED or UNIMPLEMENTED: the check is skipped for good; OK: the queue was read
	found   []finding  // what would make the key's tasks behave otherwise
	logged  sync.Once  // the findings, or the refusal, were logged
	counted sync.Once  // and counted
}

// findingKind is one thing the preflight reports; each has its counter.
type findingKind int

const (
	findingPaused findingKind = iota
	findingDisabled
	findingURIOverride
	findingRoutingOverride
)

func (k findingKind) metric() string {
	return [...]string{MetricQueuePreflightPaused, MetricQueuePreflightDisabled, MetricQueuePreflightURIOverride, MetricQueuePreflightRoutingOverride}[k]
}

type finding struct {
	kind findingKind
	text string // why, without the queue path
}

// taskSets is what a task sets that a queue-level override can replace.
type taskSets struct {
	url     bool // an HTTP task: its URL
	routing bool // an App Engine task with routing
}

func setsOf(task *cloudtaskspb.Task) taskSets {
	return taskSets{url: task.GetHttpRequest() != nil, routing: task.GetAppEngineHttpRequest().GetAppEngineRouting() != nil}
}

// findings returns what q means for tasks that set what sets says.
func findings(q *cloudtaskspb.Queue, sets taskSets) []finding {
	var out []finding
	switch q.GetState() {
	case cloudtaskspb.Queue_PAUSED:
		out = append(out, finding{findingPaused, "is PAUSED: Cloud Tasks accepts its tasks but dispatches none until the queue is resumed, so they pile up undelivered"})
	case cloudtaskspb.Queue_DISABLED:
		out = append(out, finding{findingDisabled, "is DISABLED (a queue.yaml or queue.xml upload left it out): Cloud Tasks accepts its tasks but dispatches none until the queue is enabled again, so they pile up undelivered"})
	}
	if o := q.GetHttpTarget().GetUriOverride(); sets.url && o != nil && o.GetUriOverrideEnforceMode() != cloudtaskspb.UriOverride_IF_NOT_EXISTS {
		if parts := overriddenParts(o); len(parts) > 0 {
			text := fmt.Sprintf("has an httpTarget.uriOverride in enforce mode ALWAYS: Cloud Tasks replaces the %s of the URL of every HTTP task the sink creates there", strings.Join(parts, ", "))
			if o.Host != nil {
				text += " (tasks go to host " + o.GetHost() + ")"
			}
			out = append(out, finding{findingURIOverride, text})
		}
	}
	if o := q.GetAppEngineRoutingOverride(); sets.routing && o != nil {
		out = append(out, finding{findingRoutingOverride, fmt.Sprintf(
			"has an appEngineRoutingOverride (%s): Cloud Tasks routes every App Engine task there by it, replacing the routing the sink sets", routingText(o))})
	}
	return out
}

// routingText renders the parts a routing override sets, "service=billing version=v3", or
// "default routing" when it sets none (which still replaces the task's routing).
func routingText(r *cloudtaskspb.AppEngineRouting) string {
	var parts []string
	for _, p := range [][2]string{{"service", r.GetService()}, {"version", r.GetVersion()}, {"instance", r.GetInstance()}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"="+p[1])
		}
	}
	if len(parts) == 0 {
		return "default routing"
	}
	return strings.Join(parts, " ")
}

// overriddenParts names the URL parts a uriOverride sets. An enforce mode left unspecified
// means ALWAYS to the service.
func overriddenParts(o *cloudtaskspb.UriOverride) []string {
	var parts []string
	for _, p := range []struct {
		set  bool
		name string
	}{
		{o.Scheme != nil, "scheme"}, {o.Host != nil, "host"}, {o.Port != nil, "port"},
		{o.PathOverride != nil, "path"}, {o.QueryOverride != nil, "query"},
	} {
		if p.set {
			parts = append(parts, p.name)
		}
	}
	return parts
}

// preflightReadError is a read that failed in a way that may pass: the bundles that meet it
// go on without the check until gcpconn.FailureTTL has passed, and then the queue is read
// again.
type preflightReadError struct {
	queue   string
	code    string    // the outermost status
	logged  sync.Once // the failed read was logged
	counted sync.Once // and counted
}

// log logs the failed read.
func (e *preflightReadError) log(ctx context.Context) {
	if e.code == "NOT_FOUND" {
		warnf(ctx, "queue preflight: queue %s does not exist (NOT_FOUND), or is still being created: "+
			"creates to it fail with NOT_FOUND until it exists; create the queue (gcloud tasks queues create) or fix the queue name. "+
			"The process reads it again in %v", e.queue, gcpconn.FailureTTL)
		return
	}
	warnf(ctx, "queue preflight: reading queue %s failed with %s; not checking it for %v, then the next bundle tries again", e.queue, e.code, gcpconn.FailureTTL)
}

func (e *preflightReadError) Error() string {
	return "queue preflight: reading queue " + e.queue + " failed with " + e.code
}

// preflightFindingsError is a queue found misconfigured under PreflightFail: the bundles that
// meet it fail with its text until gcpconn.FailureTTL has passed, and then the queue is read
// again, so a job goes on by itself once the queue is fixed.
type preflightFindingsError struct {
	queue string
	found []finding
}

func (e *preflightFindingsError) Error() string {
	reasons := make([]string, len(e.found))
	for i, f := range e.found {
		reasons[i] = f.text
	}
	return fmt.Sprintf("queue preflight: queue %s %s; the bundle fails because WriterOptions.QueuePreflight is PreflightFail "+
		"(option key sink.queue-preflight=fail): fix the queue, or set PreflightWarn to create the tasks anyway", e.queue, strings.Join(reasons, "; and it "))
}

// maxPendingReads bounds the queue reads one DoFn instance has under way under PreflightWarn:
// an element whose read would make one more waits for the instance's oldest read (its own read
// has started meanwhile). An element to a queue the process has read does not wait. Measured in the multi-process
// harness's 10,000-queue case (two workers of 16 instances, each queue new; four runs each):
// waiting for every read, as before, 11,364-11,471 creates/s at 85-88 MiB RSS per worker;
// with 1, 2, 4, 8 and 32 reads under way, 11,530-11,933, 12,437-13,708, 13,653-14,226,
// 14,145-14,711 and 14,533-15,087 creates/s at 94-96, 96-97, 99-101, 103-107 and 113-116 MiB,
// the first creates waiting longer at 32 (p99 82-113 ms against 25-63). Without a bound, a
// bundle over 10,000 new queues started 10,000 reads at once: 189-233 MiB, and the first
// creates queued behind the reads on the connections (p50 107-195 ms instead of 3-13).
const maxPendingReads = 8

// queuePreflighter runs the preflight for one DoFn instance. It is not safe for concurrent use;
// the state it shares with the other instances of the process is.
type queuePreflighter struct {
	mode   QueuePreflight
	client clientSpec
	reader queueReader                                    // nil: the shared v2 client of client
	cache  *gcpconn.Cache[preflightKey, *preflightResult] // nil: the process's preflights

	// done holds what this bundle has already checked, so that each element costs a map
	// lookup once its queue is known.
	done map[doneKey]bool
	// pending holds the reads under way that this instance started, or found under way, under
	// PreflightWarn, oldest first. Each bundle's end counts what those that have ended found
	// and leaves the others to a later bundle; so does a bundle that fails before its end.
	pending []pendingRead
}

// pendingRead is a queue read under way whose findings a later bundle end counts.
type pendingRead struct {
	queue  string
	result func(context.Context) (*preflightResult, error)
}

// ended is a context that has ended: with it a read's result is a poll (gcpconn.Cache.Start).
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// poll returns the read's result if it has ended; done is false while it is under way.
func (r pendingRead) poll() (res *preflightResult, err error, done bool) {
	res, err = r.result(ended)
	if err != nil && errors.Is(err, context.Canceled) {
		return nil, nil, false // the read's own failures are preflightReadErrors, never context.Canceled
	}
	return res, err, true
}

type doneKey struct {
	queue string
	sets  taskSets
}

func newQueuePreflighter(mode QueuePreflight, client clientSpec) *queuePreflighter {
	return &queuePreflighter{mode: mode, client: client}
}

// startBundle (nil-safe) forgets what the previous bundle checked; what the process knows is
// kept in preflights. A bundle that wrote to very many queues leaves no large map behind.
func (p *queuePreflighter) startBundle() {
	if p == nil {
		return
	}
	if len(p.done) > 64 {
		p.done = nil
	} else {
		clear(p.done)
	}
	// Reads that earlier bundles left pending stay: this bundle's end counts those that have
	// ended. (A read is counted once, by whichever bundle of the process first sees it done.)
}

// check (nil-safe: a nil preflighter checks nothing) runs the preflight for the request about
// to be created, if this process has not run it for the queue yet or the result has expired.
//
// Under PreflightFail it waits for the read (one per process and queue, shared with every
// instance that waits for it) and returns an error when the queue is found misconfigured: the
// caller fails the bundle with it, whatever the failure policy, before any task goes to that
// queue. When ctx ends before the read does, it returns that error too, and the queue stays
// unchecked for the bundle: no task goes to a queue the preflight has not seen. Under PreflightWarn the tasks are
// created whatever the read finds, so it does not wait: it starts the read, or finds it under
// way; the read logs what it found as it ends, and a later bundle end counts it. A QueueFn over
// many queues would otherwise wait one queue read per new queue before that queue's first
// create, one after another.
func (p *queuePreflighter) check(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) error {
	if p == nil || p.mode == PreflightOff {
		return nil
	}
	dk := doneKey{queue: req.GetParent(), sets: setsOf(req.GetTask())}
	if p.done[dk] {
		return nil
	}
	if p.done == nil {
		p.done = map[doneKey]bool{}
	}
	key := preflightKey{client: p.client, queue: dk.queue, mode: p.mode, sets: dk.sets}
	if p.mode == PreflightWarn {
		result, ready := p.cacheOf().Start(key, p.readOf(key))
		if ready {
			res, err := result(ctx)
			reportRead(ctx, key.queue, res, err)
		} else {
			p.pending = append(p.pending, pendingRead{queue: key.queue, result: result})
			if len(p.pending) > maxPendingReads {
				p.settleOldest(ctx)
			}
		}
		p.done[dk] = true
		return nil
	}
	res, err := p.cacheOf().Get(ctx, key, p.readOf(key))
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("queue preflight: the read of queue %s did not end before the bundle's context did; under PreflightFail (option key sink.queue-preflight=fail) no task goes to a queue not yet checked: %w", key.queue, err)
	}
	var fe *preflightFindingsError
	if errors.As(err, &fe) {
		// Counted per failed bundle: each one is a bundle the queue held back.
		for _, f := range fe.found {
			beam.NewCounter(MetricsNamespace, f.kind.metric()).Inc(ctx, 1)
		}
		return err
	}
	reportRead(ctx, key.queue, res, err)
	p.done[dk] = true
	return nil
}

// finishBundle (nil-safe) counts, on the bundle's context, what the instance's reads under
// PreflightWarn found if they have ended, and leaves those still under way pending for a later
// bundle. It never waits for a read: a bundle whose creates took milliseconds must not end
// seconds later behind a slow GetQueue (up to preflightReadTimeout) only to report a warning,
// which the read logs itself as it ends.
func (p *queuePreflighter) finishBundle(ctx context.Context) {
	if p == nil {
		return
	}
	kept := p.pending[:0]
	for _, r := range p.pending {
		if res, err, done := r.poll(); done {
			reportRead(ctx, r.queue, res, err)
		} else {
			kept = append(kept, r)
		}
	}
	clear(p.pending[len(kept):]) // drops the results with the reads they hold
	p.pending = kept
}

// settleOldest waits for the oldest pending read, reports what it found and forgets it. When
// ctx ends first, it forgets the read unreported (whichever bundle sees it next counts it), so
// that the instance keeps no more than maxPendingReads however many queues follow.
func (p *queuePreflighter) settleOldest(ctx context.Context) {
	oldest := p.pending[0]
	if res, err := oldest.result(ctx); ctx.Err() == nil {
		reportRead(ctx, oldest.queue, res, err)
	}
	n := copy(p.pending, p.pending[1:])
	p.pending[n] = pendingRead{} // drops the result with the read it holds
	p.pending = p.pending[:n]
}

// reportRead logs and counts, once per read whichever instance or bundle sees it first, what a
// read that did not fail the bundle found: the queue's findings under PreflightWarn, or why
// the queue is not checked. (Under PreflightWarn the read has logged it already, as it ended:
// logRead.) An error of ctx (the bundle ended while the read was under way) reports nothing.
func reportRead(ctx context.Context, queue string, res *preflightResult, err error) {
	logRead(ctx, queue, res, err)
	var re *preflightReadError
	switch {
	case errors.As(err, &re):
		re.counted.Do(func() { beam.NewCounter(MetricsNamespace, MetricQueuePreflightSkipped).Inc(ctx, 1) })
	case err == nil:
		res.counted.Do(func() { res.count(ctx) })
	}
}

// logRead logs, once per read, what reportRead reports. The counters need a bundle's context;
// the log does not, so under PreflightWarn the read logs as it ends, on a context of its own.
func logRead(ctx context.Context, queue string, res *preflightResult, err error) {
	var re *preflightReadError
	switch {
	case errors.As(err, &re):
		re.logged.Do(func() { re.log(ctx) })
	case err == nil:
		res.logged.Do(func() { res.log(ctx, queue) })
	}
}

// cacheOf returns the cache of queue reads: the process's, unless a test gave its own.
func (p *queuePreflighter) cacheOf() *gcpconn.Cache[preflightKey, *preflightResult] {
	if p.cache == nil {
		p.cache = &preflights
	}
	return p.cache
}

// readOf returns the read of key's queue. The read serves every instance waiting for it and
// may outlive the bundle that started it: it runs on a context of its own. Under PreflightWarn
// it logs what it found as it ends, so that no bundle need wait for it; what it found is
// counted on a bundle's context.
func (p *queuePreflighter) readOf(key preflightKey) func() (*preflightResult, error) {
	reader := p.readerOf()
	return func() (*preflightResult, error) {
		ctx := context.Background()
		res, err := read(ctx, reader, key)
		if key.mode == PreflightWarn {
			logRead(ctx, key.queue, res, err)
		}
		return res, err
	}
}

// log logs what the read found under PreflightWarn, or why the queue is not checked.
func (r *preflightResult) log(ctx context.Context, queue string) {
	switch r.refused {
	case codes.PermissionDenied:
		infof(ctx, "queue preflight: not checking queue %s: the sink's identity may not read it (PERMISSION_DENIED; "+
			"grant cloudtasks.queues.get, for example with roles/cloudtasks.viewer, to have paused queues and queue overrides reported)", queue)
	case codes.Unimplemented:
		infof(ctx, "queue preflight: not checking queue %s: the server does not implement GetQueue (UNIMPLEMENTED; an emulator?)", queue)
	}
	for _, f := range r.found {
		warnf(ctx, "queue preflight: queue %s %s (set WriterOptions.QueuePreflight to PreflightFail to fail the bundle instead, or PreflightOff to skip the check)", queue, f.text)
	}
}

// count counts what log logs.
func (r *preflightResult) count(ctx context.Context) {
	if r.refused != codes.OK {
		beam.NewCounter(MetricsNamespace, MetricQueuePreflightSkipped).Inc(ctx, 1)
	}
	for _, f := range r.found {
		beam.NewCounter(MetricsNamespace, f.kind.metric()).Inc(ctx, 1)
	}
}

// read reads the queue of key once for every instance that waits for it: its findings, a
// preflightFindingsError under PreflightFail, or what a failed read means (readFailed).
func read(ctx context.Context, reader queueReader, key preflightKey) (*preflightResult, error) {
	q, err := reader.readQueue(ctx, key.queue)
	if err != nil {
		return readFailed(key.queue, err)
	}
	found := findings(q, key.sets)
	if key.mode == PreflightFail && len(found) > 0 {
		return nil, &preflightFindingsError{queue: key.queue, found: found}
	}
	return &preflightResult{found: found}, nil
}

// readFailed decides what a failed queue read means. PERMISSION_DENIED and UNIMPLEMENTED skip
// the check for good: a sink's identity often may create tasks but not read queues
// (cloudtasks.queues.get), and an emulator may lack GetQueue. Anything else skips it, whatever
// the mode, for gcpconn.FailureTTL: the read is a check, not a create, and the creates report
// their own failures; NOT_FOUND among them, since a new queue takes a while to appear. The
// client has already retried UNAVAILABLE and DEADLINE_EXCEEDED.
func readFailed(queue string, err error) (*preflightResult, error) {
	switch c := status.Code(err); c {
	case codes.PermissionDenied, codes.Unimplemented:
		return &preflightResult{refused: c}, nil
	}
	return nil, &preflightReadError{queue: queue, code: engine.OutermostCode(err)}
}
