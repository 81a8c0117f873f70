package cloudtasksio

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, beam.X, func(beam.EventTime, deadletter.FailedElement), error](&writeFn{})
	register.Emitter2[beam.EventTime, deadletter.FailedElement]()
}

// writeFn is the at-least-once write DoFn: a thin adapter that feeds elements to the writer
// engine and turns its outcomes into metrics, dead letters and bundle errors.
type writeFn struct {
	Spec *sinkSpec

	createBase[*pendingTask]
	failureRouter
	builders elementBuilders
	queueFn  reflectx.Func1x2
	// emitCreated emits a created task (writeResultFn); nil in plain Write, which builds none.
	emitCreated func(beam.EventTime, CreatedTask)
	queueIsolation
}

// pendingTask is what the DoFn remembers about a create while the engine owns it.
type pendingTask struct {
	eventTime beam.EventTime
	queue     string
	bytes     int
	elem      any    // the input element, kept under DeadLetter only, for the dead letter
	key       string // the key the task was named from, kept only when created tasks are emitted
}

// The DoFn methods Beam calls are the package's boundary on the worker: each returns its error
// through withPrefix (boundary.go), and nothing inside them adds the prefix.

// Setup checks the spec the worker decoded (sinkSpec.checkOnWorker) and prepares the DoFn.
func (f *writeFn) Setup() error { return withPrefix(f.setupWorker()) }

func (f *writeFn) StartBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.startBundle(ctx, emit))
}

func (f *writeFn) ProcessElement(ctx context.Context, et beam.EventTime, elem beam.X, emit func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.processElement(ctx, et, elem, emit))
}

func (f *writeFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.finishBundle(ctx, emit))
}

func (f *writeFn) setupWorker() error {
	if err := f.Spec.checkOnWorker(AtLeastOnce); err != nil {
		return err
	}
	f.setup(f.Spec)
	f.builders.spec = f.Spec
	if f.Spec.QueueFn != nil {
		f.queueFn = reflectx.ToFunc1x2(f.Spec.QueueFn.Fn)
	}
	f.setupElements(f.Spec.OnFailure, f.Spec.Elem)
	return nil
}

func (f *writeFn) startBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	client, err := sharedClient(ctx, f.Spec.client)
	if err != nil {
		return err
	}
	f.failureRouter.startBundle(ctx, emit) // sums up the drops of a bundle that failed in ProcessElement
	f.summarize(ctx, "Config.OnDestinationFailure")
	f.start(clientCreator(client), engineOptions(f.Spec.Writer), f)
	return nil
}

func (f *writeFn) processElement(ctx context.Context, et beam.EventTime, elem beam.X, emit func(beam.EventTime, deadletter.FailedElement)) error {
	f.emit = emit
	if err := f.bundleErr(); err != nil {
		return err
	}
	queue, err := f.resolveQueue(elem)
	if err != nil {
		logCut(ctx, "the QueueFn's error", err)
		return f.failBundle(ctx, err)
	}
	req, bytes, key, err := f.request(elem, queue)
	if err != nil {
		if err := f.route(ctx, et, queue.Path(), elem, err); err != nil {
			return f.failBundle(ctx, err)
		}
		return nil
	}
	if req == nil {
		f.metrics.recordsSkipped.Inc(ctx, 1)
		return nil
	}
	if done, err := f.failFast(ctx, et, elem, req); done {
		if err != nil {
			return f.failBundle(ctx, err)
		}
		return nil
	}
	tag := &pendingTask{eventTime: et, queue: req.Parent, bytes: bytes}
	if f.Spec.OnFailure == DeadLetter {
		tag.elem = elem
	}
	if f.emitCreated != nil {
		tag.key = key
	}
	return f.submit(ctx, &engine.Request[*pendingTask]{Create: req, Tag: tag})
}

func (f *writeFn) finishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	f.emit = emit
	err := f.finish(ctx)
	f.summarizeDrops(ctx)
	f.summarize(ctx, "Config.OnDestinationFailure")
	return err
}

// resolveQueue returns the element's queue (resolveQueue).
func (f *writeFn) resolveQueue(elem any) (Queue, error) {
	return resolveQueue(f.queueFn, f.Spec.Queue, "Config.QueueFn", elem)
}

// resolveQueue returns the queue of elem: what queueFn, the user's function named field,
// returns for it, or fixed without one. A failing or invalid QueueFn fails the bundle: it fails
// every element alike, so routing it to a dropping policy would hide it.
func resolveQueue(queueFn reflectx.Func1x2, fixed Queue, field string, elem any) (Queue, error) {
	if queueFn == nil {
		return fixed, nil
	}
	out, err := call1x2(queueFn, elem)
	if err != nil {
		return Queue{}, fmt.Errorf("%s failed: %w", field, boundedError{err})
	}
	q := out.(Queue)
	if err := q.validate(); err != nil {
		return Queue{}, fmt.Errorf("%s returned an invalid queue: %w", field, err)
	}
	return q, nil
}

// request builds the create request for elem in queue, nil when the element is skipped, with
// its wire size and the key the task was named from (empty for an unnamed task).
func (f *writeFn) request(elem any, queue Queue) (*cloudtaskspb.CreateTaskRequest, int, string, error) {
	b, err := f.builders.forElement(elem)
	if err != nil {
		return nil, 0, "", err
	}
	task, md, err := b.build(elem)
	if err != nil || task == nil {
		return nil, 0, "", err
	}
	key, named, err := b.key(elem, md, task)
	if err != nil {
		return nil, 0, "", err
	}
	if named {
		task.Name = taskName(queue, key)
	}
	size := proto.Size(task)
	if err := checkTaskSize(queue, task, size); err != nil {
		return nil, 0, "", err
	}
	return &cloudtaskspb.CreateTaskRequest{Parent: queue.Path(), Task: task}, size, key, nil
}

// The engine's observer (AttemptFailed and AttemptLatency are createBase's). The engine calls
// these only from inside Submit and Flush, on the bundle's goroutine, so emitting and updating
// metrics here is safe.

func (f *writeFn) Created(ctx context.Context, r *engine.Request[*pendingTask], deduplicated bool) {
	f.metrics.created(ctx, r.Tag.queue, r.Tag.bytes, r.Attempts(), deduplicated)
	if f.emitCreated != nil {
		f.emitCreated(r.Tag.eventTime, createdTask(r.Create, r.Returned(), r.Tag.key, deduplicated))
	}
}

// Rejected applies the failure policy; under FailBundle its error stops the engine, so nothing
// more of the bundle is sent.
//
// A terminal failure is not counted in at-least-once mode (writeFn is no
// engine.FailureObserver): numRecordsSendErrors counts the elements that reached the failure
// policy, and a terminal failure fails the bundle whatever the policy. At-least-once requests
// carry no deadline, so writeFn is no engine.Expirer either.
func (f *writeFn) Rejected(ctx context.Context, r *engine.Request[*pendingTask], err error) error {
	p := r.Tag
	code := CodeInvalidArgument
	if errors.Is(err, engine.ErrTaskTooLarge) {
		code = CodeTaskTooLarge
	}
	return f.applyPolicy(ctx, p.eventTime, p.queue, &elementFailure{code: code, task: r.Create.GetTask(), elem: p.elem, err: err})
}
