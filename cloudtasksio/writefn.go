package cloudtasksio

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	register.DoFn4x1[context.Context, beam.EventTime, beam.X, func(beam.EventTime, deadletter.FailedElement), error](&writeFn{})
	register.Emitter2[beam.EventTime, deadletter.FailedElement]()
}

// maxDropLinesPerBundle bounds the LogAndDrop lines of one bundle: the first drops are logged
// one by one, the rest are summed up in one line when the bundle ends. A systematic rejection
// must not write a line per element to the job's log.
const maxDropLinesPerBundle = 10

// maxErrorText bounds the error text of a dead letter or a log line.
const maxErrorText = 1024

// writeFn is the at-least-once write DoFn: a thin adapter that feeds elements to the writer
// engine and turns its outcomes into metrics, dead letters and bundle errors.
type writeFn struct {
	Spec *sinkSpec

	builders elementBuilders
	queueFn  reflectx.Func1x2
	metrics  *sinkMetrics
	engine   *engine.Engine[*pendingTask]
	emit     func(beam.EventTime, deadletter.FailedElement)
	dropped  int // elements LogAndDrop dropped in this bundle
}

// pendingTask is what the DoFn remembers about a create while the engine owns it.
type pendingTask struct {
	eventTime beam.EventTime
	queue     string
	bytes     int
}

// Setup checks the writer options again: the spec a worker decodes is not necessarily the one
// TryWrite checked, and the engine refuses options out of range.
func (f *writeFn) Setup() error {
	writer, err := f.Spec.Writer.resolve()
	if err != nil {
		return err
	}
	f.Spec.Writer = writer
	f.builders.spec = f.Spec
	if f.Spec.QueueFn != nil {
		f.queueFn = reflectx.ToFunc1x2(f.Spec.QueueFn.Fn)
	}
	f.metrics = newSinkMetrics(f.Spec.Writer.PerDestinationMetrics)
	return nil
}

func (f *writeFn) StartBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	client, err := sharedClient(f.Spec.Client)
	if err != nil {
		return err
	}
	// A fresh engine per bundle: nothing of a failed bundle can leak into the next one.
	abandon(f.engine)
	f.summarizeDrops(ctx) // of a bundle that failed in ProcessElement
	f.engine = engine.New[*pendingTask](clientCreator(client), engineOptions(f.Spec.Writer), f)
	f.emit = emit
	return nil
}

func (f *writeFn) ProcessElement(ctx context.Context, et beam.EventTime, elem beam.X, emit func(beam.EventTime, deadletter.FailedElement)) error {
	f.emit = emit
	if err := f.engine.Err(); err != nil {
		return err
	}
	queue, err := f.resolveQueue(elem)
	if err != nil {
		return failBundle(ctx, f.engine, f.metrics, err)
	}
	req, bytes, err := f.request(elem, queue)
	if err != nil {
		if err := f.route(ctx, et, queue.Path(), err); err != nil {
			return failBundle(ctx, f.engine, f.metrics, err)
		}
		return nil
	}
	if req == nil {
		f.metrics.recordsSkipped.Inc(ctx, 1)
		return nil
	}
	return submit(ctx, f.engine, f.metrics, &engine.Request[*pendingTask]{Create: req, Tag: &pendingTask{eventTime: et, queue: req.Parent, bytes: bytes}})
}

func (f *writeFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) error {
	f.emit = emit
	err := flush(ctx, f.engine, f.metrics)
	f.summarizeDrops(ctx)
	return err
}

// summarizeDrops writes the one line that covers the drops of the bundle beyond the first
// maxDropLinesPerBundle, and starts the count again.
func (f *writeFn) summarizeDrops(ctx context.Context) {
	if f.dropped > maxDropLinesPerBundle {
		log.Warnf(ctx, "cloudtasksio: dropped %d more elements without a line each, %d in this bundle; numRecordsSendErrors counts every one",
			f.dropped-maxDropLinesPerBundle, f.dropped)
	}
	f.dropped = 0
}

// resolveQueue returns the element's queue. A failing or invalid QueueFn fails the bundle: it
// fails every element alike, so routing it to a dropping policy would hide it.
func (f *writeFn) resolveQueue(elem any) (Queue, error) {
	if f.queueFn == nil {
		return f.Spec.Queue, nil
	}
	out, err := call1x2(f.queueFn, elem)
	if err != nil {
		return Queue{}, fmt.Errorf("cloudtasksio: Config.QueueFn failed: %w", err)
	}
	q := out.(Queue)
	if err := q.validate(); err != nil {
		return Queue{}, fmt.Errorf("cloudtasksio: Config.QueueFn returned an invalid queue: %w", err)
	}
	return q, nil
}

// request builds the create request for elem in queue: nil when the element is skipped.
func (f *writeFn) request(elem any, queue Queue) (*cloudtaskspb.CreateTaskRequest, int, error) {
	b, err := f.builders.forElement(elem)
	if err != nil {
		return nil, 0, err
	}
	task, md, err := b.build(elem)
	if err != nil || task == nil {
		return nil, 0, err
	}
	key, named, err := b.key(elem, md, task)
	if err != nil {
		return nil, 0, err
	}
	if named {
		task.Name = taskName(queue, key)
	}
	return &cloudtaskspb.CreateTaskRequest{Parent: queue.Path(), Task: task}, proto.Size(task), nil
}

// route applies the failure policy to an element failure and returns the error that fails the
// bundle, if any; any other error fails the bundle.
func (f *writeFn) route(ctx context.Context, et beam.EventTime, queue string, err error) error {
	var ef *elementFailure
	if !errors.As(err, &ef) {
		return err
	}
	return f.applyPolicy(ctx, et, queue, ef)
}

// applyPolicy is the one place the failure policy acts. It returns the error that fails the
// bundle: the FailBundle policy's, or one that kept a dead letter from being emitted.
func (f *writeFn) applyPolicy(ctx context.Context, et beam.EventTime, queue string, ef *elementFailure) error {
	f.metrics.failed(ctx, queue)
	text := boundedText(ef.err.Error(), maxErrorText)
	switch f.Spec.OnFailure {
	case LogAndDrop:
		f.dropped++
		if f.dropped <= maxDropLinesPerBundle {
			log.Warnf(ctx, "cloudtasksio: dropped an element for queue %s (%s): %s", queue, ef.code, text)
		}
	case DeadLetter:
		fe := deadletter.FailedElement{Connector: Connector, Destination: queue, Code: ef.code, Error: text}
		if ef.task != nil {
			payload, err := proto.Marshal(ef.task)
			if err != nil {
				return fmt.Errorf("cloudtasksio: encoding a dead letter's task for queue %s: %w", queue, err)
			}
			fe.Payload = payload
		}
		f.emit(et, fe)
	default:
		return fmt.Errorf("cloudtasksio: an element for queue %s failed (%s) under the FailBundle policy: %s", queue, ef.code, text)
	}
	return nil
}

// The engine's observer. The engine calls these only from inside Submit and Flush, on the
// bundle's goroutine, so emitting and updating metrics here is safe.

func (f *writeFn) Created(ctx context.Context, r *engine.Request[*pendingTask], deduplicated bool) {
	f.metrics.created(ctx, r.Tag.queue, r.Tag.bytes, deduplicated)
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
	return f.applyPolicy(ctx, p.eventTime, p.queue, &elementFailure{code: CodeInvalidArgument, task: r.Create.GetTask(), err: err})
}

func (f *writeFn) AttemptFailed(ctx context.Context, _ *engine.Request[*pendingTask], code string) {
	f.metrics.attemptFailed(ctx, code)
}

// clientCreator adapts the Cloud Tasks client to the engine.
func clientCreator(c interface {
	CreateTask(context.Context, *cloudtaskspb.CreateTaskRequest, ...gax.CallOption) (*cloudtaskspb.Task, error)
}) engine.Creator {
	return engine.CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		return c.CreateTask(ctx, req)
	})
}

// errBundleAbandoned ends the creates of a bundle that was neither finished nor failed through
// the DoFn (the runner gave up on it), when the DoFn instance starts its next bundle.
var errBundleAbandoned = errors.New("cloudtasksio: the bundle was abandoned before it finished")

// abandon cancels whatever a previous bundle's engine still has in flight.
func abandon[T any](e *engine.Engine[T]) {
	if e != nil {
		e.Fail(errBundleAbandoned)
	}
}

// submit hands r to the bundle's engine and returns the bundle's failure, if any.
func submit[T any](ctx context.Context, e *engine.Engine[T], m *sinkMetrics, r *engine.Request[T]) error {
	err := e.Submit(ctx, r)
	m.gauges(ctx, e)
	if err != nil {
		return failBundle(ctx, e, m, err)
	}
	return nil
}

// flush waits for the bundle's creates and returns the bundle's failure, if any.
func flush[T any](ctx context.Context, e *engine.Engine[T], m *sinkMetrics) error {
	err := e.Flush(ctx)
	m.gauges(ctx, e)
	if err != nil {
		return failBundle(ctx, e, m, err)
	}
	return nil
}

// failBundle fails the bundle with err unless it has failed already, and returns its first
// failure. The engine cancels the creates in flight, and failBundle waits for them to return,
// so a failed bundle leaves nothing in flight: the runner replays its elements, and the next
// bundle starts with the whole MaxInFlightTasks.
func failBundle[T any](ctx context.Context, e *engine.Engine[T], m *sinkMetrics, err error) error {
	e.Fail(err)
	_ = e.Flush(ctx) // returns the first failure once the cancelled creates are back
	m.gauges(ctx, e)
	return e.Err()
}

func engineOptions(o WriterOptions) engine.Options {
	return engine.Options{
		MaxInFlight: o.MaxInFlightTasks,
		Transient:   engine.Budget{Initial: o.RecoveryInitialBackoff, Max: o.RecoveryMaxBackoff, MaxAttempts: o.RecoveryMaxAttempts},
		NotFound:    engine.Budget{Initial: o.NotFoundRecoveryInitialBackoff, Max: o.NotFoundRecoveryMaxBackoff, MaxAttempts: o.NotFoundRecoveryMaxAttempts},
	}
}

// boundedText cuts s to at most n bytes on a rune boundary, marking the cut.
func boundedText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const marker = deadletter.TruncatedMarker
	cut := n - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
