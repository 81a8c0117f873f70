package cloudtasksio

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Connector is the deadletter.FailedElement.Connector of every dead letter this sink produces.
const Connector = "cloudtasks"

// Codes of deadletter.FailedElement.Code for the failures that reach the failure policy: four
// of an element, and three of its queue under DestinationIsolate. Every other failure fails the
// bundle and produces no dead letter.
const (
	// CodeSerialization: the task could not be built for the element (the Serializer, the
	// body format or the struct-tag metadata failed). The dead letter carries no Payload.
	CodeSerialization = "SERIALIZATION"
	// CodeTaskID: the element has no key: the TaskIDFn failed or returned an empty key, or
	// the `cloudtasks:"task-id"` field is empty. Payload is the unnamed task.
	CodeTaskID = "TASK_ID"
	// CodeInvalidArgument: the task is invalid, found by the sink before sending it or
	// answered INVALID_ARGUMENT by Cloud Tasks. Payload is the task.
	CodeInvalidArgument = "INVALID_ARGUMENT"
	// CodeTaskTooLarge: the task is too large to be created anywhere. Either its wire size,
	// name included, is over 1 MiB (1,048,576 bytes, the larger of the task size limits Cloud
	// Tasks documents), and the sink did not send it; or the gRPC transport refused the
	// request for its size (RESOURCE_EXHAUSTED "message larger than max") before Cloud Tasks
	// read it. Neither is retried, and neither is taken for a quota throttle. Payload is the
	// task.
	CodeTaskTooLarge = "TASK_TOO_LARGE"

	// CodeNotFound: under Config.OnDestinationFailure DestinationIsolate, the element's queue
	// answered NOT_FOUND until its retry budget was spent (it does not exist, was deleted, or
	// is still being created), or the worker process had met that shortly before and did not
	// send the task. Payload is the task. A Delete under DeleteConfig.OnDestinationFailure
	// DestinationIsolate gives it too, also for a queue its check proved missing; Payload is
	// then the DeleteTaskRequest.
	CodeNotFound = "NOT_FOUND"
	// CodePermissionDenied: as CodeNotFound, for PERMISSION_DENIED: the sink's identity may not
	// create tasks in the queue.
	CodePermissionDenied = "PERMISSION_DENIED"
	// CodeFailedPrecondition: as CodeNotFound, for FAILED_PRECONDITION: the queue cannot take
	// tasks as it is.
	CodeFailedPrecondition = "FAILED_PRECONDITION"
)

// elementFailure is a data-shaped failure of one element: it goes to the failure policy. task
// is what was built for the element, nil when building it failed; elem is the input element
// (set by the DoFn under DeadLetter).
type elementFailure struct {
	code string
	task *cloudtaskspb.Task
	// deletion is, for a Delete, the request that failed, nil when no task could be named; a
	// dead letter carries it as it carries a create's task.
	deletion *cloudtaskspb.DeleteTaskRequest
	elem     any
	err      error
	// stack is where building the task panicked, for the worker's log only (a stack holds
	// function names and lines, no data); empty for any other failure.
	stack string
}

func (e *elementFailure) Error() string { return e.err.Error() }
func (e *elementFailure) Unwrap() error { return e.err }

// payload is what the failure's dead letter carries in wire format: the task, or the delete
// request; nil for none.
func (e *elementFailure) payload() proto.Message {
	switch {
	case e.task != nil:
		return e.task
	case e.deletion != nil:
		return e.deletion
	}
	return nil
}

// maxLinesPerBundle bounds the lines that one kind of per-element event writes to the log in
// one bundle (bundleLines): the first are logged one by one, the rest summed up in one line
// when the bundle ends. A systematic failure must not write a line per element to the job's log.
const maxLinesPerBundle = 10

// bundleLines counts one kind of per-element event of a bundle, such as LogAndDrop's drops,
// and says which of them get a line of their own.
type bundleLines struct{ n int }

// add counts an event and reports whether it gets a line of its own: the first
// maxLinesPerBundle of the bundle do.
func (b *bundleLines) add() bool {
	b.n++
	return b.n <= maxLinesPerBundle
}

// summarize logs one line for the events of the bundle beyond the first maxLinesPerBundle, if
// any, and starts the count again. format takes two %d: the events without a line, and all of
// the bundle's.
func (b *bundleLines) summarize(ctx context.Context, format string) {
	if b.n > maxLinesPerBundle {
		warnf(ctx, format, b.n-maxLinesPerBundle, b.n)
	}
	b.n = 0
}

// maxErrorText bounds the error text of a dead letter or a log line.
const maxErrorText = 1024

// failureRouter applies a DoFn's failure policy to the element failures of its bundles: the one
// place the policy acts, for Write's writeFn and Delete's deleteFn. Its fields are runtime
// state, unexported, rebuilt on the worker by setupElements and startBundle.
type failureRouter struct {
	emit        func(beam.EventTime, deadletter.FailedElement)
	drops       bundleLines                // elements LogAndDrop dropped in this bundle
	panicLogged bool                       // a panic while building a task was logged in this bundle
	fullTexts   fullErrorTexts             // the failures of this bundle logged whole at DEBUG level
	elemEnc     *deadletter.ElementEncoder // under DeadLetter: encodes the failed elements
	elemEncErr  error                      // why elemEnc is nil under DeadLetter
}

// setupElements prepares, under DeadLetter, the encoder of the failed elements, whose type is
// elem. A missing encoder is not fatal: the dead letters still flow, and say why they carry no
// element.
func (r *failureRouter) setupElements(policy FailurePolicy, elem *beam.EncodedType) {
	if policy != DeadLetter {
		return
	}
	if elem == nil {
		r.elemEncErr = errors.New("the sink's element type is unknown")
		return
	}
	r.elemEnc, r.elemEncErr = deadletter.NewElementEncoder(elem.T)
}

// startBundle begins a bundle that emits dead letters with emit; it sums up the drops of a
// previous bundle that failed before it could.
func (r *failureRouter) startBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement)) {
	r.summarizeDrops(ctx)
	r.panicLogged = false
	r.fullTexts.reset()
	r.emit = emit
}

// summarizeDrops writes the one line that covers the drops of the bundle beyond the first
// maxLinesPerBundle, and starts the count again.
func (r *failureRouter) summarizeDrops(ctx context.Context) {
	r.drops.summarize(ctx, "dropped %d more elements without a line each, %d in this bundle; numRecordsSendErrors counts every one")
}

// route applies the failure policy to an element failure and returns the error that fails the
// bundle, if any; any other error fails the bundle.
func (f *writeFn) route(ctx context.Context, et beam.EventTime, queue string, elem any, err error) error {
	var ef *elementFailure
	if !errors.As(err, &ef) {
		return err
	}
	ef.elem = elem
	return f.applyPolicy(ctx, et, queue, ef)
}

// applyPolicy applies Write's failure policy (failureRouter.apply).
func (f *writeFn) applyPolicy(ctx context.Context, et beam.EventTime, queue string, ef *elementFailure) error {
	return f.apply(ctx, f.metrics, f.Spec.OnFailure, Connector, et, queue, ef)
}

// apply is the one place a failure policy acts: it counts the failure in m and takes it as
// policy says, its dead letters marked with connector. It returns the error that fails the
// bundle: the FailBundle policy's, or one that kept a dead letter from being emitted.
func (r *failureRouter) apply(ctx context.Context, m *sinkMetrics, policy FailurePolicy, connector string, et beam.EventTime, queue string, ef *elementFailure) error {
	m.failed(ctx, queue)
	if ef.code == CodeTaskTooLarge {
		m.tooLarge.Inc(ctx, 1)
	}
	full := ef.err.Error()
	r.fullTexts.log(ctx, ef.code, queue, full)
	text := boundedtext.Cut(full, maxErrorText)
	if ef.stack != "" && !r.panicLogged {
		// Once per bundle: a panic that every element meets (a bug, not bad data) would
		// otherwise fill the log. The failure policy still takes each element.
		r.panicLogged = true
		warnf(ctx, "building a task for queue %s panicked, which the failure policy takes as the element's failure: %s; at:\n%s", queue, text, ef.stack)
	}
	switch policy {
	case LogAndDrop:
		if r.drops.add() {
			warnf(ctx, "dropped an element for queue %s (%s): %s", queue, ef.code, text)
		}
	case DeadLetter:
		fe := deadletter.FailedElement{Connector: connector, Destination: queue, Code: ef.code, Error: text}
		r.attachElement(ctx, m, &fe, ef)
		if msg := ef.payload(); msg != nil {
			fe.Payload, fe.Error = deadLetterPayload(msg, fe.Error)
		}
		r.emit(et, fe)
	default:
		return fmt.Errorf("an element for queue %s failed (%s) under the FailBundle policy: %s", queue, ef.code, text)
	}
	return nil
}

// maxElementNote bounds the note a dead letter's Error carries when its element could not be
// encoded.
const maxElementNote = 300

// attachElement sets fe's Element and ElementType from the failed element. An element that
// cannot be encoded does not cost the dead letter: it goes without Element, its Error ends
// with a note saying why, and MetricDeadLetterElementsNotEncoded counts it in m.
func (r *failureRouter) attachElement(ctx context.Context, m *sinkMetrics, fe *deadletter.FailedElement, ef *elementFailure) {
	var err error
	switch {
	case r.elemEnc != nil:
		fe.ElementType = r.elemEnc.TypeName()
		if fe.Element, err = r.elemEnc.Encode(ef.elem); err == nil {
			return
		}
	case r.elemEncErr != nil:
		err = r.elemEncErr
	default:
		err = errors.New("no element encoder (the DoFn was not set up)")
	}
	m.elementsNotEncoded.Inc(ctx, 1)
	note := boundedtext.Cut("; the dead letter carries no element: "+err.Error(), maxElementNote)
	fe.Error = boundedtext.Cut(ef.err.Error(), maxErrorText-len(note)) + note
}

// FailedTask recovers the task carried by a dead letter this sink produced, for inspection or
// replay. It fails when the dead letter comes from another connector, or carries no task
// because building the task was what failed (CodeSerialization): the element, which every
// dead letter carries, is then the record to replay (deadletter.DecodeElement).
func FailedTask(fe deadletter.FailedElement) (*cloudtaskspb.Task, error) {
	if fe.Connector != Connector {
		return nil, withPrefix(fmt.Errorf("the dead letter comes from connector %q, not %q", fe.Connector, Connector))
	}
	if len(fe.Payload) == 0 {
		return nil, withPrefix(fmt.Errorf("the dead letter (code %s) carries no task: building the task failed", fe.Code))
	}
	task := new(cloudtaskspb.Task)
	if err := proto.Unmarshal(fe.Payload, task); err != nil {
		return nil, withPrefix(errors.New("the dead letter's payload is not a Cloud Tasks task"))
	}
	return task, nil
}

// deadLetterPayload is task (a task, or a delete request) encoded for a dead letter's Payload,
// and errText with a note when the task had to be changed or left out. A task Cloud Tasks
// could not take for invalid UTF-8 in a string field cannot be encoded as it is either: its
// invalid sequences become U+FFFD in the payload, and errText says so. The dead letter is never
// lost for its payload.
func deadLetterPayload(task proto.Message, errText string) ([]byte, string) {
	payload, err := proto.Marshal(task)
	if err == nil {
		return payload, errText
	}
	fixed := proto.Clone(task)
	replaceInvalidUTF8(fixed.ProtoReflect())
	if payload, err = proto.Marshal(fixed); err == nil {
		return payload, errText + " [the payload's task has its invalid UTF-8 replaced by U+FFFD]"
	}
	return nil, errText + " [the task could not be encoded, so the dead letter has no payload]"
}
