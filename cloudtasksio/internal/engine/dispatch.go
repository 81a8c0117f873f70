package engine

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine/adaptive"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file holds the life of one attempt: dispatch decides whether a request
// is sent (its deadline and the Expirer), start runs the CreateTask (or
// DeleteTask) call on a goroutine of its own, and handle applies the outcome
// (created, rejected, parked for a retry, or terminal), reporting the
// attempt's latency first.

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
				r.Queue(), r.Deadline.UTC().Format(time.RFC3339Nano), r.attempts)})
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
func (e *Engine[T]) start(r *Request[T], p *adaptive.Permit) {
	e.inFlight++
	r.attempts++
	creator, timeout, done, ctx, limits := e.creator, e.opts.AttemptTimeout, e.done, e.attempts, e.adaptive.a
	if p != nil && p.Booked() {
		limits.Begin(*p)
	}
	if r.Delete != nil {
		e.startDelete(r, p)
		return
	}
	named := r.Create.GetTask().GetName() != ""
	go func() {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		began := time.Now()
		task, err := creator.CreateTask(ctx, r.Create)
		at := time.Now()
		finished(limits, p, err, named, false, at)
		done <- completion[T]{r: r, task: task, err: err, at: at, took: at.Sub(began)}
	}()
}

// startDelete is start's goroutine for a delete: the same as a create's, with
// the Deleter's call. It is a function of its own so that a create's
// goroutine carries nothing of deletes.
func (e *Engine[T]) startDelete(r *Request[T], p *adaptive.Permit) {
	deleter, timeout, done, ctx, limits := e.deleter, e.opts.AttemptTimeout, e.done, e.attempts, e.adaptive.a
	go func() {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		began := time.Now()
		err := deleter.DeleteTask(ctx, r.Delete)
		at := time.Now()
		finished(limits, p, err, true, true, at)
		done <- completion[T]{r: r, err: err, at: at, took: at.Sub(began)}
	}()
}

// handle applies the outcome of one attempt.
func (e *Engine[T]) handle(ctx context.Context, c completion[T]) {
	e.inFlight--
	r := c.r
	if c.err == nil {
		e.reportLatency(ctx, c)
		r.returned = c.task
		e.obs.Created(ctx, r, false)
		return
	}
	d := r.classify(c.err)
	if e.attempts.Err() == nil || !d.cancelled {
		e.reportLatency(ctx, c)
	}
	if d.class == Deduplicated || d.class == Gone {
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
	queue := r.Queue()
	code := CodeName(d.code)
	if !d.hasCode {
		code = "no status"
		d.message = errorText(c.err)
	}
	switch d.class {
	case Invalid:
		what := "the task for queue " + strconv.Quote(queue)
		if r.Delete != nil {
			what = "the deletion of task " + strconv.Quote(r.Delete.GetName())
		}
		if err := e.obs.Rejected(ctx, r, &createError{cause: c.err, msg: fmt.Sprintf(
			"Cloud Tasks rejected %s with %s: %s", what, code, boundedtext.Cut(d.message, maxMessage))}); err != nil {
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
			err := &createError{cause: c.err, msg: fmt.Sprintf(
				"%s failed with %s after %d attempt(s), %s retry budget of %d attempts exhausted%s: %s",
				r.doing(), code, r.attempts, what, budget.MaxAttempts, hint, boundedtext.Cut(d.message, maxMessage))}
			if d.class == NotFound {
				e.failDestination(ctx, r, code, err)
			} else {
				e.failRequest(ctx, r, err)
			}
			return
		}
		wait, quota := budget.backoff(*failures, e.opts.Jitter()), false
		if delay := e.adaptive.retryDelay(c.err); delay > wait {
			wait, quota = delay, true
		}
		heap.Push(&e.parked, parkedRequest[T]{due: c.at.Add(wait), seq: e.seq, r: r, quota: quota})
		e.seq++
		if quota {
			e.quotaParked++
		}
	default:
		err := &createError{cause: c.err, msg: fmt.Sprintf(
			"%s failed with %s after %d attempt(s), not retryable: %s",
			r.doing(), code, r.attempts, boundedtext.Cut(d.message, maxMessage))}
		if d.hasCode && (d.code == codes.PermissionDenied || d.code == codes.FailedPrecondition) {
			e.failDestination(ctx, r, code, err)
		} else {
			e.failRequest(ctx, r, err)
		}
	}
}

// failDestination hands a failure about r's queue to the DestinationObserver:
// its nil answer leaves the engine running, an error becomes terminal.
// Without one the failure is terminal like any other.
func (e *Engine[T]) failDestination(ctx context.Context, r *Request[T], code string, err error) {
	if e.dest == nil {
		e.failRequest(ctx, r, err)
		return
	}
	if err := e.dest.DestinationFailed(ctx, r, code, err); err != nil {
		e.fail(err)
	}
}

// reportLatency tells the LatencyObserver, if any, how long c's call took.
func (e *Engine[T]) reportLatency(ctx context.Context, c completion[T]) {
	if e.latency != nil {
		e.latency.AttemptLatency(ctx, c.r, c.took)
	}
}
