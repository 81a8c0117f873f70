package cloudtasksio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Exactly-once creation runs in two steps around a Reshuffle. The stage step fixes each
// element's identity: it builds the task, names it (TaskID(key) or a random id), and records
// when that happened and the deadline by which the task must be created. A retried create
// bundle re-sends the envelopes the Reshuffle delivered, so the very same named tasks, and
// Cloud Tasks answers ALREADY_EXISTS for those it already has, as long as it still remembers
// their names. A random id is only that stable where the runner checkpoints the Reshuffle's
// output (Dataflow); elsewhere the stage step may run again and draw new ids ("Exactly-once
// and runners" in the package documentation). The deadline keeps every send inside that memory:
// origin + NameRetention - ClockSkewAllowance - RequestTimeout.

func init() {
	register.DoFn3x1[context.Context, beam.X, func(envelope), error](&stageFn{})
	register.Emitter1[envelope]()
	register.DoFn3x1[context.Context, envelope, func(beam.EventTime, deadletter.FailedElement), error](&stagedCreateFn{})
	beam.RegisterType(reflect.TypeOf((*envelope)(nil)).Elem())
}

// maxStagedTaskBytes is the largest named task, in wire bytes, the stage step accepts.
const maxStagedTaskBytes = 100_000

// envelope is what the stage step emits for each element: everything the create step needs, fixed
// before the Reshuffle. Times are Unix nanoseconds.
type envelope struct {
	Queue    string
	Origin   int64
	Deadline int64
	Task     []byte
}

// writeExactlyOnce adds the stage step, the Reshuffle and the create step; with created, the
// steps that carry each task's key through the Reshuffle and emit the created tasks.
func writeExactlyOnce(s beam.Scope, spec *sinkSpec, col beam.PCollection, created bool) (WriteResult, error) {
	var stage, create any = &stageFn{Spec: spec}, &stagedCreateFn{Spec: spec}
	if created {
		stage, create = &stageResultFn{stageFn{Spec: spec}}, &stagedCreateResultFn{stagedCreateFn{Spec: spec}}
	}
	staged, err := beam.TryParDo(s.Scope("stage"), stage, col)
	if err != nil {
		return WriteResult{}, err
	}
	shuffled := beam.Reshuffle(s, staged[0])
	out, err := beam.TryParDo(s.Scope("create"), create, shuffled)
	if err != nil {
		return WriteResult{}, err
	}
	return writeResult(out, created), nil
}

// stageFn builds, names and stamps each element's task.
type stageFn struct {
	Spec *sinkSpec

	builders elementBuilders
	skipped  beam.Counter
	now      func() time.Time
}

// The DoFn methods Beam calls are the package's boundary on the worker: each returns its error
// through withPrefix (boundary.go), and nothing inside them adds the prefix.

// Setup checks the spec the worker decoded (sinkSpec.checkOnWorker) and prepares the DoFn.
func (f *stageFn) Setup() error { return withPrefix(f.setupWorker()) }

func (f *stageFn) ProcessElement(ctx context.Context, elem beam.X, emit func(envelope)) error {
	return withPrefix(f.processElement(ctx, elem, emit))
}

func (f *stageFn) setupWorker() error {
	if err := f.Spec.checkOnWorker(ExactlyOnce); err != nil {
		return err
	}
	f.builders.spec = f.Spec
	f.skipped = beam.NewCounter(MetricsNamespace, MetricRecordsSkipped)
	if f.now == nil {
		f.now = time.Now
	}
	return nil
}

func (f *stageFn) processElement(ctx context.Context, elem beam.X, emit func(envelope)) error {
	env, err := f.stage(elem)
	if err != nil {
		logCut(ctx, "an element's failure in exactly-once mode", err)
		return err
	}
	if env == nil {
		f.skipped.Inc(ctx, 1)
		return nil
	}
	emit(*env)
	return nil
}

// stage returns the envelope for elem, or nil when the element is skipped. In exactly-once
// mode every failure fails the bundle.
func (f *stageFn) stage(elem any) (*envelope, error) {
	env, _, err := f.stageKeyed(elem)
	return env, err
}

// stageKeyed is stage that also returns the key the task was named from, empty for a random id.
func (f *stageFn) stageKeyed(elem any) (_ *envelope, key string, _ error) {
	queue := f.Spec.Queue
	b, err := f.builders.forElement(elem)
	if err != nil {
		return nil, "", err
	}
	task, md, err := b.build(elem)
	if err == nil && task != nil {
		var named bool
		if key, named, err = b.key(elem, md, task); err == nil {
			if named {
				task.Name = taskName(queue, key)
			} else {
				task.Name = queue.Path() + "/tasks/" + randomTaskID()
			}
		}
	}
	var ef *elementFailure
	if errors.As(err, &ef) {
		return nil, "", stagedErrorf("an element for queue %s failed (%s): %w", queue.Path(), ef.code, boundedError{ef.err})
	}
	if err != nil || task == nil {
		return nil, "", err
	}
	size := proto.Size(task)
	if size < 1 || size > maxStagedTaskBytes {
		return nil, "", stagedErrorf("a task for queue %s is %d bytes in wire format with its name; the limit is %d", queue.Path(), size, maxStagedTaskBytes)
	}
	data, err := proto.Marshal(task)
	if err != nil {
		return nil, "", stagedErrorf("encoding a task for queue %s: %w", queue.Path(), err)
	}
	origin := f.now()
	return &envelope{
		Queue:    queue.Path(),
		Origin:   origin.UnixNano(),
		Deadline: envelopeDeadline(origin, f.Spec.Staged.creationWindow()),
		Task:     data,
	}, key, nil
}

// randomTaskID returns 128 random bits as 32 lowercase hex characters.
func randomTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// stagedCreateFn creates staged tasks. Every failure fails the bundle; an expired envelope is
// decided by StagedOptions.ExpiredEnvelopePolicy.
type stagedCreateFn struct {
	Spec *sinkSpec

	createBase[*stagedCreate]
	staged *stagedMetrics
	skewed bundleLines // envelopes of this bundle staged too far in this worker's future

	// creator is the create call the bundle's engine sends through: the first StartBundle
	// takes it from the process's shared Cloud Tasks client, unless newStagedCreateFnWith
	// (for tests) has set another.
	creator engine.Creator
	// emitCreated emits a created task (stagedCreateResultFn); nil in plain Write.
	emitCreated func(beam.EventTime, CreatedTask)
}

// newStagedCreateFnWith returns a create step that sends its creates through creator in place
// of the shared Cloud Tasks client, for tests without a server.
func newStagedCreateFnWith(spec *sinkSpec, creator engine.Creator) *stagedCreateFn {
	return &stagedCreateFn{Spec: spec, creator: creator}
}

// stagedCreate is what the create step remembers about a request the engine owns.
type stagedCreate struct {
	bytes          int
	assumedCreated bool
	sentAnyway     bool
	eventTime      beam.EventTime // and key: what a created task is emitted with (stagedCreateResultFn)
	key            string
}

// Setup checks the spec the worker decoded (sinkSpec.checkOnWorker), as the stage step does,
// and prepares the DoFn.
func (f *stagedCreateFn) Setup() error { return withPrefix(f.setupWorker()) }

func (f *stagedCreateFn) StartBundle(ctx context.Context, _ func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.startBundle(ctx))
}

func (f *stagedCreateFn) ProcessElement(ctx context.Context, env envelope, _ func(beam.EventTime, deadletter.FailedElement)) error {
	return withPrefix(f.processElement(ctx, env, &stagedCreate{}))
}

func (f *stagedCreateFn) FinishBundle(ctx context.Context, _ func(beam.EventTime, deadletter.FailedElement)) error {
	err := f.finish(ctx)
	f.summarizeSkew(ctx)
	return withPrefix(err)
}

func (f *stagedCreateFn) setupWorker() error {
	if err := f.Spec.checkOnWorker(ExactlyOnce); err != nil {
		return err
	}
	f.setup(f.Spec)
	f.staged = newStagedMetrics()
	return nil
}

func (f *stagedCreateFn) startBundle(ctx context.Context) error {
	if f.creator == nil {
		client, err := sharedClient(ctx, f.Spec.client)
		if err != nil {
			return err
		}
		f.creator = clientCreator(client)
	}
	f.summarizeSkew(ctx) // of a bundle that failed in ProcessElement
	opts := engineOptions(f.Spec.Writer)
	opts.AttemptTimeout = f.Spec.Staged.RequestTimeout
	f.start(f.creator, opts, f)
	return nil
}

// summarizeSkew writes the one line that covers the bundle's envelopes staged in this worker's
// future beyond the first maxLinesPerBundle, and starts the count again.
func (f *stagedCreateFn) summarizeSkew(ctx context.Context) {
	f.skewed.summarize(ctx, stagedLabel+"%d more staged tasks were staged in this worker's future beyond Staged.ClockSkewAllowance and treated as expired, "+
		"without a line each, %d in this bundle; the expiredEnvelopes* counters count every one")
}

// processElement creates env's task; tag is what the request carries, with the created task's
// event time and key when the step emits it.
func (f *stagedCreateFn) processElement(ctx context.Context, env envelope, tag *stagedCreate) error {
	if err := f.bundleErr(); err != nil {
		return err
	}
	if err := f.checkEnvelope(env); err != nil {
		f.metrics.failed(ctx, f.Spec.Queue.Path())
		return f.failBundle(ctx, err)
	}
	if f.Spec.Staged.VerifyQueueRetention {
		if err := verifyRetention(ctx, betaQueueReader{spec: f.Spec.client}, f.Spec.client, env.Queue, f.Spec.Staged.NameRetention); err != nil {
			return f.failBundle(ctx, err)
		}
	}
	task := new(cloudtaskspb.Task)
	if err := proto.Unmarshal(env.Task, task); err != nil {
		f.metrics.failed(ctx, env.Queue)
		return f.failBundle(ctx, stagedErrorf("a staged task for queue %s cannot be decoded", env.Queue))
	}
	if !strings.HasPrefix(task.GetName(), env.Queue+"/tasks/") {
		f.metrics.failed(ctx, env.Queue)
		return f.failBundle(ctx, stagedErrorf("a staged task for queue %s carries a task name of another queue; "+
			"the staged tasks do not belong to this sink", env.Queue))
	}
	now, deadline := time.Now(), time.Unix(0, env.Deadline)
	origin := time.Unix(0, env.Origin)
	f.staged.taken(ctx, now.Sub(origin), deadline.Sub(now))
	// (At least a second, so that a ClockSkewAllowance of 0 does not turn the usual
	// sub-second differences between machines into expiries.)
	if ahead := origin.Sub(now); env.Origin > 0 && ahead > max(f.Spec.Staged.ClockSkewAllowance, time.Second) {
		// The stage step's clock ran ahead of this one by more than the allowance the window
		// leaves for it, so the deadline lies later than it should by an unknown amount: the
		// envelope goes to the expired-envelope policy now rather than be sent inside a window
		// that may no longer cover the name's retention. A clock that is off is off for every
		// envelope it staged: the first few of the bundle get a line, the rest a summary.
		if f.skewed.add() {
			warnf(ctx, stagedLabel+"a staged task for queue %s was staged %v in this worker's future, more than Staged.ClockSkewAllowance (%v; option key sink.staged.clock-skew-allowance): treated as expired",
				env.Queue, ahead.Round(time.Millisecond), f.Spec.Staged.ClockSkewAllowance)
		}
		deadline = now
	}
	tag.bytes = len(env.Task)
	return f.submit(ctx, &engine.Request[*stagedCreate]{
		Create:   &cloudtaskspb.CreateTaskRequest{Parent: env.Queue, Task: task},
		Deadline: deadline,
		Tag:      tag,
	})
}

// checkEnvelope refuses an envelope that this sink cannot have staged: one for another queue
// (it would be created there) or one without a creation deadline (nothing would keep its send
// inside the name retention). These are not expiries: they fail the bundle whatever the
// expired-envelope policy. The queue of a foreign or corrupted envelope may be anything, of
// any size: the error quotes it cut to boundedtext.MaxEcho bytes.
func (f *stagedCreateFn) checkEnvelope(env envelope) error {
	if want := f.Spec.Queue.Path(); env.Queue != want {
		return stagedErrorf("a staged task is for queue %s, but this sink writes to %s; "+
			"the staged tasks do not belong to this sink", boundedtext.Quote(env.Queue), want)
	}
	if env.Deadline <= 0 {
		return stagedErrorf("a staged task for queue %s carries no creation deadline; "+
			"it cannot be created safely, whatever StagedOptions.ExpiredEnvelopePolicy says", env.Queue)
	}
	return nil
}

func (f *stagedCreateFn) Created(ctx context.Context, r *engine.Request[*stagedCreate], deduplicated bool) {
	c := r.Tag
	if f.emitCreated != nil {
		t := createdTask(r.Create, r.Returned(), c.key, deduplicated)
		t.AssumedCreated = c.assumedCreated
		f.emitCreated(c.eventTime, t)
	}
	if c.assumedCreated {
		return // counted by expiredEnvelopesAssumedCreated: nothing was sent
	}
	f.metrics.created(ctx, r.Create.GetParent(), c.bytes, r.Attempts(), deduplicated)
}

// Rejected fails the bundle: in exactly-once mode every failure does.
func (f *stagedCreateFn) Rejected(ctx context.Context, r *engine.Request[*stagedCreate], err error) error {
	f.metrics.failed(ctx, r.Create.GetParent())
	if errors.Is(err, engine.ErrTaskTooLarge) {
		f.metrics.tooLarge.Inc(ctx, 1)
	}
	return stagedErrorf("%w (after %d attempt(s))", err, r.Attempts())
}

// Failed counts the envelope whose failure failed the bundle: a status that is not retried, an
// exhausted budget, or an expiry under ExpiredFail. In this mode every failure is a send error.
func (f *stagedCreateFn) Failed(ctx context.Context, r *engine.Request[*stagedCreate], _ error) {
	f.metrics.failed(ctx, r.Create.GetParent())
}

// Expired applies the expired-envelope policy. Each envelope is counted once, however many
// times its retries find the deadline passed.
func (f *stagedCreateFn) Expired(ctx context.Context, r *engine.Request[*stagedCreate]) (engine.ExpiredAction, error) {
	c := r.Tag
	policy := f.Spec.Staged.ExpiredEnvelopePolicy
	if !c.sentAnyway {
		f.staged.expiredEnvelope(ctx, policy)
	}
	switch policy {
	case ExpiredAssumeCreated:
		c.assumedCreated = true
		return engine.ExpiredAssumeCreated, nil
	case ExpiredCreateAnyway:
		c.sentAnyway = true
		return engine.ExpiredSend, nil
	case ExpiredDrop:
		return engine.ExpiredDrop, nil
	}
	return engine.ExpiredFail, stagedErrorf("a staged task for queue %s passed its creation deadline %s after %d attempt(s); "+
		"Cloud Tasks may have forgotten its name, so creating it now could duplicate it. Set StagedOptions.ExpiredEnvelopePolicy to decide (see https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/exactly-once.md)",
		r.Create.GetParent(), time.Unix(0, r.Deadline.UnixNano()).UTC().Format(time.RFC3339), r.Attempts())
}
