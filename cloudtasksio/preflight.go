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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// The queue preflight. Before the first create to a queue, each worker process reads the queue
// once (v2 GetQueue) and reports what would make the tasks it creates behave otherwise than
// the sink built them: a queue that is not dispatching (PAUSED, DISABLED), a queue-level URL
// override that replaces the URL of every HTTP task, or a queue-level App Engine routing
// override that replaces the routing the sink set. WriterOptions.QueuePreflight decides
// whether a finding is a warning or fails the bundle.

// QueuePreflight selects what the writer does with the queue preflight: the read of each queue
// (v2 GetQueue), once per worker process, before its first create there.
type QueuePreflight int

const (
	// PreflightWarn (the default) logs one WARN line and counts one queuePreflight* metric per
	// finding, and creates the tasks anyway.
	PreflightWarn QueuePreflight = iota
	// PreflightFail fails the bundle on a finding, with an error naming the queue and the
	// reason, for jobs that must not create tasks a misconfigured queue would hold back or
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
	client, err := sharedClient(r.spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, preflightReadTimeout)
	defer cancel()
	return client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queue})
}

// preflightKey selects one preflight state: a queue as one client setting sees it, under one
// mode (a warning already logged under PreflightWarn must not let a PreflightFail sink of the
// same process pass).
type preflightKey struct {
	client clientSpec
	queue  string
	mode   QueuePreflight
}

// preflightState is what a process knows about one queue. Its lock is held while the queue is
// read and its findings reported, so concurrent DoFn instances wait for one read instead of
// all making it, and a slow read holds up only the callers of its own queue.
type preflightState struct {
	mu       sync.Mutex
	read     bool                 // the queue was read, or its read skipped for good
	skipped  bool                 // the read was refused for good (PERMISSION_DENIED, UNIMPLEMENTED)
	queue    *cloudtaskspb.Queue  // what the read returned
	reported map[findingKind]bool // findings already logged and counted
	// missingReported is set once a read answered NOT_FOUND was logged: the process says once
	// that the queue does not exist, however many bundles read it again.
	missingReported bool
}

// preflights holds one state per key for the life of the worker process, like the shared
// clients and the exactly-once retention checks.
var preflights gcpconn.Cache[preflightKey, *preflightState]

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

// errPreflightSkippedForBundle marks a read that failed in a way that may pass: the bundle goes
// on without the check, and the next bundle reads again.
var errPreflightSkippedForBundle = errors.New("preflight skipped for this bundle")

// queuePreflighter runs the preflight for one DoFn instance. It is not safe for concurrent use;
// the state it shares with the other instances of the process is.
type queuePreflighter struct {
	mode   QueuePreflight
	client clientSpec
	reader queueReader // nil: the shared v2 client of client

	// done holds what this bundle has already checked, so that each element costs a map
	// lookup once its queue is known.
	done map[doneKey]bool
}

type doneKey struct {
	queue string
	sets  taskSets
}

func newQueuePreflighter(mode QueuePreflight, client clientSpec) *queuePreflighter {
	return &queuePreflighter{mode: mode, client: client}
}

// startBundle (nil-safe) forgets what the previous bundle checked: a read skipped for that bundle is tried
// again. What the process knows for good is kept.
func (p *queuePreflighter) startBundle() {
	if p != nil {
		clear(p.done)
	}
}

// check (nil-safe: a nil preflighter checks nothing) runs the preflight for the request about to be created, if this process has not run it
// for the queue yet. It returns an error only under PreflightFail, when the queue is found
// misconfigured: the caller fails the bundle with it, whatever the failure policy.
func (p *queuePreflighter) check(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) error {
	if p == nil || p.mode == PreflightOff {
		return nil
	}
	dk := doneKey{queue: req.GetParent(), sets: setsOf(req.GetTask())}
	if p.done[dk] {
		return nil
	}
	if p.reader == nil {
		p.reader = v2QueueReader{spec: p.client}
	}
	key := preflightKey{client: p.client, queue: dk.queue, mode: p.mode}
	st, _ := preflights.Get(key, func() (*preflightState, error) { return &preflightState{}, nil })
	st.mu.Lock()
	err := p.run(ctx, st, dk)
	st.mu.Unlock()
	if err != nil && !errors.Is(err, errPreflightSkippedForBundle) {
		return err
	}
	if p.done == nil {
		p.done = map[doneKey]bool{}
	}
	p.done[dk] = true
	return nil
}

// run reads the queue unless the process has, then reports the findings not reported yet.
func (p *queuePreflighter) run(ctx context.Context, st *preflightState, dk doneKey) error {
	queue := dk.queue
	if !st.read {
		q, err := p.reader.readQueue(ctx, queue)
		if err != nil {
			return p.readFailed(ctx, st, queue, err)
		}
		st.read, st.queue = true, q
	}
	if st.skipped {
		return nil
	}
	found := findings(st.queue, dk.sets)
	if p.mode == PreflightFail {
		if len(found) == 0 {
			return nil
		}
		// Nothing is kept: the next bundle reads the queue again, and passes once it is fixed.
		st.read, st.queue = false, nil
		reasons := make([]string, len(found))
		for i, f := range found {
			beam.NewCounter(MetricsNamespace, f.kind.metric()).Inc(ctx, 1)
			reasons[i] = f.text
		}
		return fmt.Errorf("cloudtasksio: queue preflight: queue %s %s; the bundle fails because WriterOptions.QueuePreflight is PreflightFail "+
			"(option key sink.queue-preflight=fail): fix the queue, or set PreflightWarn to create the tasks anyway", queue, strings.Join(reasons, "; and it "))
	}
	for _, f := range found {
		if st.reported[f.kind] {
			continue
		}
		if st.reported == nil {
			st.reported = map[findingKind]bool{}
		}
		st.reported[f.kind] = true
		beam.NewCounter(MetricsNamespace, f.kind.metric()).Inc(ctx, 1)
		log.Warnf(ctx, "cloudtasksio: queue preflight: queue %s %s (set WriterOptions.QueuePreflight to PreflightFail to fail the bundle instead, or PreflightOff to skip the check)", queue, f.text)
	}
	return nil
}

// readFailed decides what a failed queue read means. PERMISSION_DENIED and UNIMPLEMENTED skip
// the check for good: a sink's identity often may create tasks but not read queues
// (cloudtasks.queues.get), and an emulator may lack GetQueue. NOT_FOUND says once per process
// that the queue does not exist and skips the check for this bundle. Anything else skips it for this
// bundle only, whatever the mode: the read is a check, not a create, and the creates report
// their own failures. The client has already retried UNAVAILABLE and DEADLINE_EXCEEDED.
func (p *queuePreflighter) readFailed(ctx context.Context, st *preflightState, queue string, err error) error {
	beam.NewCounter(MetricsNamespace, MetricQueuePreflightSkipped).Inc(ctx, 1)
	code := engine.OutermostCode(err)
	switch status.Code(err) {
	case codes.PermissionDenied:
		st.read, st.skipped = true, true
		log.Infof(ctx, "cloudtasksio: queue preflight: not checking queue %s: the sink's identity may not read it (PERMISSION_DENIED; "+
			"grant cloudtasks.queues.get, for example with roles/cloudtasks.viewer, to have paused queues and queue overrides reported)", queue)
		return nil
	case codes.Unimplemented:
		st.read, st.skipped = true, true
		log.Infof(ctx, "cloudtasksio: queue preflight: not checking queue %s: the server does not implement GetQueue (UNIMPLEMENTED; an emulator?)", queue)
		return nil
	case codes.NotFound:
		// The queue may be being created (a new queue takes a while to appear), so the next
		// bundle reads it again; the process says so once, not once per bundle.
		if !st.missingReported {
			st.missingReported = true
			log.Warnf(ctx, "cloudtasksio: queue preflight: queue %s does not exist (NOT_FOUND), or is still being created: "+
				"creates to it fail with NOT_FOUND until it exists; create the queue (gcloud tasks queues create) or fix the queue name. "+
				"Later bundles read it again and say nothing more", queue)
		}
		return errPreflightSkippedForBundle
	}
	log.Warnf(ctx, "cloudtasksio: queue preflight: reading queue %s failed with %s; not checking it in this bundle, the next bundle tries again", queue, code)
	return errPreflightSkippedForBundle
}
