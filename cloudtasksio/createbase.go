package cloudtasksio

import (
	"context"
	"errors"
	"math"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/googleapis/gax-go/v2"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
)

// createBase is the engine lifecycle that the sink's DoFns embed, the at-least-once writeFn,
// the exactly-once stagedCreateFn and Delete's deleteFn: the sink's metrics, a fresh engine per
// bundle, the queue preflight of each queue on its first create (not for deletes), the
// process-wide adaptive concurrency limits, the bundle's first failure, and the gauges after
// every call into the engine. T is the tag each DoFn keeps with a request while the engine
// owns it.
//
// Beam serializes a DoFn as the JSON of its exported fields, embedded structs included: every
// field here is runtime state, unexported, rebuilt by setup and start on the worker.
type createBase[T any] struct {
	metrics   *sinkMetrics
	engine    *engine.Engine[T]
	preflight *queuePreflighter // reads each queue once per process (before its first create under PreflightFail)
	health    *queueHealthWatch // reads the queues again every QueueHealthInterval; nil: off
	adaptive  *engine.Adaptive  // the process-wide limits of the DoFn's client setting; nil: off
	queues    map[string]bool   // the queues the bundle wrote to, for the adaptive limit gauge
	throttled bool              // the bundle's throttled time has been reported
}

// setup creates the metrics, the preflight and the adaptive limits of spec, which the DoFn has
// checked (sinkSpec.checkOnWorker): its writer options are resolved.
func (b *createBase[T]) setup(spec *sinkSpec) {
	b.setupWith(spec.Writer, spec.client, false)
	b.preflight = newQueuePreflighter(spec.Writer.QueuePreflight, spec.client)
	b.health = newQueueHealthWatch(spec.Writer, spec.client)
	b.preflight.reader = b.health.preflightReader() // nil: the preflight's own v2 read
}

// setupWith creates the metrics and the adaptive limits of a DoFn sending through client with
// w, resolved; deletes selects the limits of deletes, which are not those of creates. It reads
// no queue: the preflight is setup's, for creates only.
func (b *createBase[T]) setupWith(w WriterOptions, client clientSpec, deletes bool) {
	b.metrics = newSinkMetrics(w.PerDestinationMetrics)
	b.adaptive = adaptiveState(w, client, deletes)
}

// start begins a bundle with a fresh engine sending through c and reporting to obs: nothing of
// a failed bundle can leak into the next one, except what adaptive concurrency learnt about
// the queues, which every bundle of the process shares. Whatever the previous bundle's engine
// still has in flight is cancelled.
func (b *createBase[T]) start(c engine.Creator, o engine.Options, obs engine.Observer[T]) {
	if b.engine != nil {
		b.engine.Fail(errBundleAbandoned)
	}
	o.Adaptive = b.adaptive
	b.engine = engine.New(c, o, obs)
	b.throttled = false
	b.preflight.startBundle()
	b.health.startBundle()
	if len(b.queues) > 64 {
		b.queues = nil // a bundle over many queues leaves no large map behind for the DoFn's life
	} else {
		clear(b.queues)
	}
}

// bundleErr returns the bundle's first failure, if any.
func (b *createBase[T]) bundleErr() error { return b.engine.Err() }

// submit hands r to the bundle's engine and returns the bundle's failure, if any.
func (b *createBase[T]) submit(ctx context.Context, r *engine.Request[T]) error {
	if err := b.preflight.check(ctx, r.Create); err != nil {
		return b.failBundle(ctx, err)
	}
	if err := b.health.check(ctx, r.Create); err != nil {
		return b.failBundle(ctx, err)
	}
	if b.adaptive != nil {
		if b.queues == nil {
			b.queues = map[string]bool{}
		}
		b.queues[r.Queue()] = true
	}
	err := b.engine.Submit(ctx, r)
	b.metrics.gauges(ctx, b.engine)
	if err != nil {
		return b.failBundle(ctx, err)
	}
	return nil
}

// finish waits for the bundle's requests and returns the bundle's failure, if any.
func (b *createBase[T]) finish(ctx context.Context) error {
	err := b.engine.Flush(ctx)
	b.preflight.finishBundle(ctx)
	b.health.endBundle(ctx)
	b.metrics.gauges(ctx, b.engine)
	b.adaptiveGauge(ctx)
	b.reportThrottled(ctx)
	if err != nil {
		return b.failBundle(ctx, err)
	}
	return nil
}

// failBundle fails the bundle with err unless it has failed already, and returns its first
// failure. The engine cancels the creates in flight, and failBundle waits for them to return,
// so a failed bundle leaves nothing in flight: the runner replays its elements, and the next
// bundle starts with the whole MaxInFlightTasks.
func (b *createBase[T]) failBundle(ctx context.Context, err error) error {
	b.engine.Fail(err)
	_ = b.engine.Flush(ctx) // returns the first failure once the cancelled creates are back
	b.health.endBundle(ctx)
	b.metrics.gauges(ctx, b.engine)
	b.adaptiveGauge(ctx)
	b.reportThrottled(ctx)
	return b.engine.Err()
}

// reportThrottled adds the time the bundle's engine held creates back under a quota to the
// throttling counter that Dataflow reads (MetricThrottlingMsecs), once per bundle, when it ends
// or fails.
func (b *createBase[T]) reportThrottled(ctx context.Context) {
	if b.throttled {
		return
	}
	b.throttled = true
	if ms := b.engine.Throttled().Milliseconds(); ms > 0 {
		b.metrics.throttled.Inc(ctx, ms)
	}
}

// adaptiveGauge sets the adaptive concurrency limit gauge to the lowest limit among the queues
// the bundle wrote to, the one throttled hardest. It runs when a bundle ends, not per element:
// a bundle may write to many queues.
func (b *createBase[T]) adaptiveGauge(ctx context.Context) {
	if b.adaptive == nil || len(b.queues) == 0 {
		return
	}
	lowest := math.Inf(1)
	for q := range b.queues {
		if l := b.adaptive.Queue(q); l.Cap > 0 { // Cap 0: no create to q got as far as the limit
			lowest = min(lowest, l.Limit)
		}
	}
	if !math.IsInf(lowest, 1) {
		b.metrics.adaptiveLimit.Set(ctx, int64(lowest))
	}
}

// AttemptFailed counts every failed attempt by its outermost status, for the engine's
// Observer; both create DoFns count them alike.
func (b *createBase[T]) AttemptFailed(ctx context.Context, _ *engine.Request[T], code string) {
	b.metrics.attemptFailed(ctx, code)
}

// AttemptLatency records how long each create attempt's call took, for the engine's
// LatencyObserver; both create DoFns record them alike.
func (b *createBase[T]) AttemptLatency(ctx context.Context, _ *engine.Request[T], latency time.Duration) {
	b.metrics.attemptLatency.Update(ctx, latency.Milliseconds())
}

// errBundleAbandoned ends the creates of a bundle that was neither finished nor failed through
// the DoFn (the runner gave up on it), when the DoFn instance starts its next bundle.
var errBundleAbandoned = errors.New("the bundle was abandoned before it finished")

// clientCreator adapts the Cloud Tasks client to the engine.
func clientCreator(c interface {
	CreateTask(context.Context, *cloudtaskspb.CreateTaskRequest, ...gax.CallOption) (*cloudtaskspb.Task, error)
}) engine.Creator {
	return engine.CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		return c.CreateTask(ctx, req)
	})
}

// taskDeleter is the part of the Cloud Tasks client that deletes a task.
type taskDeleter interface {
	DeleteTask(context.Context, *cloudtaskspb.DeleteTaskRequest, ...gax.CallOption) error
}

// clientDeleter adapts the Cloud Tasks client to the engine for deletes: an engine.Creator
// that is also an engine.Deleter. Delete's DoFn submits deletes only, so its CreateTask is
// never called, and refuses if it is.
type clientDeleter struct{ c taskDeleter }

func (d clientDeleter) CreateTask(context.Context, *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	return nil, errors.New("a Delete's engine does not create tasks")
}

// DeleteTask sends one DeleteTask call. The client's own retries of it (UNAVAILABLE and
// DEADLINE_EXCEEDED, for up to 20 seconds) are turned off: the engine retries a delete as it
// retries a create, on WriterOptions' budgets, and a retry inside the call would hold its slot
// and escape those budgets.
func (d clientDeleter) DeleteTask(ctx context.Context, req *cloudtaskspb.DeleteTaskRequest) error {
	return d.c.DeleteTask(ctx, req, gax.WithRetry(nil))
}

func engineOptions(o WriterOptions) engine.Options {
	return engine.Options{
		MaxInFlight:    o.MaxInFlightTasks,
		StartRate:      o.AdaptiveStartRate,
		AttemptTimeout: o.AttemptTimeout,
		Transient:      engine.Budget{Initial: o.RecoveryInitialBackoff, Max: o.RecoveryMaxBackoff, MaxAttempts: o.RecoveryMaxAttempts},
		NotFound:       engine.Budget{Initial: o.NotFoundRecoveryInitialBackoff, Max: o.NotFoundRecoveryMaxBackoff, MaxAttempts: o.NotFoundRecoveryMaxAttempts},
	}
}
