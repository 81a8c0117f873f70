// Package replay is the dead-letter replay example: a pipeline that reads the dead letters
// of a cloudtasksio.Write from a Pub/Sub subscription, gives each element back with
// deadletter.DecodeElement, lets one user function fix it or leave it out, and writes the
// fixed elements again through cloudtasksio.Write with named tasks, so a replay (or a replay
// run twice) creates no task twice.
//
// The program in examples/replay runs it on the dead letters of the dead-letter example; the
// integration tests call Build and Run directly for elements of every body format.
//
// # Reading the subscription
//
// Beam Go has no Pub/Sub source outside Dataflow, so the replay reads with a bounded DoFn:
// from one impulse it pulls the subscription with the Pub/Sub client (synchronous Pull, up
// to 1,000 messages a call, each waiting at most Options.PullWait, each batch's ack deadline
// extended to 10 minutes) until Options.MaxMessages dead letters were read, EmptyPulls pulls
// in a row returned nothing (the subscription is drained), or it has pulled for a third of
// those 10 minutes (the next run reads the rest). One worker reads; the elements are then spread over the
// workers by a Reshuffle. Messages are acknowledged only after the whole Write has finished
// (a side input of its output makes the acknowledging step wait for it): a replay that fails
// acknowledges nothing, and the next run reads the same dead letters again, which the named
// tasks make harmless. An ack sent after the message's ack deadline (a Write that took longer
// than the rest of the 10 minutes) may come too late: it is counted apart (MetricAckLate), and
// Pub/Sub may offer the message to the next run. Dead letters that cannot be replayed (no element,
// another element type, an unreadable message, one the fix function panics on) are counted and
// left on the subscription, and so
// are those that are not the replay's own: a dead letter of another connector on a shared
// topic, or one for another queue than the replay's Write queue. Left means not acknowledged:
// the reader does not nack them either, since a nacked message would come straight back to the
// pulls of the same run and keep it from ever finding the subscription drained. When the run
// ends, Run releases them (ack deadline 0), for a later run or their own consumer; and when the
// run fails or is stopped, it releases everything it read and did not acknowledge, so that a
// rerun reads it at once. Run can release only what was read in its own process (prism, the
// direct runner, a loopback environment); what workers elsewhere read comes back when the
// reader's ack deadline passes.
package replay

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

func init() {
	beam.RegisterType(reflect.TypeFor[pulled]())
	beam.RegisterType(reflect.TypeFor[pendingAck]())
	register.DoFn3x1[context.Context, []byte, func(beam.EventTime, pulled), error](&pullFn{})
	register.Emitter2[beam.EventTime, pulled]()
	register.DoFn5x0[context.Context, beam.EventTime, pulled, func(beam.EventTime, beam.X), func(pendingAck)](&fixFn{})
	register.Emitter2[beam.EventTime, beam.X]()
	register.Emitter1[pendingAck]()
	register.DoFn3x1[context.Context, pendingAck, func(*deadletter.FailedElement) bool, error](&ackFn{})
	register.Iter1[deadletter.FailedElement]()
}

// MetricsNamespace is the namespace of the replay's counters (the Metric constants).
const MetricsNamespace = "replay"

// The replay's counters.
const (
	// MetricRead counts the dead letters read from the subscription.
	MetricRead = "deadLettersRead"
	// MetricReplayed counts the elements the fix function kept, written again.
	MetricReplayed = "deadLettersReplayed"
	// MetricLeftOut counts the dead letters the fix function left out (acknowledged, not
	// written).
	MetricLeftOut = "deadLettersLeftOut"
	// MetricNotReplayable counts the dead letters that cannot be replayed: no element, an
	// element of another type, a message FromMessage cannot read, one that is not the
	// replay's own (MetricNotOwn), or one the fix function panicked on (MetricFixPanicked).
	// They stay on the subscription.
	MetricNotReplayable = "deadLettersNotReplayable"
	// MetricFixPanicked counts the dead letters, among MetricNotReplayable, that the fix
	// function panicked on.
	MetricFixPanicked = "deadLettersFixPanicked"
	// MetricNotOwn counts the dead letters, among MetricNotReplayable, that are not the
	// replay's own: another connector's (a topic shared by several sinks), or one for another
	// queue than Options.Write.Queue.
	MetricNotOwn = "deadLettersNotOwn"
	// MetricAcknowledged counts the messages acknowledged after the Write finished, within
	// their ack deadline.
	MetricAcknowledged = "deadLettersAcknowledged"
	// MetricAckLate counts the messages acknowledged after their ack deadline had passed
	// (the replay took longer than ackExtension from the pull): Pub/Sub may offer them again,
	// and the next replay reads them again (their tasks are named, so nothing is created
	// twice while the queue remembers the names).
	MetricAckLate = "deadLettersAcknowledgedLate"
)

// DefaultEmptyPulls is Options.EmptyPulls when it is zero.
const DefaultEmptyPulls = 3

// DefaultPullWait is Options.PullWait when it is zero.
const DefaultPullWait = 5 * time.Second

// Options configure a replay.
type Options struct {
	// Subscription ("projects/P/subscriptions/S") is read for dead letters published by
	// pubsubdl.ToPubSub. Give the replay a subscription of its own: the messages it
	// acknowledges are gone from it. The replay takes only the dead letters of connector
	// cloudtasksio.Connector and, when Write has a fixed Queue, of that queue; it leaves the
	// others on the subscription (MetricNotOwn).
	Subscription string
	// PubSubEndpoint is a Pub/Sub emulator's "host:port"; empty reads the Pub/Sub service
	// with application-default credentials.
	PubSubEndpoint string
	// MaxMessages bounds the dead letters one run reads; 0 reads until the subscription is
	// drained.
	MaxMessages int
	// EmptyPulls is how many pulls in a row must return nothing for the subscription to
	// count as drained; 0 means DefaultEmptyPulls. The Pub/Sub service may answer a pull
	// with nothing while messages wait, so 1 may stop early.
	EmptyPulls int
	// PullWait bounds how long one pull waits for messages; 0 means DefaultPullWait. A pull
	// that finds nothing within it counts as empty. (The gcloud Pub/Sub emulator holds a pull
	// that finds nothing for about 90 s: without the bound a drained subscription took
	// EmptyPulls times that to notice.)
	PullWait time.Duration
	// Write is how the elements are written again, usually the configuration of the
	// pipeline that dead-lettered them with OnFailure set back to FailBundle: an element
	// that fails again fails the replay, which then acknowledges nothing, rather than
	// becoming a dead letter of a dead letter. Its tasks must be named (TaskIDFn, or a
	// cloudtasks:"task-id" field on the element type), so that an element that was created
	// after all, or by an earlier replay, is not created twice.
	Write cloudtasksio.Config
	// ElementType is the element type name (FailedElement.ElementType) of the dead letters to
	// replay, when it is not the name of the type Build is given: the element type's fields
	// changed after the dead letters were published, so they no longer decode as that type.
	// Give Build a copy of the old definition under another name, set ElementType to the
	// name the dead letters carry, and let Fix convert each old element to the new type.
	// Dead letters of any other type are left on the subscription. Empty means the name of
	// the type Build is given.
	ElementType string
	// Fix is the one function a replay is written for: a registered
	// func(deadletter.FailedElement, T) (U, bool), T the element type Build is given and U
	// the Write's (usually T; another type to migrate the dead letters of a changed type, see
	// ElementType). It gets each dead letter with its decoded element and returns the element
	// to write again, or false to leave it out. It must be a top-level function registered with register.Function2x2. A
	// dead letter it panics on is counted (MetricFixPanicked), logged without its payload or
	// element, and left on the subscription; the replay goes on with the others.
	Fix any
}

// pulled is one dead letter read from the subscription.
type pulled struct {
	AckID      string
	DeadLetter deadletter.FailedElement
	// AckBy is when the message's ack deadline passes (Unix nanoseconds): an ack after it
	// may come too late, Pub/Sub having offered the message again.
	AckBy int64
}

// pendingAck is the ack id of a dead letter replayed or left out, and when its ack deadline
// passes (Unix nanoseconds).
type pendingAck struct {
	AckID string
	AckBy int64
}

var failedElementType = reflect.TypeFor[deadletter.FailedElement]()

// Build adds the replay of elements of type elem to s. Errors name the option at fault.
//
// A pipeline built with Build leaves what it read and did not acknowledge hidden until the ack
// deadline the reader set passes (10 minutes); Run also releases it when the run ends.
func Build(s beam.Scope, opts Options, elem reflect.Type) error {
	_, err := build(s, opts, elem)
	return err
}

// build is Build, returning the run's id in leases.
func build(s beam.Scope, opts Options, elem reflect.Type) (run string, err error) {
	if _, _, err := splitSubscription(opts.Subscription); err != nil {
		return "", err
	}
	if opts.MaxMessages < 0 || opts.EmptyPulls < 0 || opts.PullWait < 0 {
		return "", fmt.Errorf("replay: MaxMessages (%d), EmptyPulls (%d) and PullWait (%v) must not be negative", opts.MaxMessages, opts.EmptyPulls, opts.PullWait)
	}
	if opts.Write.OnFailure != cloudtasksio.FailBundle {
		return "", fmt.Errorf("replay: Write.OnFailure is %v; a replay needs FailBundle, so that it writes every element it keeps or fails and acknowledges nothing (leave out in Fix what cannot be written)", opts.Write.OnFailure)
	}
	fix, out, err := checkFix(opts.Fix, elem)
	if err != nil {
		return "", err
	}
	if opts.Write.TaskIDFn == nil && !hasTaskIDField(out) {
		return "", fmt.Errorf("replay: Write.TaskIDFn is nil and %v has no cloudtasks:\"task-id\" field: without named tasks a replay can create a task twice", out)
	}
	s = s.Scope("replay")
	empty := opts.EmptyPulls
	if empty == 0 {
		empty = DefaultEmptyPulls
	}
	own := ""
	if opts.Write.QueueFn == nil {
		own = opts.Write.Queue.Path() // with a QueueFn, the function decides where each element goes
	}
	run = randomID()
	read := beam.ParDo(s, &pullFn{Subscription: opts.Subscription, Endpoint: opts.PubSubEndpoint, MaxMessages: opts.MaxMessages,
		EmptyPulls: empty, PullWait: opts.PullWait, Queue: own, Run: run}, beam.Impulse(s))
	read = beam.Reshuffle(s, read)
	elems, acks := beam.ParDo2(s, &fixFn{Elem: beam.EncodedType{T: elem}, ElementType: opts.ElementType, Fix: fix}, read,
		beam.TypeDefinition{Var: beam.XType, T: out})
	failed, err := cloudtasksio.TryWrite(s, opts.Write, elems)
	if err != nil {
		return "", fmt.Errorf("replay: Write: %w", err)
	}
	beam.ParDo0(s, &ackFn{Subscription: opts.Subscription, Endpoint: opts.PubSubEndpoint, Run: run}, acks, beam.SideInput{Input: failed})
	return run, nil
}

// randomID returns 16 random hex digits.
func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// hasTaskIDField reports whether t is a struct with a cloudtasks:"task-id" field.
func hasTaskIDField(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("cloudtasks") == "task-id" {
			return true
		}
	}
	return false
}

// checkFix checks that fix is a func(deadletter.FailedElement, T) (U, bool) for T = elem, and
// returns U, the type of the elements it writes.
func checkFix(fix any, elem reflect.Type) (*beam.EncodedFunc, reflect.Type, error) {
	if fix == nil {
		return nil, nil, errors.New("replay: Fix is nil; want a registered func(deadletter.FailedElement, T) (T, bool)")
	}
	ft := reflect.TypeOf(fix)
	if ft.Kind() != reflect.Func || ft.NumIn() != 2 || ft.NumOut() != 2 || ft.In(0) != failedElementType ||
		ft.In(1) != elem || ft.Out(0).Kind() == reflect.Interface || ft.Out(1) != reflect.TypeFor[bool]() {
		return nil, nil, fmt.Errorf("replay: Fix is a %v; want func(deadletter.FailedElement, %v) (%v, bool), or another concrete type than %v to migrate it", ft, elem, elem, elem)
	}
	return &beam.EncodedFunc{Fn: reflectx.MakeFunc(fix)}, ft.Out(0), nil
}

// splitSubscription checks "projects/P/subscriptions/S" and returns P and S.
func splitSubscription(name string) (project, id string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != "subscriptions" || parts[3] == "" {
		return "", "", fmt.Errorf("replay: Subscription %q is not \"projects/PROJECT/subscriptions/SUBSCRIPTION\"", exampleenv.Cut(name, 300))
	}
	return parts[1], parts[3], nil
}

// ackExtension is the ack deadline the reader sets on what it pulls: the longest Pub/Sub allows.
const ackExtension = 600

// pullWindow bounds how long one run pulls: a third of the ack deadline, so that the Write has
// the rest of it, and no message the run pulled is offered to it again while it still pulls
// (its redelivery would come with a new ack id the run would not use). What is left goes to
// the next run.
const pullWindow = ackExtension * time.Second / 3

// pullFn reads the dead letters of the subscription from one impulse.
type pullFn struct {
	Subscription string
	Endpoint     string
	MaxMessages  int
	EmptyPulls   int
	Queue        string // the Write's queue; empty: any (a Write with a QueueFn)
	PullWait     time.Duration
	Run          string // the run's id in leases

	now     func() time.Time                              // nil: time.Now
	connect func(ctx context.Context) (subscriber, error) // nil: the Pub/Sub client
}

// maxLeftLines bounds the lines a step logs, per bundle, for the dead letters it leaves on the
// subscription: the first get a line each, the rest one summary line. A topic that several
// sinks share may hold thousands of dead letters that are not the replay's.
const maxLeftLines = 10

// leftLines counts the dead letters a bundle leaves on the subscription, and logs the first
// maxLeftLines of them.
type leftLines struct{ left, logged int }

func (l *leftLines) warnf(ctx context.Context, format string, args ...any) {
	l.warnfIf(ctx, false, format, args...)
}

// warnfIf is warnf that logs the line even past maxLeftLines when force is set.
func (l *leftLines) warnfIf(ctx context.Context, force bool, format string, args ...any) {
	l.left++
	if force || l.logged < maxLeftLines {
		l.logged++
		log.Warnf(ctx, format, args...)
	}
}

// summarize logs one line for the dead letters left without a line of their own, if any, and
// starts the count again.
func (l *leftLines) summarize(ctx context.Context) {
	if l.left > l.logged {
		log.Warnf(ctx, "replay: %d more dead letters were left on the subscription without a line each, %d in this bundle; %s counts every one",
			l.left-l.logged, l.left, MetricNotReplayable)
	}
	*l = leftLines{}
}

// notOwn says why fe is not a dead letter of the replay's Write (of cloudtasksio and, with a
// fixed queue, of queue), or returns "" when it is. The values it repeats come from message
// attributes, so it cuts them.
func notOwn(fe deadletter.FailedElement, queue string) string {
	switch {
	case fe.Connector != cloudtasksio.Connector:
		return fmt.Sprintf("it comes from connector %s, not %q", exampleenv.Quote(fe.Connector), cloudtasksio.Connector)
	case queue != "" && fe.Destination != queue:
		return fmt.Sprintf("it is for queue %s, not the replay's Write queue %s", exampleenv.Quote(fe.Destination), queue)
	}
	return ""
}

func (f *pullFn) clock() time.Time {
	if f.now != nil {
		return f.now()
	}
	return time.Now()
}

func (f *pullFn) ProcessElement(ctx context.Context, _ []byte, emit func(beam.EventTime, pulled)) error {
	read := beam.NewCounter(MetricsNamespace, MetricRead)
	notReplayable := beam.NewCounter(MetricsNamespace, MetricNotReplayable)
	notOwnCount := beam.NewCounter(MetricsNamespace, MetricNotOwn)
	c, err := connect(ctx, f.connect, f.Subscription, f.Endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	var left leftLines
	defer left.summarize(ctx)
	seen := map[string]bool{}
	var started time.Time
	for n, empty := 0, 0; (f.MaxMessages == 0 || n < f.MaxMessages) && empty < f.EmptyPulls; {
		if !started.IsZero() && f.clock().Sub(started) >= pullWindow {
			log.Infof(ctx, "replay: read %d dead letters from %s in %v, as many as one run pulls; the next run reads the rest", n, f.Subscription, pullWindow)
			break
		}
		want := 1000
		if f.MaxMessages > 0 {
			want = min(want, f.MaxMessages-n)
		}
		got, err := f.pull(ctx, c, want)
		if err != nil {
			return err
		}
		if len(got) == 0 {
			empty++
			log.Infof(ctx, "replay: pull %d of %d in a row from %s found no dead letter within %v", empty, f.EmptyPulls, f.Subscription, f.pullWait())
			continue
		}
		empty = 0
		ids := make([]string, len(got))
		for i, rm := range got {
			ids[i] = rm.GetAckId()
		}
		extended := f.clock()
		if started.IsZero() {
			started = extended
		}
		if err := c.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{
			Subscription: f.Subscription, AckIds: ids, AckDeadlineSeconds: ackExtension}); err != nil {
			return fmt.Errorf("replay: extending the ack deadline on %s: %w", f.Subscription, err)
		}
		leases.hold(f.Run, ids)
		ackBy := extended.Add(ackExtension * time.Second).UnixNano()
		for _, rm := range got {
			m := rm.GetMessage()
			if seen[m.GetMessageId()] {
				continue // redelivered within this run: already emitted once
			}
			seen[m.GetMessageId()] = true
			n++
			read.Inc(ctx, 1)
			fe, et, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.GetData(), Attributes: m.GetAttributes()})
			if err != nil {
				notReplayable.Inc(ctx, 1)
				left.warnf(ctx, "replay: message %s is left on the subscription: %v", m.GetMessageId(), err)
				continue
			}
			if why := notOwn(fe, f.Queue); why != "" {
				notReplayable.Inc(ctx, 1)
				notOwnCount.Inc(ctx, 1)
				left.warnf(ctx, "replay: message %s is left on the subscription: %s", m.GetMessageId(), why)
				continue
			}
			t := mtime.MinTimestamp
			if !et.IsZero() {
				t = mtime.FromTime(et)
			}
			emit(t, pulled{AckID: rm.GetAckId(), DeadLetter: fe, AckBy: ackBy})
		}
	}
	return nil
}

func (f *pullFn) pullWait() time.Duration {
	if f.PullWait > 0 {
		return f.PullWait
	}
	return DefaultPullWait
}

// pull asks for up to want messages and waits at most PullWait for them. Some emulators hold
// a pull that finds nothing for a minute and more: the bound ends it, and it counts as empty.
// A message the service sent as the bound expired is not lost: it comes back after the
// subscription's ack deadline.
func (f *pullFn) pull(ctx context.Context, c subscriber, want int) ([]*pubsubpb.ReceivedMessage, error) {
	pctx, cancel := context.WithTimeout(ctx, f.pullWait())
	defer cancel()
	resp, err := c.Pull(pctx, &pubsubpb.PullRequest{Subscription: f.Subscription, MaxMessages: int32(want)})
	switch {
	case err == nil:
		return resp.GetReceivedMessages(), nil
	case ctx.Err() == nil && pctx.Err() != nil:
		return nil, nil // the wait's bound, not a failure
	default:
		return nil, fmt.Errorf("replay: pulling from %s: %w", f.Subscription, err)
	}
}

// fixFn decodes each dead letter's element, hands it to the fix function and emits what it
// keeps, and the ack id of every dead letter it replayed or left out.
type fixFn struct {
	Elem        beam.EncodedType
	ElementType string // Options.ElementType
	Fix         *beam.EncodedFunc

	fix                                           reflectx.Func2x2
	replayed, leftOut, notReplayable, fixPanicked beam.Counter
	left                                          leftLines // the dead letters this bundle leaves on the subscription
	stackLogged                                   bool      // the bundle logged where Fix panicked
}

func (f *fixFn) Setup() {
	f.fix = reflectx.ToFunc2x2(f.Fix.Fn)
	f.replayed = beam.NewCounter(MetricsNamespace, MetricReplayed)
	f.leftOut = beam.NewCounter(MetricsNamespace, MetricLeftOut)
	f.notReplayable = beam.NewCounter(MetricsNamespace, MetricNotReplayable)
	f.fixPanicked = beam.NewCounter(MetricsNamespace, MetricFixPanicked)
}

// StartBundle and FinishBundle take the emitters because Beam requires the bundle methods of a
// DoFn to list those of ProcessElement.
func (f *fixFn) StartBundle(context.Context, func(beam.EventTime, beam.X), func(pendingAck)) {
	f.left, f.stackLogged = leftLines{}, false
}

func (f *fixFn) FinishBundle(ctx context.Context, _ func(beam.EventTime, beam.X), _ func(pendingAck)) {
	f.left.summarize(ctx)
}

func (f *fixFn) ProcessElement(ctx context.Context, et beam.EventTime, p pulled, emit func(beam.EventTime, beam.X), ack func(pendingAck)) {
	what := fmt.Sprintf("a %s dead letter for %s", exampleenv.Quote(p.DeadLetter.Code), exampleenv.Quote(p.DeadLetter.Destination))
	elem, err := f.decode(p.DeadLetter)
	if err != nil {
		f.notReplayable.Inc(ctx, 1)
		f.left.warnf(ctx, "replay: %s is left on the subscription: %v", what, err)
		return
	}
	fixed, keep, failure := f.callFix(p.DeadLetter, elem)
	if failure != nil {
		// A bug in Fix, or a dead letter it did not foresee: the others are replayed all the
		// same. Where it panicked is logged once per bundle, the value each time a line is.
		f.notReplayable.Inc(ctx, 1)
		f.fixPanicked.Inc(ctx, 1)
		where := ""
		if !f.stackLogged {
			where = "; where:" + failure.stack
		}
		f.left.warnfIf(ctx, !f.stackLogged, "replay: Fix panicked on %s, which is left on the subscription: %s%s", what, failure.value, where)
		f.stackLogged = true
		return
	}
	if keep {
		f.replayed.Inc(ctx, 1)
		emit(et, fixed)
	} else {
		f.leftOut.Inc(ctx, 1)
	}
	ack(pendingAck{AckID: p.AckID, AckBy: p.AckBy})
}

// decode gives back fe's element as a value of f.Elem. With ElementType set, it takes only the
// dead letters of that name, and decodes them with f.Elem, whatever its name.
func (f *fixFn) decode(fe deadletter.FailedElement) (any, error) {
	if f.ElementType != "" {
		if fe.ElementType != f.ElementType {
			return nil, fmt.Errorf("%w: it holds a %s, not the Options.ElementType %s", deadletter.ErrElementType,
				exampleenv.Quote(fe.ElementType), exampleenv.Quote(f.ElementType))
		}
		fe.ElementType = "" // DecodeElementAs checks a name only when there is one
	}
	return deadletter.DecodeElementAs(fe, f.Elem.T)
}

// fixPanic is a panic of the fix function, as the log shows it: never the dead letter's
// payload or element.
type fixPanic struct {
	value string // the panic value, quoted and cut (panicText)
	stack string // the functions and lines it panicked in (panicStack)
}

// callFix calls the fix function, recovering a panic in it.
func (f *fixFn) callFix(fe deadletter.FailedElement, elem any) (fixed any, keep bool, failure *fixPanic) {
	defer func() {
		if r := recover(); r != nil {
			fixed, keep, failure = nil, false, &fixPanic{value: panicText(r), stack: panicStack()}
		}
	}()
	out, k := f.fix.Call2x2(fe, elem)
	return out, k.(bool), nil
}

// maxPanicText bounds the text of a panic value in the log.
const maxPanicText = 300

// panicText formats a value that recover returned, quoted and cut to maxPanicText bytes.
// Formatting runs the value's Error, String or Format method, which may panic in turn; fmt
// recovers a first such panic but not one raised while it prints that panic's own value. So
// panicText recovers too, and then gives only the value's dynamic type, which formats
// without calling any method of the value.
func panicText(v any) (text string) {
	defer func() {
		if recover() != nil {
			text = fmt.Sprintf("a panic value of type %T that cannot be formatted", v)
		}
	}()
	return strconv.Quote(exampleenv.Cut(fmt.Sprint(v), maxPanicText))
}

// maxStackFrames bounds the frames panicStack gives.
const maxStackFrames = 20

// panicStack names the functions and lines of the panicking goroutine's stack, from the panic
// outwards, without the argument values a goroutine dump shows: those could be parts of the
// element. Call it from the deferred function that recovers.
func panicStack() string {
	pcs := make([]uintptr, maxStackFrames)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)]) // past Callers, panicStack and the deferred function
	var b strings.Builder
	for {
		fr, more := frames.Next()
		if fr.Function != "" {
			fmt.Fprintf(&b, "\n\t%s (%s:%d)", fr.Function, filepath.Base(fr.File), fr.Line)
		}
		if !more {
			return b.String()
		}
	}
}

// ackFn acknowledges the replayed messages. Its side input, the Write's dead letters, is
// complete only once the Write has finished, so nothing is acknowledged before.
type ackFn struct {
	Subscription string
	Endpoint     string
	Run          string // the run's id in leases

	acks    []pendingAck
	now     func() time.Time                              // nil: time.Now
	connect func(ctx context.Context) (subscriber, error) // nil: the Pub/Sub client
}

// StartBundle and FinishBundle take the side input because Beam requires every method of a
// DoFn with side inputs to list them.
func (f *ackFn) StartBundle(_ context.Context, _ func(*deadletter.FailedElement) bool) {
	f.acks = f.acks[:0]
}

func (f *ackFn) ProcessElement(ctx context.Context, a pendingAck, _ func(*deadletter.FailedElement) bool) error {
	f.acks = append(f.acks, a)
	return nil
}

func (f *ackFn) FinishBundle(ctx context.Context, _ func(*deadletter.FailedElement) bool) error {
	if len(f.acks) == 0 {
		return nil
	}
	c, err := connect(ctx, f.connect, f.Subscription, f.Endpoint)
	if err != nil {
		return err
	}
	defer c.Close()
	for acks := f.acks; len(acks) > 0; {
		batch := acks[:min(len(acks), 1000)]
		acks = acks[len(batch):]
		ids := make([]string, len(batch))
		for i, a := range batch {
			ids[i] = a.AckID
		}
		now := time.Now()
		if f.now != nil {
			now = f.now()
		}
		if err := c.Acknowledge(ctx, &pubsubpb.AcknowledgeRequest{Subscription: f.Subscription, AckIds: ids}); err != nil {
			return fmt.Errorf("replay: acknowledging on %s: %w", f.Subscription, err)
		}
		leases.done(f.Run, ids)
		late := 0
		for _, a := range batch {
			if a.AckBy != 0 && now.UnixNano() >= a.AckBy {
				late++
			}
		}
		beam.NewCounter(MetricsNamespace, MetricAcknowledged).Inc(ctx, int64(len(batch)-late))
		if late > 0 {
			beam.NewCounter(MetricsNamespace, MetricAckLate).Inc(ctx, int64(late))
			log.Warnf(ctx, "replay: acknowledged %d dead letters on %s after their ack deadline (%ds after they were pulled): Pub/Sub may offer them again, and the next replay reads them again; their tasks are named, so it creates nothing twice while the queue remembers the names", late, f.Subscription, ackExtension)
		}
	}
	f.acks = f.acks[:0]
	return nil
}

// Result is what a replay run did.
type Result struct {
	// Replay holds the replay's counters (MetricsNamespace).
	Replay map[string]int64
	// Sink holds the Write's counters (namespace cloudtasksio): numRecordsSend counts the
	// tasks accepted, tasksDeduplicated those that already existed.
	Sink map[string]int64
	// Tasks are the queue's tasks after the run.
	Tasks []*cloudtaskspb.Task
	// Created is how many tasks the run added to the queue.
	Created int
}

// Run builds the replay of elements of type elem, runs it with env.Runner, and reports what
// it did, counting the tasks of opts.Write.Queue before and after.
func Run(ctx context.Context, env exampleenv.Env, opts Options, elem reflect.Type) (*Result, error) {
	tasks, err := env.CloudTasks.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer tasks.Close()
	before, err := exampleenv.ListTasks(ctx, tasks, opts.Write.Queue)
	if err != nil {
		return nil, err
	}
	p, s := beam.NewPipelineWithRoot()
	run, err := build(s, opts, elem)
	if err != nil {
		return nil, err
	}
	w := env.Output()
	fmt.Fprintf(w, "Reading the dead letters of %s until %d pulls in a row find none (each waits up to %v)...\n",
		opts.Subscription, cmp.Or(opts.EmptyPulls, DefaultEmptyPulls), cmp.Or(opts.PullWait, DefaultPullWait))
	start := time.Now()
	pr, err := env.Runner(ctx, p)
	// What was read and not acknowledged goes back to the subscription at once: all of it
	// when the run failed or was stopped, the dead letters it left otherwise. A failed run
	// used to hide its dead letters until the reader's 10-minute ack deadline passed.
	released, releaseErr := release(ctx, opts, run)
	if err != nil {
		if released > 0 {
			fmt.Fprintf(w, "The replay did not finish: released the %d dead letter(s) it had read and not acknowledged (ack deadline 0), so the next run reads them at once.\n", released)
		}
		return nil, errors.Join(fmt.Errorf("running the replay: %w", err), releaseErr)
	}
	if releaseErr != nil {
		fmt.Fprintf(w, "%v\n", releaseErr)
	}
	res := &Result{Replay: exampleenv.Counters(pr, MetricsNamespace), Sink: exampleenv.Counters(pr, cloudtasksio.MetricsNamespace)}
	if res.Tasks, err = exampleenv.ListTasks(ctx, tasks, opts.Write.Queue); err != nil {
		return nil, err
	}
	res.Created = len(res.Tasks) - len(before)
	fmt.Fprintf(w, "replay of %s in %v: %d dead letter(s) read, %d replayed, %d left out by the fix, %d not replayable; %d acknowledged.\n",
		opts.Subscription, time.Since(start).Round(time.Millisecond), res.Replay[MetricRead], res.Replay[MetricReplayed],
		res.Replay[MetricLeftOut], res.Replay[MetricNotReplayable], res.Replay[MetricAcknowledged])
	if res.Replay[MetricRead] == 0 {
		fmt.Fprintf(w, "The subscription looked empty: %d pull(s) in a row found no dead letter. A dead letter another replay read and did not release stays hidden until its ack deadline passes (up to 10 minutes).\n",
			cmp.Or(opts.EmptyPulls, DefaultEmptyPulls))
	}
	if n := res.Replay[MetricNotReplayable]; n > 0 {
		fmt.Fprintf(w, "%d dead letter(s) were left on the subscription, not acknowledged (%d not the replay's own: another connector's, or another queue's; %d Fix panicked on); %d were released (ack deadline 0) for a later run or their own consumer.\n",
			n, res.Replay[MetricNotOwn], res.Replay[MetricFixPanicked], released)
	}
	if late := res.Replay[MetricAckLate]; late > 0 {
		fmt.Fprintf(w, "%d dead letter(s) were acknowledged after their ack deadline: Pub/Sub may offer them again, and the next replay reads them again.\n", late)
	}
	fmt.Fprintf(w, "Cloud Tasks accepted %d task(s), %d of them already there (named); the queue gained %d task(s).\n",
		res.Sink[cloudtasksio.MetricRecordsSend], res.Sink[cloudtasksio.MetricTasksDeduplicated], res.Created)
	return res, nil
}
