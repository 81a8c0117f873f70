// Package engine owns the CreateTask (and DeleteTask) calls of one writer: it
// sends each request asynchronously, bounds how many are outstanding, retries
// the retryable failures after a jittered exponential backoff, and reports
// every outcome to an Observer. It knows nothing about Beam; the sink's two create
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
	"runtime"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
)

// This file holds the Engine itself: its Options, New, the methods a caller
// uses (Submit, Flush, Stats, Err, Fail) and the loop they share, which
// handles completions and re-sends due requests (pump) or waits for the next
// event (wait). What happens to one attempt is in dispatch.go, the retry
// schedule in retry.go, how the engine fails in failure.go, and the types a
// caller hands in and hears back in request.go.

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
	// succeed, and honours a RetryInfo delay in such an answer (package
	// adaptive).
	// Requests it holds back count against MaxInFlight like parked ones. Nil
	// turns adaptive concurrency off.
	Adaptive *Adaptive
	// StartRate, when above 0, is the rate in creates per second at which a
	// queue starts paced when this engine is the first of the Adaptive's
	// engines to use it (or the first after the Adaptive forgot it), instead
	// of in slow start: the caller knows its share of the queue's quota and
	// says so, so that neither slow start's ramp nor its first burst into the
	// quota comes first. The rate then grows while creates succeed and falls
	// when they are rejected, as a paced queue's does (package adaptive). A rate
	// below MinStartRate starts at MinStartRate; an infinite one, or none
	// without Adaptive, is ignored.
	StartRate float64
}

// Engine owns the in-flight CreateTask calls of one writer. Create it with
// New; it is not safe for concurrent use (see the package documentation). An
// Engine that has captured a terminal error stays failed: start a new one for
// the next batch. T is the type of the requests' tags.
type Engine[T any] struct {
	creator Creator
	deleter Deleter // the Creator as a Deleter; nil: it cannot delete
	opts    Options
	obs     Observer[T]
	expirer Expirer[T]             // nil: every expiry is terminal
	failure FailureObserver[T]     // nil: nobody is told which request failed
	latency LatencyObserver[T]     // nil: attempt latencies are not reported
	dest    DestinationObserver[T] // nil: a failure about a queue is terminal

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
	adaptive *engineAdaptive[T] // its own allocation, which a cleanup reaches once the engine is gone
	// quotaParked counts the parked requests whose RetryInfo delay set their
	// retry; throttle adds up the time requests are held under a quota
	// (throttled.go).
	quotaParked int
	throttle    throttleClock

	// attempts is the parent context of every attempt; cancel ends them all
	// when the engine fails.
	attempts context.Context
	cancel   context.CancelFunc
}

// completion is the result of one attempt, posted by its goroutine.
type completion[T any] struct {
	r    *Request[T]
	task *cloudtaskspb.Task // what a successful call returned
	err  error
	at   time.Time     // when the RPC returned: backoff is measured from here
	took time.Duration // how long the CreateTask call took
}

// New returns an Engine sending through c and reporting to obs (nil: outcomes
// are ignored and expired requests fail). obs may also implement Expirer,
// FailureObserver, LatencyObserver and DestinationObserver; New checks once. It panics when c is
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
	dest, _ := obs.(DestinationObserver[T])
	attempts, cancel := context.WithCancel(context.Background())
	deleter, _ := c.(Deleter)
	e := &Engine[T]{
		creator: c, deleter: deleter, opts: o, obs: obs, expirer: expirer, failure: failure, latency: latency, dest: dest,
		done: make(chan completion[T], o.MaxInFlight), attempts: attempts, cancel: cancel,
		adaptive: &engineAdaptive[T]{a: o.Adaptive},
	}
	if o.Adaptive != nil {
		// An engine can be dropped while it holds requests back: when another
		// step of the bundle fails, the runner calls neither Flush nor Fail,
		// and never uses the DoFn instance again. Its held requests' paced
		// slots count as in flight and its wake channel keeps their queues
		// watched, so without this the process-wide limits would never
		// forget those queues and would keep the slots taken for good.
		runtime.AddCleanup(e, (*engineAdaptive[T]).dropHeld, e.adaptive)
	}
	return e
}

// Submit hands r to the engine. It first handles the creates that completed
// and re-sends the parked requests that are due; if a terminal error has been
// captured it returns that error and r is not sent. While in-flight plus
// parked requests are at MaxInFlight it waits for a completion or for the
// earliest parked request to come due (it never spins). Then it sends r
// asynchronously and returns. It returns ctx.Err() if ctx ends while waiting
// (r is then not sent), and an error if r is nil, sets neither or both of
// Create and Delete, or deletes through a Creator that is no Deleter.
func (e *Engine[T]) Submit(ctx context.Context, r *Request[T]) error {
	if r == nil || (r.Create == nil) == (r.Delete == nil) {
		return errors.New("engine: Submit needs a Request with exactly one of Create and Delete")
	}
	if r.Delete != nil && e.deleter == nil {
		return errors.New("engine: a Request with Delete needs a Creator that is also a Deleter")
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
	e.noteThrottled()
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
		if p.quota {
			e.quotaParked--
		}
		e.dispatch(ctx, p.r)
	}
	e.startHeld(ctx)
	e.noteThrottled()
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
