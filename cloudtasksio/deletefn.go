package cloudtasksio

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

func init() {
	// The emitter is registered with writeFn.
	register.DoFn4x1[context.Context, beam.EventTime, beam.X, func(beam.EventTime, deadletter.FailedElement), error](&deleteFn{})
}

// deleteFn is Delete's DoFn: a thin adapter, as writeFn is for creates, that feeds one delete
// per element to the writer engine and turns its outcomes into metrics, dead letters and bundle
// errors. It shares writeFn's engine lifecycle (createBase) and failure policy (failureRouter).
type deleteFn struct {
	Spec *deleteSpec

	createBase[*pendingDelete]
	failureRouter
	queueFn  reflectx.Func1x2   // nil: the fixed queue
	taskIDFn reflectx.Func1x2   // nil: the task-id field or the element is the key
	schema   *bodyformat.Schema // without a TaskIDFn, the element type with a task-id field

	queueIsolation

	// queues checks, before the bundle ends, that the queues of goneIn exist: the queues
	// whose deletes this bundle found gone (queueexists.go). Under DestinationIsolate their
	// gone deletes wait in goneIn to be counted, or isolated if the queue is missing; otherwise
	// they are counted at once and goneIn holds only the queues.
	queues *queuePreflighter
	goneIn map[string][]*engine.Request[*pendingDelete]
}

// deleteDestinationField names Delete's destination policy in its logs and errors.
const deleteDestinationField = "DeleteConfig.OnDestinationFailure"

// pendingDelete is what the DoFn remembers about a delete while the engine owns it.
type pendingDelete struct {
	eventTime beam.EventTime
	queue     string
	elem      any // the input element, kept under DeadLetter only, for the dead letter
}

// The DoFn methods Beam calls return their errors through withPrefix, as writeFn's do.

// Setup checks the spec the worker decoded (deleteSpec.checkOnWorker) and prepares the DoFn.
func (f *deleteFn) Setup() error { return withPrefix(f.setupWorker()) }

func (f *deleteFn) StartBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.startBundle(ctx, emit))
}

func (f *deleteFn) ProcessElement(ctx context.Context, et beam.EventTime, elem beam.X, emit func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.processElement(ctx, et, elem, emit))
}

func (f *deleteFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.finishBundle(ctx, emit))
}

func (f *deleteFn) setupWorker() error {
	if err := f.Spec.checkOnWorker(); err != nil {
		return err
	}
	f.setupWith(f.Spec.Writer, f.Spec.client, true)
	if f.Spec.QueueFn != nil {
		f.queueFn = reflectx.ToFunc1x2(f.Spec.QueueFn.Fn)
	}
	if f.Spec.TaskIDFn != nil {
		f.taskIDFn = reflectx.ToFunc1x2(f.Spec.TaskIDFn.Fn)
	} else {
		f.schema, _ = taskIDSchema(f.Spec.Elem.T) // checkOnWorker has accepted the type
	}
	f.setupElements(f.Spec.OnFailure, f.Spec.Elem)
	f.queues = newQueuePreflighter(preflightExists, f.Spec.client)
	return nil
}

func (f *deleteFn) startBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	client, err := sharedClient(ctx, f.Spec.client)
	if err != nil {
		return err
	}
	f.failureRouter.startBundle(ctx, emit)
	clear(f.goneIn)
	f.start(clientDeleter{client}, engineOptions(f.Spec.Writer), f)
	return nil
}

// processElement names the element's task and hands its delete to the engine, which holds it
// while MaxInFlightTasks requests are outstanding.
func (f *deleteFn) processElement(ctx context.Context, et beam.EventTime, elem beam.X, emit func(beam.EventTime, deadletter.FailedElement)) error {
	f.emit = emit
	if err := f.bundleErr(); err != nil {
		return err
	}
	queue, err := resolveQueue(f.queueFn, f.Spec.Queue, "DeleteConfig.QueueFn", elem)
	if err != nil {
		logCut(ctx, "the QueueFn's error", err)
		return f.failBundle(ctx, err)
	}
	key, err := f.key(elem)
	if err != nil {
		if err := f.applyPolicy(ctx, et, queue.Path(), &elementFailure{code: CodeTaskID, elem: elem, err: err}); err != nil {
			return f.failBundle(ctx, err)
		}
		return nil
	}
	tag := &pendingDelete{eventTime: et, queue: queue.Path()}
	if f.Spec.OnFailure == DeadLetter {
		tag.elem = elem
	}
	req := &engine.Request[*pendingDelete]{Delete: &cloudtaskspb.DeleteTaskRequest{Name: taskName(queue, key)}, Tag: tag}
	if f.Spec.OnDestinationFailure == DestinationIsolate {
		if code, err, ok := f.knownFailure(f.Spec.client, tag.queue, deleteDestinationField); ok {
			if err := f.isolate(ctx, req, code, err); err != nil {
				return f.failBundle(ctx, err)
			}
			return nil
		}
	}
	return f.submit(ctx, req)
}

func (f *deleteFn) finishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	f.emit = emit
	err := f.finish(ctx)
	if err == nil && len(f.goneIn) > 0 {
		err = f.confirmGone(ctx)
	}
	f.summarize(ctx, deleteDestinationField)
	f.summarizeDrops(ctx)
	return err
}

// key returns the key elem's task was named from: what the TaskIDFn returns, the element's
// task-id field, or the element itself (compileDelete has checked that the elements are strings
// then). An empty key names no task: it is the element's failure, as for Write.
func (f *deleteFn) key(elem any) (string, error) {
	switch {
	case f.schema != nil:
		md, err := f.schema.Metadata(elem)
		if err != nil {
			return "", err
		}
		if md.TaskID == "" {
			return "", emptyTaskIDField(f.schema.Type())
		}
		return md.TaskID, nil
	case f.taskIDFn == nil:
		if key, _ := elem.(string); key != "" {
			return key, nil
		}
		return "", errors.New("the element is an empty key; every named task has a non-empty key")
	}
	out, err := call1x2(f.taskIDFn, elem)
	if err != nil {
		return "", fmt.Errorf("DeleteConfig.TaskIDFn failed: %w", err)
	}
	if key, _ := out.(string); key != "" {
		return key, nil
	}
	return "", errors.New("DeleteConfig.TaskIDFn returned an empty key; every named task has a non-empty key")
}

// applyPolicy applies Delete's failure policy (failureRouter.apply); its dead letters carry
// DeleteConnector.
func (f *deleteFn) applyPolicy(ctx context.Context, et beam.EventTime, queue string, ef *elementFailure) error {
	return f.apply(ctx, f.metrics, f.Spec.OnFailure, DeleteConnector, et, queue, ef)
}

// The engine's observer (AttemptFailed is createBase's). As for writeFn, the engine calls these
// only from inside Submit and Flush, on the bundle's goroutine.

// Created reports a task deleted, or gone already (the engine's deduplicated). The queue of a
// gone task is confirmed before the bundle ends.
func (f *deleteFn) Created(ctx context.Context, r *engine.Request[*pendingDelete], gone bool) {
	q := r.Tag.queue
	if !gone {
		f.metrics.deleted(ctx, q, false)
		return
	}
	if f.goneIn == nil {
		f.goneIn = map[string][]*engine.Request[*pendingDelete]{}
	}
	if f.Spec.OnDestinationFailure == DestinationIsolate {
		f.goneIn[q] = append(f.goneIn[q], r)
		return
	}
	if _, ok := f.goneIn[q]; !ok {
		f.goneIn[q] = nil
	}
	f.metrics.deleted(ctx, q, true)
}

// Rejected applies the failure policy to a delete Cloud Tasks answered INVALID_ARGUMENT; under
// FailBundle its error stops the engine. A failure that is not the element's (a queue that is
// missing after the NOT_FOUND budget, PERMISSION_DENIED, an exhausted retry budget) never gets
// here: it fails the bundle, or under DestinationIsolate a queue's goes to DestinationFailed.
func (f *deleteFn) Rejected(ctx context.Context, r *engine.Request[*pendingDelete], err error) error {
	p := r.Tag
	return f.applyPolicy(ctx, p.eventTime, p.queue, &elementFailure{code: CodeInvalidArgument, deletion: r.Delete, elem: p.elem, err: err})
}

// DestinationFailed is the engine's DestinationObserver: under DestinationIsolate the delete
// goes to the failure policy with the queue's code and the process remembers the failure, as
// for Write; otherwise the failure fails the bundle.
func (f *deleteFn) DestinationFailed(ctx context.Context, r *engine.Request[*pendingDelete], code string, err error) error {
	if f.Spec.OnDestinationFailure != DestinationIsolate {
		return err
	}
	f.failed(ctx, f.Spec.client, r.Tag.queue, code, err, deleteDestinationField, f.Spec.OnFailure)
	return f.isolate(ctx, r, code, err)
}

// isolate hands a delete of a failed queue to the failure policy, and counts it.
func (f *deleteFn) isolate(ctx context.Context, r *engine.Request[*pendingDelete], code string, err error) error {
	p := r.Tag
	f.metrics.queueFailed(ctx, p.queue)
	return f.applyPolicy(ctx, p.eventTime, p.queue, &elementFailure{code: code, deletion: r.Delete, elem: p.elem, err: err})
}

// confirmGone confirms that the queues of the bundle's gone deletes exist (queueexists.go):
// a NOT_FOUND read as the task's may be the queue's. Under DestinationIsolate the deletes of
// a queue proven missing go to the failure policy with CodeNotFound and the others count as
// gone; any other failure fails the bundle.
func (f *deleteFn) confirmGone(ctx context.Context) error {
	queues := slices.Sorted(maps.Keys(f.goneIn))
	errs := f.queues.confirmQueues(ctx, queues)
	for i, queue := range queues {
		err := errs[i]
		if err != nil && (f.Spec.OnDestinationFailure != DestinationIsolate || status.Code(err) != codes.NotFound) {
			return err
		}
		if err != nil {
			f.failed(ctx, f.Spec.client, queue, CodeNotFound, err, deleteDestinationField, f.Spec.OnFailure)
		}
		for _, r := range f.goneIn[queue] {
			if err == nil {
				f.metrics.deleted(ctx, queue, true)
			} else if err := f.isolate(ctx, r, CodeNotFound, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// AttemptLatency records how long each DeleteTask call took, apart from the creates'.
func (f *deleteFn) AttemptLatency(ctx context.Context, _ *engine.Request[*pendingDelete], latency time.Duration) {
	f.metrics.deleteLatency.Update(ctx, latency.Milliseconds())
}
