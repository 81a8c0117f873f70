package engine

// An engine's side of adaptive concurrency (package adaptive): the requests it
// holds back while their queue's limit is reached, its rate's next slot lies
// ahead or its creates are paused, how it starts them when the queue lets
// them through, and what each answer tells the controller.

import (
	"context"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine/adaptive"
)

// Adaptive holds the adaptive concurrency state of one client setting, one
// per queue (adaptive.Adaptive). Give the same *Adaptive to the Options of
// every engine that should share the limits.
type Adaptive = adaptive.Adaptive

// NewAdaptive returns an Adaptive of its own, sharing nothing with any other.
func NewAdaptive() *Adaptive { return adaptive.New() }

// MinStartRate is the lowest Options.StartRate the engine starts a queue at,
// the lowest rate it paces at.
const MinStartRate = adaptive.MinStartRate

// engineAdaptive is an engine's side of adaptive concurrency: the requests it
// holds because their queue's limit is reached or its creates are paused.
// Held requests count against Options.MaxInFlight like parked ones.
type engineAdaptive[T any] struct {
	a    *Adaptive // nil: adaptive concurrency is off
	wake chan struct{}
	// held are the requests waiting for their queue, first in first out per
	// queue; queues lists the queues with held requests in the order they
	// got their first.
	held   map[string][]*Request[T]
	queues []string
	n      int
	// pausedUntil is the earliest end of a pause that holds a request back,
	// as the last pass over the held requests saw it; zero for none.
	pausedUntil time.Time
	// reserved holds, per queue, the permit for a paced slot ahead that the
	// queue's first held request starts with when the slot comes.
	reserved map[string]adaptive.Permit
	// granted is the permit startHeld took for grantedFor, an expired held
	// request it hands back to dispatch.
	granted    adaptive.Permit
	grantedFor *Request[T]
	// quota holds the queues with held requests that the last look found
	// paced or paused: held under a quota (throttled.go).
	quota map[string]bool
}

// send starts r now, or holds it when adaptive concurrency says its queue
// must wait. Requests of a queue that already has held ones queue behind them.
func (e *Engine[T]) send(r *Request[T]) {
	ad := e.adaptive
	if ad.a == nil {
		e.start(r, nil)
		return
	}
	if ad.grantedFor == r {
		p := ad.granted
		ad.grantedFor = nil
		e.start(r, &p)
		return
	}
	queue := r.Queue()
	if len(ad.held[queue]) == 0 {
		now := time.Now()
		p, ok, until := ad.a.Acquire(queue, e.opts.MaxInFlight, e.opts.StartRate, now)
		if ok && !p.Start().After(now) {
			e.start(r, &p)
			return
		}
		if ok {
			// A paced slot ahead: r becomes the queue's first held request,
			// holding the permit until then.
			ad.reserve(queue, p)
		} else {
			ad.notePause(until)
		}
		ad.noteQuota(queue, now)
	}
	if ad.held == nil {
		ad.held = map[string][]*Request[T]{}
		ad.wake = make(chan struct{}, 1)
	}
	if len(ad.held[queue]) == 0 {
		ad.queues = append(ad.queues, queue)
		ad.a.Watch(queue, e.opts.MaxInFlight, e.opts.StartRate, ad.wake)
	}
	ad.held[queue] = append(ad.held[queue], r)
	ad.n++
}

// reserve keeps p, a permit for a paced slot ahead, for the first held
// request of queue, and wakes the engine at the slot.
func (ad *engineAdaptive[T]) reserve(queue string, p adaptive.Permit) {
	if ad.reserved == nil {
		ad.reserved = map[string]adaptive.Permit{}
	}
	ad.reserved[queue] = p
	ad.notePause(p.Start())
}

func (ad *engineAdaptive[T]) notePause(until time.Time) {
	if !until.IsZero() && (ad.pausedUntil.IsZero() || until.Before(ad.pausedUntil)) {
		ad.pausedUntil = until
	}
}

// startHeld starts the held requests that their queues now let through. A
// held request whose deadline has passed meanwhile goes back through
// dispatch, so Observer.Expired decides about it as before any send.
func (e *Engine[T]) startHeld(ctx context.Context) {
	ad := e.adaptive
	if ad.n == 0 {
		return
	}
	ad.pausedUntil = time.Time{}
	queues := ad.queues
	ad.queues = nil
	for _, queue := range queues {
		for e.err == nil && len(ad.held[queue]) > 0 {
			now := time.Now()
			p, reserved := ad.reserved[queue]
			if !reserved {
				var ok bool
				var until time.Time
				if p, ok, until = ad.a.Acquire(queue, e.opts.MaxInFlight, e.opts.StartRate, now); !ok {
					ad.notePause(until)
					break
				}
			}
			if p.Start().After(now) {
				ad.reserve(queue, p)
				break
			}
			delete(ad.reserved, queue)
			r := ad.held[queue][0]
			ad.held[queue][0] = nil
			ad.held[queue] = ad.held[queue][1:]
			ad.n--
			if !r.Deadline.IsZero() && !now.Before(r.Deadline) {
				// dispatch asks Observer.Expired; send uses the permit if
				// the answer is to send it anyway.
				ad.granted, ad.grantedFor = p, r
				e.dispatch(ctx, r)
				if ad.grantedFor != nil {
					ad.grantedFor = nil
					ad.a.Release(p, adaptive.Other, 0, now)
				}
				continue
			}
			e.start(r, &p)
		}
		if len(ad.held[queue]) > 0 {
			ad.queues = append(ad.queues, queue)
			ad.noteQuota(queue, time.Now())
		} else if ad.held != nil {
			delete(ad.held, queue)
			delete(ad.quota, queue)
			ad.a.Unwatch(queue, ad.wake)
		}
	}
	// dispatch may have held requests of queues not seen in this pass: keep
	// each queue listed once.
	ad.queues = uniqueStrings(ad.queues)
}

func uniqueStrings(s []string) []string {
	seen := make(map[string]bool, len(s))
	out := s[:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// dropHeld forgets every held request (the engine has failed, or was
// abandoned and collected), giving back the permits of paced slots it held
// for them and the queues it watched.
func (ad *engineAdaptive[T]) dropHeld() {
	for queue := range ad.held {
		ad.a.Unwatch(queue, ad.wake)
	}
	for _, p := range ad.reserved {
		ad.a.Release(p, adaptive.Other, 0, time.Now())
	}
	ad.held, ad.reserved, ad.queues, ad.n, ad.pausedUntil, ad.quota = nil, nil, nil, 0, time.Time{}, nil
}

// retryDelay is how long a request that failed with err must wait at least
// before its next attempt: a RetryInfo delay of a RESOURCE_EXHAUSTED answer
// when adaptive concurrency is on, else 0.
func (ad *engineAdaptive[T]) retryDelay(err error) time.Duration {
	if ad.a == nil {
		return 0
	}
	_, delay := throttle(err)
	return delay
}

// finished tells a how an attempt that held permit p ended. It runs on the
// attempt's goroutine as soon as the answer arrives, so the limit follows the
// service even while the engine's caller is busy, and the permit comes back
// even from an engine that is abandoned.
func finished(a *adaptive.Adaptive, p *adaptive.Permit, err error, named, deleting bool, at time.Time) {
	if a == nil || p == nil {
		return
	}
	o, delay := adaptive.Other, time.Duration(0)
	switch throttled, d := throttle(err); {
	case err == nil:
		o = adaptive.Succeeded
	case throttled:
		o, delay = adaptive.Throttled, d
	case !deleting && Classify(err, named) == Deduplicated, deleting && ClassifyDelete(err) == Gone:
		o = adaptive.Succeeded
	}
	a.Release(*p, o, delay, at)
}
