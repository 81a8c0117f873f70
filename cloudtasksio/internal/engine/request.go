package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
)

// This file holds what a caller gives the engine and hears back from it: the
// Creator (and Deleter) that sends the RPC, the Request, the Observer and its
// optional parts (Expirer, FailureObserver, LatencyObserver, DestinationObserver), the
// ExpiredAction an Expirer decides, and the observer New uses when it is given
// none.

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

// Deleter sends one DeleteTask RPC, for the requests that delete a task
// (Request.Delete). A Creator that is also a Deleter serves both kinds. It is
// called like CreateTask, from a goroutine of its own, and must return once
// ctx ends.
type Deleter interface {
	DeleteTask(ctx context.Context, req *cloudtaskspb.DeleteTaskRequest) error
}

// Request is one task to create, or to delete, carrying a caller's tag of type
// T. The engine owns it from Submit until an Observer callback reports its
// outcome (Created, Rejected, an Expired decision other than ExpiredSend) or
// the engine fails; do not submit the same Request twice or change it
// meanwhile.
type Request[T any] struct {
	// Create is sent unchanged on every attempt, so a named task keeps its
	// name across retries. Exactly one of Create and Delete is set.
	Create *cloudtaskspb.CreateTaskRequest
	// Delete, set instead of Create, deletes the task it names through the
	// Creator, which must then be a Deleter. A delete is bounded, retried and
	// classified as a create is (ClassifyDelete), except that NOT_FOUND about
	// the task rather than its queue is a success: the task ran or was
	// deleted already. Observer.Created reports a delete's success, with
	// deduplicated true when the task was already gone.
	Delete *cloudtaskspb.DeleteTaskRequest
	// Deadline, when non-zero, must lie ahead at every send and re-send
	// (time.Now().Before(Deadline)); otherwise Expirer.Expired decides what
	// happens to the request, and without an Expirer the expiry is terminal.
	Deadline time.Time
	// Tag is the caller's data, untouched by the engine and available in
	// every callback.
	Tag T

	attempts          int                // sends started
	transientFailures int                // failures counted on Options.Transient
	notFoundFailures  int                // failures counted on Options.NotFound
	returned          *cloudtaskspb.Task // what the successful attempt's call returned
}

// Attempts returns how many times the request has been sent so far.
func (r *Request[T]) Attempts() int { return r.attempts }

// Queue returns the path of the queue the request is for: a create's parent,
// or the queue part of the name of the task a delete names.
func (r *Request[T]) Queue() string {
	if r.Delete != nil {
		name := r.Delete.GetName()
		if i := strings.LastIndex(name, "/tasks/"); i >= 0 {
			return name[:i]
		}
		return name
	}
	return r.Create.GetParent()
}

// classify classifies a failed attempt of the request: Classify for a create,
// ClassifyDelete for a delete.
func (r *Request[T]) classify(err error) decision {
	if r.Delete != nil {
		return classifyDelete(err)
	}
	return classify(err, r.Create.GetTask().GetName() != "")
}

// doing says what the request does, for error messages: "creating a task in
// queue Q" or "deleting task T".
func (r *Request[T]) doing() string {
	if r.Delete != nil {
		return fmt.Sprintf("deleting task %q", r.Delete.GetName())
	}
	return fmt.Sprintf("creating a task in queue %q", r.Create.GetParent())
}

// Returned returns the task the Creator returned for the attempt that created
// the request: for Cloud Tasks, the task as stored, with the name the service
// gave an unnamed task and its create and schedule times. It is nil until
// Observer.Created, and nil in Created for a deduplicated request
// (ALREADY_EXISTS returns no task) or one an Expirer assumed created. The
// engine keeps the pointer the call returned, nothing more.
func (r *Request[T]) Returned() *cloudtaskspb.Task { return r.returned }

// Observer receives the outcome of every request and every failed attempt.
// Each call happens on the goroutine that called Submit or Flush, inside that
// call, with that call's context, so the implementation may emit outputs and
// update metrics without locking. An Observer that also implements Expirer
// decides what happens to expired requests, one that also implements
// FailureObserver hears which request failed the engine, and one that also
// implements LatencyObserver hears how long each attempt's call took.
type Observer[T any] interface {
	// Created reports that Cloud Tasks accepted the request; r.Returned()
	// is the task the service returned. deduplicated is true when the answer
	// was ALREADY_EXISTS for a named task (an earlier attempt or run created
	// it). Also called, with deduplicated false, when Expirer.Expired answered
	// ExpiredAssumeCreated. For a delete (Request.Delete) it reports the task
	// deleted, with deduplicated true when it was already gone (Gone).
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

// DestinationObserver is the optional part of an Observer that takes the
// failures about a request's queue rather than the request itself, which are
// otherwise terminal: NOT_FOUND once the NotFound budget is exhausted (the
// queue does not exist, or not yet), and PERMISSION_DENIED or
// FAILED_PRECONDITION as the first status of the chain (not retried). code is
// that status's canonical name ("NOT_FOUND"); err is the error the engine
// would have made terminal, bounded like Rejected's and wrapping the RPC
// error. Returning nil leaves the engine running (the caller has dealt with
// the request); a non-nil error becomes its terminal error, without a
// FailureObserver.Failed call, as for Rejected. It is called like the
// Observer's methods, inside Submit or Flush.
type DestinationObserver[T any] interface {
	DestinationFailed(ctx context.Context, r *Request[T], code string, err error) error
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

// nopObserver ignores outcomes. It is no Expirer, so expired requests fail.
type nopObserver[T any] struct{}

func (nopObserver[T]) Created(context.Context, *Request[T], bool)         {}
func (nopObserver[T]) Rejected(context.Context, *Request[T], error) error { return nil }
func (nopObserver[T]) AttemptFailed(context.Context, *Request[T], string) {}
