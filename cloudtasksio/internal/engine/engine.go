// Package engine owns the CreateTask calls of one writer: it sends each
// request asynchronously, bounds how many are outstanding, retries the
// retryable failures after a jittered exponential backoff, and reports every
// outcome to an Observer. It knows nothing about Beam; the sink's two create
// DoFns are thin adapters (sharing cloudtasksio's createBase) that call Submit
// for each element and Flush at the end of a bundle.
//
// # Concurrency model
//
// All engine state lives on the caller's goroutine. Each attempt runs the RPC
// on a goroutine of its own, which only posts the result to a channel; the
// engine drains that channel inside Submit and Flush, so every Observer
// callback runs on the caller's goroutine, inside the Submit or Flush call
// that handled it, with that call's context. An Engine is therefore not safe
// for concurrent use: call its methods from one goroutine at a time.
//
// # Retries
//
// A retryable failure (see Classify) parks the unchanged request with a due
// time instead of blocking; the next Submit or Flush re-sends whatever has
// come due. A named task keeps its name, so an attempt that had in fact
// succeeded comes back ALREADY_EXISTS, which counts as created. Parked
// requests count against Options.MaxInFlight like in-flight ones.
//
// # Failure
//
// The first terminal failure is kept and returned by every later Submit and by
// Flush. A failure is terminal when the engine decides so (a status that is
// not retried, an exhausted budget, an expiry), when an Observer callback
// returns an error (a failure policy that fails the batch), or when the caller
// calls Fail. From then on nothing is sent or re-sent: the request Submit was
// given is not sent, parked requests are abandoned, and the calls in flight
// are cancelled (the caller fails its batch and replays it). Flush still waits
// for the cancelled calls to return, so a caller that flushes a failed engine
// holds no call once Flush returns; a call that succeeded before its
// cancellation took effect is still reported as created.
package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Creator sends one CreateTask RPC. The production implementation wraps a
// *cloudtasks.Client; tests use a fake. CreateTask is called from a goroutine
// of its own and must return once ctx ends.
type Creator interface {
	CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error)
}

// CreatorFunc adapts a plain function to the Creator interface.
type CreatorFunc func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error)

// CreateTask calls f(ctx, req).
func (f CreatorFunc) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	return f(ctx, req)
}

// Budget is the retry schedule for one class of retryable failure. Each
// request counts its failures per budget.
type Budget struct {
	// Initial and Max bound the backoff: after the n-th failure the request
	// waits min(Initial*2^(n-1), Max) times a jitter factor in [0.75, 1.25),
	// and never less than 1ms. Initial must be > 0 and Max >= Initial.
	Initial, Max time.Duration
	// MaxAttempts counts attempts with the first one included: the
	// MaxAttempts-th failure of this budget is terminal, so 1 means no retry.
	// Must be >= 1.
	MaxAttempts int
}

// backoff returns the wait after the n-th failure (n >= 1) for jitter value j
// in [0, 1).
func (b Budget) backoff(n int, j float64) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		if d > b.Max/2 {
			d = b.Max
			break
		}
		d *= 2
	}
	d = min(d, b.Max)
	j = min(max(j, 0), 1)
	out := time.Duration(float64(d) * (0.75 + 0.5*j))
	return max(out, time.Millisecond)
}

func (b Budget) validate(name string) error {
	switch {
	case b.Initial <= 0:
		return fmt.Errorf("engine: Options.%s.Initial must be > 0, got %v", name, b.Initial)
	case b.Max < b.Initial:
		return fmt.Errorf("engine: Options.%s.Max must be >= Initial (%v), got %v", name, b.Initial, b.Max)
	case b.MaxAttempts < 1:
		return fmt.Errorf("engine: Options.%s.MaxAttempts must be >= 1, got %d", name, b.MaxAttempts)
	}
	return nil
}

// Options configure an Engine. There are no defaults here: the caller resolves
// them (cloudtasksio.WriterOptions documents the user-facing defaults).
type Options struct {
	// MaxInFlight caps the requests the engine holds at once, in flight plus
	// parked for retry. Submit waits while the cap is reached. Must be >= 1.
	MaxInFlight int
	// Transient is the budget for UNAVAILABLE, DEADLINE_EXCEEDED and
	// RESOURCE_EXHAUSTED failures.
	Transient Budget
	// NotFound is the budget for NOT_FOUND failures (a queue that does not
	// exist, or is reactivating after being idle).
	NotFound Budget
	// Jitter returns a uniform value in [0, 1); the backoff factor is
	// 0.75 + 0.5*Jitter(). Nil uses math/rand/v2. Tests inject it to make the
	// schedule exact.
	Jitter func() float64
	// AttemptTimeout, when > 0, bounds each attempt: its RPC runs under
	// context.WithTimeout of the engine's context, which the engine cancels
	// when it fails. Zero sets no deadline of the engine's own, so the
	// client's default (20s for CreateTask) applies.
	AttemptTimeout time.Duration
	// Adaptive, when non-nil, limits the creates in flight to each queue
	// across every engine given the same Adaptive, lowering the limit when
	// Cloud Tasks answers RESOURCE_EXHAUSTED and raising it as creates
	// succeed, and honours a RetryInfo delay in such an answer (adaptive.go).
	// Requests it holds back count against MaxInFlight like parked ones. Nil
	// turns adaptive concurrency off.
	Adaptive *Adaptive
}

// Request is one task to create, carrying a caller's tag of type T. The engine
// owns it from Submit until an Observer callback reports its outcome (Created,
// Rejected, an Expired decision other than ExpiredSend) or the engine fails; do
// not submit the same Request twice or change it meanwhile.
type Request[T any] struct {
	// Create is sent unchanged on every attempt, so a named task keeps its
	// name across retries. Required.
	Create *cloudtaskspb.CreateTaskRequest
	// Deadline, when non-zero, must lie ahead at every send and re-send
	// (time.Now().Before(Deadline)); otherwise Expirer.Expired decides what
	// happens to the request, and without an Expirer the expiry is terminal.
	Deadline time.Time
	// Tag is the caller's data, untouched by the engine and available in
	// every callback.
	Tag T

	attempts          int // sends started
	transientFailures int // failures counted on Options.Transient
	notFoundFailures  int // failures counted on Options.NotFound
}

// Attempts returns how many times the request has been sent so far.
func (r *Request[T]) Attempts() int { return r.attempts }

// Observer receives the outcome of every request and every failed attempt.
// Each call happens on the goroutine that called Submit or Flush, inside that
// call, with that call's context, so the implementation may emit outputs and
// update metrics without locking. An Observer that also implements Expirer
// decides what happens to expired requests, one that also implements
// FailureObserver hears which request failed the engine, and one that also
// implements LatencyObserver hears how long each attempt's call took.
type Observer[T any] interface {
	// Created reports that Cloud Tasks accepted the request. deduplicated is
	// true when the answer was ALREADY_EXISTS for a named task (an earlier
	// attempt or run created it). Also called, with deduplicated false, when
	// Expirer.Expired answered ExpiredAssumeCreated.
	Created(ctx context.Context, r *Request[T], deduplicated bool)
	// Rejected reports that Cloud Tasks answered INVALID_ARGUMENT, or that the
	// request was refused for its size before Cloud Tasks read it (TooLarge;
	// errors.Is(err, ErrTaskTooLarge) then holds): the task itself is at fault
	// and the caller's failure policy decides what to do with it. Neither is
	// retried. err wraps the RPC error (use errors.Is / status.Code on it);
	// its message is bounded and carries no task body or headers. Returning
	// nil (the element was dead-lettered or dropped) leaves the engine
	// running; a non-nil error becomes its terminal error, so nothing more is
	// sent (see Failure in the package documentation).
	Rejected(ctx context.Context, r *Request[T], err error) error
	// AttemptFailed reports every failed attempt, retried or not, with the
	// outermost status of the error as its canonical name ("UNAVAILABLE",
	// see OutermostCode). ALREADY_EXISTS for a named task is a success and is
	// not reported here, and neither is an attempt that ended because the
	// engine had failed and cancelled it.
	AttemptFailed(ctx context.Context, r *Request[T], code string)
}

// Expirer is the optional part of an Observer that decides what happens to a
// request whose Deadline has passed before a send or re-send (see
// ExpiredAction). A non-nil error becomes the engine's terminal error whatever
// the action. Without an Expirer every expiry is terminal, as ExpiredFail.
// It is called like the Observer's methods, inside Submit or Flush.
type Expirer[T any] interface {
	Expired(ctx context.Context, r *Request[T]) (ExpiredAction, error)
}

// FailureObserver is the optional part of an Observer that hears which
// request's failure became the engine's terminal error: a status that is not
// retried, an exhausted retry budget, or an expiry decided to fail. err is that
// terminal error. Failed is called at most once per engine, and not for a
// rejection (Rejected decided that one) nor for an error passed to Fail. It is
// called like the Observer's methods, inside Submit or Flush.
type FailureObserver[T any] interface {
	Failed(ctx context.Context, r *Request[T], err error)
}

// LatencyObserver is the optional part of an Observer that hears how long
// each attempt's CreateTask call took, measured around the call on the
// attempt's goroutine (backoff and the wait for a free slot are not in it).
// It hears every attempt whose outcome the engine reports, created,
// deduplicated or failed, just before that outcome's callback; not an attempt
// that ended because the engine had failed and cancelled it. It is called
// like the Observer's methods, inside Submit or Flush.
type LatencyObserver[T any] interface {
	AttemptLatency(ctx context.Context, r *Request[T], latency time.Duration)
}

// ExpiredAction is Expirer.Expired's decision for a request whose deadline
// passed before it could be sent.
type ExpiredAction int

const (
	// ExpiredFail makes the expiry terminal: the error Expired returned, or
	// one the engine builds when it returned nil, becomes the engine's
	// terminal error. This is the zero value, and what happens without an
	// Expirer.
	ExpiredFail ExpiredAction = iota
	// ExpiredAssumeCreated treats the request as created without sending it:
	// the engine reports Observer.Created (deduplicated false) and forgets it.
	ExpiredAssumeCreated
	// ExpiredSend sends the request anyway. A later re-send asks again.
	ExpiredSend
	// ExpiredDrop forgets the request without sending it and without any
	// further callback.
	ExpiredDrop
)

// String returns the action's name, for example "ExpiredDrop".
func (a ExpiredAction) String() string {
	switch a {
	case ExpiredFail:
		return "ExpiredFail"
	case ExpiredAssumeCreated:
		return "ExpiredAssumeCreated"
	case ExpiredSend:
		return "ExpiredSend"
	case ExpiredDrop:
		return "ExpiredDrop"
	}
	return fmt.Sprintf("ExpiredAction(%d)", int(a))
}

// Engine owns the in-flight CreateTask calls of one writer. Create it with
// New; it is not safe for concurrent use (see the package documentation). An
// Engine that has captured a terminal error stays failed: start a new one for
// the next batch. T is the type of the requests' tags.
type Engine[T any] struct {
	creator Creator
	opts    Options
	obs     Observer[T]
	expirer Expirer[T]         // nil: every expiry is terminal
	failure FailureObserver[T] // nil: nobody is told which request failed
	latency LatencyObserver[T] // nil: attempt latencies are not reported

	// done receives one completion per started attempt. Its capacity is
	// MaxInFlight and at most MaxInFlight attempts are outstanding, so an
	// attempt goroutine never blocks on it, even after the Engine is
	// abandoned.
	done     chan completion[T]
	inFlight int
	parked   parkQueue[T]
	seq      uint64
	timer    *time.Timer
	err      error
	adaptive engineAdaptive[T]

	// attempts is the parent context of every attempt; cancel ends them all
	// when the engine fails.
	attempts context.Context
	cancel   context.CancelFunc
}

// completion is the result of one attempt, posted by its goroutine.
type completion[T any] struct {
	r    *Request[T]
	err  error
	at   time.Time     // when the RPC returned: backoff is measured from here
	took time.Duration // how long the CreateTask call took
}

// New returns an Engine sending through c and reporting to obs (nil: outcomes
// are ignored and expired requests fail). obs may also implement Expirer,
// FailureObserver and LatencyObserver; New checks once. It panics when c is
// nil or an option is out of range, naming the option: the caller validates
// user configuration before it gets here.
func New[T any](c Creator, o Options, obs Observer[T]) *Engine[T] {
	if c == nil {
		panic("engine: New needs a non-nil Creator")
	}
	if o.MaxInFlight < 1 {
		panic(fmt.Sprintf("engine: Options.MaxInFlight must be >= 1, got %d", o.MaxInFlight))
	}
	if err := o.Transient.validate("Transient"); err != nil {
		panic(err.Error())
	}
	if err := o.NotFound.validate("NotFound"); err != nil {
		panic(err.Error())
	}
	if o.AttemptTimeout < 0 {
		panic(fmt.Sprintf("engine: Options.AttemptTimeout must be >= 0, got %v", o.AttemptTimeout))
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if obs == nil {
		obs = nopObserver[T]{}
	}
	expirer, _ := obs.(Expirer[T])
	failure, _ := obs.(FailureObserver[T])
	latency, _ := obs.(LatencyObserver[T])
	attempts, cancel := context.WithCancel(context.Background())
	return &Engine[T]{
		creator: c, opts: o, obs: obs, expirer: expirer, failure: failure, latency: latency,
		done: make(chan completion[T], o.MaxInFlight), attempts: attempts, cancel: cancel,
		adaptive: engineAdaptive[T]{a: o.Adaptive},
	}
}

// Submit hands r to the engine. It first handles the creates that completed
// and re-sends the parked requests that are due; if a terminal error has been
// captured it returns that error and r is not sent. While in-flight plus
// parked requests are at MaxInFlight it waits for a completion or for the
// earliest parked request to come due (it never spins). Then it sends r
// asynchronously and returns. It returns ctx.Err() if ctx ends while waiting
// (r is then not sent), and an error if r or r.Create is nil.
func (e *Engine[T]) Submit(ctx context.Context, r *Request[T]) error {
	if r == nil || r.Create == nil {
		return errors.New("engine: Submit needs a Request with a non-nil Create")
	}
	e.pump(ctx)
	for e.err == nil && e.inFlight+len(e.parked)+e.adaptive.n >= e.opts.MaxInFlight {
		if err := e.wait(ctx); err != nil {
			return err
		}
		e.pump(ctx)
	}
	if e.err != nil {
		return e.err
	}
	e.dispatch(ctx, r)
	return e.err
}

// Flush waits until every in-flight create has completed and every parked
// request has been re-sent as it came due and completed, then returns the
// first terminal error, if any. Once a terminal error is captured nothing more
// is sent; Flush still waits for the calls in flight, which the failure has
// cancelled. It returns ctx.Err() if ctx ends first; the engine keeps its
// state and a later Flush continues.
func (e *Engine[T]) Flush(ctx context.Context) error {
	for {
		e.pump(ctx)
		if e.inFlight == 0 && (len(e.parked)+e.adaptive.n == 0 || e.err != nil) {
			return e.err
		}
		if err := e.wait(ctx); err != nil {
			return err
		}
	}
}

// Stats returns how many requests are in flight and how many are parked
// waiting for a retry or held back by adaptive concurrency, for gauges.
func (e *Engine[T]) Stats() (inFlight, parked int) { return e.inFlight, len(e.parked) + e.adaptive.n }

// Err returns the first terminal error captured so far, or nil.
func (e *Engine[T]) Err() error { return e.err }

// Fail makes err the engine's terminal error unless one was captured earlier
// (err must not be nil): nothing more is sent, parked requests are abandoned
// and the calls in flight are cancelled. The caller uses it when its batch
// fails for a reason of its own; Flush then waits for the cancelled calls.
func (e *Engine[T]) Fail(err error) {
	if err == nil {
		panic("engine: Fail needs a non-nil error")
	}
	e.fail(err)
}

// pump handles every completion already posted, re-sends the parked requests
// that are due, then starts the held requests that adaptive concurrency lets
// through.
func (e *Engine[T]) pump(ctx context.Context) {
	for {
		select {
		case c := <-e.done:
			e.handle(ctx, c)
			continue
		default:
		}
		break
	}
	now := time.Now()
	for e.err == nil && len(e.parked) > 0 && !e.parked[0].due.After(now) {
		p := heap.Pop(&e.parked).(parkedRequest[T])
		e.dispatch(ctx, p.r)
	}
	e.startHeld(ctx)
}

// wait blocks until one completion arrives (and handles it), the earliest
// parked request comes due, adaptive concurrency may let a held request
// through, or ctx ends.
func (e *Engine[T]) wait(ctx context.Context) error {
	var due <-chan time.Time
	next := e.adaptive.pausedUntil
	if len(e.parked) > 0 && (next.IsZero() || e.parked[0].due.Before(next)) {
		next = e.parked[0].due
	}
	if !next.IsZero() {
		d := time.Until(next)
		if d <= 0 {
			return nil
		}
		if e.timer == nil {
			e.timer = time.NewTimer(d)
		} else {
			e.timer.Reset(d)
		}
		defer e.timer.Stop()
		due = e.timer.C
	}
	select {
	case c := <-e.done:
		e.handle(ctx, c)
	case <-due:
	case <-e.adaptive.wake:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// dispatch sends r now, unless its deadline has passed and the expiry decides
// otherwise.
func (e *Engine[T]) dispatch(ctx context.Context, r *Request[T]) {
	if !r.Deadline.IsZero() && !time.Now().Before(r.Deadline) {
		action, err := e.expired(ctx, r)
		if err != nil {
			e.failRequest(ctx, r, err)
			return
		}
		switch action {
		case ExpiredSend:
			// fall through to the send below
		case ExpiredAssumeCreated:
			e.obs.Created(ctx, r, false)
			return
		case ExpiredDrop:
			return
		case ExpiredFail:
			e.failRequest(ctx, r, &createError{msg: fmt.Sprintf(
				"task for queue %q not sent: its deadline %s passed after %d attempt(s)",
				r.Create.GetParent(), r.Deadline.UTC().Format(time.RFC3339Nano), r.attempts)})
			return
		default:
			e.fail(fmt.Errorf("engine: Expirer.Expired returned unknown ExpiredAction %d", int(action)))
			return
		}
	}
	e.send(r)
}

// expired asks the Expirer what to do with r, whose deadline has passed;
// without one the expiry is terminal.
func (e *Engine[T]) expired(ctx context.Context, r *Request[T]) (ExpiredAction, error) {
	if e.expirer == nil {
		return ExpiredFail, nil
	}
	return e.expirer.Expired(ctx, r)
}

// start runs one attempt on a goroutine of its own; p is its adaptive
// concurrency permit, nil when that is off.
func (e *Engine[T]) start(r *Request[T], p *permit) {
	e.inFlight++
	r.attempts++
	creator, timeout, done, ctx, adaptive := e.creator, e.opts.AttemptTimeout, e.done, e.attempts, e.adaptive.a
	named := r.Create.GetTask().GetName() != ""
	go func() {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		began := time.Now()
		_, err := creator.CreateTask(ctx, r.Create)
		at := time.Now()
		adaptive.finished(p, err, named, at)
		done <- completion[T]{r: r, err: err, at: at, took: at.Sub(began)}
	}()
}

// handle applies the outcome of one attempt.
func (e *Engine[T]) handle(ctx context.Context, c completion[T]) {
	e.inFlight--
	r := c.r
	if c.err == nil {
		e.reportLatency(ctx, c)
		e.obs.Created(ctx, r, false)
		return
	}
	d := classify(c.err, r.Create.GetTask().GetName() != "")
	if e.attempts.Err() == nil || !d.cancelled {
		e.reportLatency(ctx, c)
	}
	if d.class == Deduplicated {
		e.obs.Created(ctx, r, true)
		return
	}
	if e.err != nil {
		// The engine has failed: the batch is replayed, so the outcome only
		// feeds the attempt metric, unless it is the engine's own cancellation.
		if e.attempts.Err() == nil || !d.cancelled {
			e.obs.AttemptFailed(ctx, r, OutermostCode(c.err))
		}
		return
	}
	e.obs.AttemptFailed(ctx, r, OutermostCode(c.err))
	queue := r.Create.GetParent()
	code := CodeName(d.code)
	if !d.hasCode {
		code = "no status"
		d.message = errorText(c.err)
	}
	switch d.class {
	case Invalid:
		if err := e.obs.Rejected(ctx, r, &createError{cause: c.err, msg: fmt.Sprintf(
			"Cloud Tasks rejected the task for queue %q with %s: %s", queue, code, boundedtext.Cut(d.message, maxMessage))}); err != nil {
			e.fail(err)
		}
	case TooLarge:
		if err := e.obs.Rejected(ctx, r, &createError{cause: c.err, kind: ErrTaskTooLarge, msg: fmt.Sprintf(
			"the request for a task in queue %q (%d bytes in wire format) was refused for its size with %s before Cloud Tasks read it; not retried: %s",
			queue, proto.Size(r.Create), code, boundedtext.Cut(d.message, maxMessage))}); err != nil {
			e.fail(err)
		}
	case Transient, NotFound:
		budget, failures, what := e.opts.Transient, &r.transientFailures, "transient"
		if d.class == NotFound {
			budget, failures, what = e.opts.NotFound, &r.notFoundFailures, "NOT_FOUND"
		}
		*failures++
		if *failures >= budget.MaxAttempts {
			hint := ""
			if d.class == NotFound {
				hint = "; the queue does not exist, or is reactivating after being idle"
			}
			e.failRequest(ctx, r, &createError{cause: c.err, msg: fmt.Sprintf(
				"creating a task in queue %q failed with %s after %d attempt(s), %s retry budget of %d attempts exhausted%s: %s",
				queue, code, r.attempts, what, budget.MaxAttempts, hint, boundedtext.Cut(d.message, maxMessage))})
			return
		}
		due := c.at.Add(max(budget.backoff(*failures, e.opts.Jitter()), e.adaptive.retryDelay(c.err)))
		heap.Push(&e.parked, parkedRequest[T]{due: due, seq: e.seq, r: r})
		e.seq++
	default:
		e.failRequest(ctx, r, &createError{cause: c.err, msg: fmt.Sprintf(
			"creating a task in queue %q failed with %s after %d attempt(s), not retryable: %s",
			queue, code, r.attempts, boundedtext.Cut(d.message, maxMessage))})
	}
}

// reportLatency tells the LatencyObserver, if any, how long c's call took.
func (e *Engine[T]) reportLatency(ctx context.Context, c completion[T]) {
	if e.latency != nil {
		e.latency.AttemptLatency(ctx, c.r, c.took)
	}
}

// failRequest makes r's failure the engine's terminal error, telling the
// FailureObserver, unless the engine has already failed.
func (e *Engine[T]) failRequest(ctx context.Context, r *Request[T], err error) {
	if e.err != nil {
		return
	}
	e.fail(err)
	if e.failure != nil {
		e.failure.Failed(ctx, r, err)
	}
}

// fail keeps err if it is the first terminal error, abandons the parked
// requests and cancels the attempts in flight.
func (e *Engine[T]) fail(err error) {
	if e.err != nil {
		return
	}
	e.err = err
	e.parked = nil
	e.adaptive.dropHeld()
	e.cancel()
}

// ErrTaskTooLarge marks the error Observer.Rejected receives for a request
// refused for its size (TooLarge): errors.Is(err, ErrTaskTooLarge).
var ErrTaskTooLarge = errors.New("task too large")

// createError is a bounded, payload-free message that still wraps the RPC
// error, so errors.Is and status.Code see through it. kind, when set, is a
// sentinel errors.Is also matches.
type createError struct {
	msg   string
	cause error
	kind  error
}

func (e *createError) Error() string { return e.msg }
func (e *createError) Unwrap() error { return e.cause }

// Is reports whether target is the error's kind.
func (e *createError) Is(target error) bool { return e.kind != nil && target == e.kind }

// maxMessage bounds the status message quoted in engine errors.
const maxMessage = 200

// errorText is err.Error(), or a fixed text when that method panics (a typed
// nil, for example).
func errorText(err error) (text string) {
	defer func() {
		if recover() != nil {
			text = "an error whose text cannot be read"
		}
	}()
	if isNilValue(err) {
		return fmt.Sprintf("a nil %T", err)
	}
	return err.Error()
}

// parkedRequest is a request waiting for its retry.
type parkedRequest[T any] struct {
	due time.Time
	seq uint64 // ties keep submission order
	r   *Request[T]
}

// parkQueue is a min-heap of parked requests by due time.
type parkQueue[T any] []parkedRequest[T]

func (q parkQueue[T]) Len() int { return len(q) }
func (q parkQueue[T]) Less(i, j int) bool {
	if q[i].due.Equal(q[j].due) {
		return q[i].seq < q[j].seq
	}
	return q[i].due.Before(q[j].due)
}
func (q parkQueue[T]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *parkQueue[T]) Push(x any)   { *q = append(*q, x.(parkedRequest[T])) }
func (q *parkQueue[T]) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = parkedRequest[T]{}
	*q = old[:len(old)-1]
	return p
}

// nopObserver ignores outcomes. It is no Expirer, so expired requests fail.
type nopObserver[T any] struct{}

func (nopObserver[T]) Created(context.Context, *Request[T], bool)         {}
func (nopObserver[T]) Rejected(context.Context, *Request[T], error) error { return nil }
func (nopObserver[T]) AttemptFailed(context.Context, *Request[T], string) {}
