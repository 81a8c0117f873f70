package cloudtasksio

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Per-queue failure isolation. With a QueueFn, one queue that is missing, deleted or forbidden
// fails every bundle that holds one of its elements, so one bad tenant stalls all the others.
// Under DestinationIsolate such a failure is that queue's elements' own: they go to the
// failure policy with the queue's status as their code, the other queues' tasks are created,
// and the worker process remembers the queue's failure for a short while, so that its next
// elements fail at once instead of each spending its own attempts.

// DestinationFailurePolicy decides what a failure of one queue does, as opposed to a failure of
// one task: NOT_FOUND once its retry budget (WriterOptions.NotFoundRecoveryMaxAttempts) is
// spent (the queue does not exist, was deleted, or is still being created), PERMISSION_DENIED
// (the sink's identity may not create tasks there) or FAILED_PRECONDITION (the queue cannot take
// tasks as it is). Any other failure is decided as without the policy.
type DestinationFailurePolicy int

const (
	// DestinationFailBundle fails the bundle, as any failure that is not one element's does
	// (the default): the runner retries the bundle or fails the job, whatever queues its other
	// elements were for.
	DestinationFailBundle DestinationFailurePolicy = iota
	// DestinationIsolate sends each element of the failed queue to the failure policy
	// (Config.OnFailure, which must then be LogAndDrop or DeadLetter) with the status as its
	// code (CodeNotFound, CodePermissionDenied, CodeFailedPrecondition), and the bundle goes
	// on with the other queues' elements. The worker process then remembers the queue's
	// failure for 30 seconds (gcpconn.FailureTTL), for every DoFn instance of the same client
	// setting: an element for that queue goes to the failure policy at once, without a create,
	// its error saying so. The elements of that queue already sent when the failure is met
	// finish their own attempts and come to the same end. After the 30 seconds the next
	// element tries again, so a queue created meanwhile is written to. At most 10,000 queues
	// are remembered (the least recently failed is forgotten first). Requires at-least-once
	// delivery (in exactly-once mode every failure fails the bundle).
	DestinationIsolate
)

// String returns the constant's name ("DestinationFailBundle", "DestinationIsolate"), or
// "DestinationFailurePolicy(<n>)" for an unknown value.
func (p DestinationFailurePolicy) String() string {
	return enumName("DestinationFailurePolicy", int(p), "DestinationFailBundle", "DestinationIsolate")
}

// destinationFailureByValue maps the values of the sink.destination-failure option key.
var destinationFailureByValue = map[string]DestinationFailurePolicy{"fail": DestinationFailBundle, "isolate": DestinationIsolate}

// checkDestinationPolicy is the rule of OnDestinationFailure that ConfigFromOptions cannot
// apply, since OnFailure has no option key: TryWrite applies it (compile).
func (c Config) checkDestinationPolicy() error {
	if c.OnDestinationFailure == DestinationIsolate && c.OnFailure == FailBundle {
		return errFields([]string{"OnDestinationFailure", "OnFailure"}, func(n namer) string {
			return n("OnDestinationFailure") + " DestinationIsolate needs " + n("OnFailure") + " LogAndDrop or DeadLetter: " +
				"under FailBundle the elements of a failed queue would fail the bundle all the same"
		})
	}
	return nil
}

// destinationFailureTTL is how long a worker process remembers a failed queue: as long as it
// remembers any other failed read or check (caches.go).
const destinationFailureTTL = gcpconn.FailureTTL

// destinationKey is a queue as one client setting sees it: what is forbidden to one identity
// may be allowed to another.
type destinationKey struct {
	client clientSpec
	queue  string
}

// destinationFailure is a failure of a queue a worker process met.
type destinationFailure struct {
	key  destinationKey
	code string    // CodeNotFound, CodePermissionDenied or CodeFailedPrecondition
	text string    // the failure's bounded error text
	at   time.Time // when it was met
}

// failedDestinations remembers the queues whose failure a worker process met under
// DestinationIsolate, each for TTL after its last failure, at most MaxEntries of them (the
// least recently failed is forgotten first). Safe for concurrent use.
type failedDestinations struct {
	TTL        time.Duration
	MaxEntries int

	mu      sync.Mutex
	entries map[destinationKey]*list.Element // of *destinationFailure
	order   list.List                        // least recently failed first
}

// remember records f, replacing what was known of its queue, and reports whether the queue
// was not remembered already.
func (d *failedDestinations) remember(f destinationFailure) (isNew bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(f.at)
	if el, ok := d.entries[f.key]; ok {
		*el.Value.(*destinationFailure) = f
		d.order.MoveToBack(el)
		return false
	}
	if d.entries == nil {
		d.entries = map[destinationKey]*list.Element{}
	}
	d.entries[f.key] = d.order.PushBack(&f)
	for d.MaxEntries > 0 && len(d.entries) > d.MaxEntries {
		d.removeLocked(d.order.Front())
	}
	return true
}

// lookup returns the remembered failure of key's queue, if it is younger than TTL at now.
func (d *failedDestinations) lookup(key destinationKey, now time.Time) (destinationFailure, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expireLocked(now)
	if el, ok := d.entries[key]; ok {
		return *el.Value.(*destinationFailure), true
	}
	return destinationFailure{}, false
}

// Len returns the number of queues remembered.
func (d *failedDestinations) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.entries)
}

// expireLocked forgets the failures older than TTL at now, oldest first.
func (d *failedDestinations) expireLocked(now time.Time) {
	for el := d.order.Front(); el != nil && now.Sub(el.Value.(*destinationFailure).at) >= d.TTL; el = d.order.Front() {
		d.removeLocked(el)
	}
}

func (d *failedDestinations) removeLocked(el *list.Element) {
	delete(d.entries, el.Value.(*destinationFailure).key)
	d.order.Remove(el)
}

// queueIsolation is the part of DestinationIsolate that Write's and Delete's DoFns share: the
// memory of failed queues and the lines that report them. field names the DoFn's
// OnDestinationFailure ("Config.OnDestinationFailure") in what it logs and in its errors.
type queueIsolation struct {
	// destinations remembers failed queues under DestinationIsolate: nil is the process's
	// (destinationFailures), a test may set its own.
	destinations *failedDestinations
	isolated     bundleLines // queues this bundle found failed under DestinationIsolate
}

// destinationsOf returns the memory of failed queues the DoFn uses: the process's, unless a
// test gave its own.
func (q *queueIsolation) destinationsOf() *failedDestinations {
	if q.destinations == nil {
		q.destinations = &destinationFailures
	}
	return q.destinations
}

// failed remembers that queue failed with code, and logs the first failures of the bundle.
func (q *queueIsolation) failed(ctx context.Context, client clientSpec, queue, code string, err error, field string, policy FailurePolicy) {
	known := destinationFailure{key: destinationKey{client: client, queue: queue}, code: code, text: err.Error(), at: time.Now()}
	if q.destinationsOf().remember(known) && q.isolated.add() {
		warnf(ctx, "queue %s failed with %s: under %s DestinationIsolate its elements go to the failure policy (%v), "+
			"and this worker process sends it nothing for %v; numRecordsSendErrors and %s count them", queue, code, field, policy,
			q.destinationsOf().TTL, MetricQueueFailures)
	}
}

// knownFailure returns the code of queue's failure the process remembers and the error of an
// element for it not sent; ok is false when it remembers none.
func (q *queueIsolation) knownFailure(client clientSpec, queue, field string) (code string, err error, ok bool) {
	now := time.Now()
	known, ok := q.destinationsOf().lookup(destinationKey{client: client, queue: queue}, now)
	if !ok {
		return "", nil, false
	}
	return known.code, fmt.Errorf("not sent: this worker process met a failure of queue %s %v ago and sends it nothing for %v after one "+
		"(%s DestinationIsolate); the failure: %s",
		queue, now.Sub(known.at).Round(time.Millisecond), q.destinationsOf().TTL, field, known.text), true
}

// summarize writes the one line that covers the queues the bundle found failed beyond the
// first maxLinesPerBundle, and starts the count again.
func (q *queueIsolation) summarize(ctx context.Context, field string) {
	q.isolated.summarize(ctx, "%d more queues failed without a line each, %d in this bundle; their elements went to the failure policy "+
		"("+field+" DestinationIsolate), and "+MetricQueueFailures+" counts every one")
}

// DestinationFailed is the engine's DestinationObserver. Under DestinationIsolate the element
// goes to the failure policy with the queue's code and the process remembers the failure;
// otherwise the failure fails the bundle, as it did before the policy existed.
func (f *writeFn) DestinationFailed(ctx context.Context, r *engine.Request[*pendingTask], code string, err error) error {
	if f.Spec.OnDestinationFailure != DestinationIsolate {
		return err
	}
	p := r.Tag
	f.failed(ctx, f.Spec.client, p.queue, code, err, "Config.OnDestinationFailure", f.Spec.OnFailure)
	return f.isolate(ctx, p.eventTime, p.queue, r.Create.GetTask(), p.elem, code, err)
}

// failFast sends an element for a queue whose failure the process remembers to the failure
// policy without creating its task, and reports whether it did. Without DestinationIsolate it
// does nothing.
func (f *writeFn) failFast(ctx context.Context, et beam.EventTime, elem any, req *cloudtaskspb.CreateTaskRequest) (bool, error) {
	if f.Spec.OnDestinationFailure != DestinationIsolate {
		return false, nil
	}
	code, err, ok := f.knownFailure(f.Spec.client, req.GetParent(), "Config.OnDestinationFailure")
	if !ok {
		return false, nil
	}
	return true, f.isolate(ctx, et, req.GetParent(), req.GetTask(), elem, code, err)
}

// isolate hands an element of a failed queue to the failure policy, and counts it.
func (f *writeFn) isolate(ctx context.Context, et beam.EventTime, queue string, task *cloudtaskspb.Task, elem any, code string, err error) error {
	f.metrics.queueFailed(ctx, queue)
	return f.applyPolicy(ctx, et, queue, &elementFailure{code: code, task: task, elem: elem, err: err})
}
