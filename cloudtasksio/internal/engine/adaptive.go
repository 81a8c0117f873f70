package engine

import (
	"context"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
)

// Adaptive concurrency: how many creates a worker process keeps in flight to
// one queue, driven by the service's answers. Cloud Tasks answers
// RESOURCE_EXHAUSTED when a queue takes creates faster than its quota; without
// a limit every request then retries on its own schedule, the retries keep the
// queue over its quota, and requests run out of attempts. The limit follows
// the additive-increase, multiplicative-decrease rule of TCP congestion
// control:
//
//   - A RESOURCE_EXHAUSTED answer to a create sent after the last decrease
//     sets the limit to decreaseFactor times the smaller of the limit and the
//     creates in flight, never below 1. Answers to creates that were already
//     in flight at the last decrease are the same overload seen late: they do
//     not decrease it again, so a burst of rejections costs one decrease per
//     round trip, not one per rejection.
//   - Every create that succeeds adds 1/limit, about one more create in
//     flight per round trip, up to the cap (the largest MaxInFlight of the
//     engines using the queue). At the cap, which is also where it starts,
//     the limit holds nothing back: the engines' own caps apply as without
//     it.
//   - A google.rpc.RetryInfo detail in a RESOURCE_EXHAUSTED answer pauses
//     the queue's creates until its delay has passed, and the rejected
//     request waits at least that long before its next attempt.
//
// The state lives in an Adaptive; the sink keeps one per client setting and
// worker process, so every engine, bundle and DoFn instance of the process
// that writes to a queue shares that queue's limit.

// decreaseFactor is the multiplicative decrease of the limit.
const decreaseFactor = 0.5

// maxRetryDelay bounds a RetryInfo delay the engine honours, so a malformed
// answer cannot stop a queue's creates for longer than this.
const maxRetryDelay = 5 * time.Minute

// Adaptive holds the adaptive concurrency limits of one client setting, one
// per queue. It is safe for concurrent use. Give the same *Adaptive to the
// Options of every engine that should share the limits.
type Adaptive struct {
	mu     sync.Mutex
	queues map[string]*queueLimit
}

// NewAdaptive returns an Adaptive of its own, sharing nothing with any other.
func NewAdaptive() *Adaptive { return &Adaptive{} }

// QueueLimit is a snapshot of one queue's adaptive state.
type QueueLimit struct {
	// Limit is the current concurrency limit, between 1 and Cap.
	Limit float64
	// Cap is the largest MaxInFlight of the engines that used the queue; the
	// limit starts there and holds nothing back while it is there.
	Cap int
	// InFlight is the number of creates to the queue in flight now, across
	// every engine sharing the Adaptive.
	InFlight int
	// PausedUntil is when the queue's creates may start again after a
	// RetryInfo delay; zero or past when they are not paused.
	PausedUntil time.Time
	// Decreases counts the multiplicative decreases so far.
	Decreases int
}

// Queue returns the state of the queue at path; the zero QueueLimit for a
// queue no engine has used.
func (a *Adaptive) Queue(path string) QueueLimit {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queues[path]
	if q == nil {
		return QueueLimit{}
	}
	return QueueLimit{Limit: q.limit, Cap: q.cap, InFlight: q.inFlight, PausedUntil: q.pausedUntil, Decreases: q.decreases}
}

// queueLimit is the adaptive state of one queue, guarded by Adaptive.mu.
type queueLimit struct {
	limit    float64
	cap      int
	inFlight int
	// sent numbers the sends; roundStart is the number of the first send
	// after the last decrease.
	sent, roundStart uint64
	pausedUntil      time.Time
	decreases        int
	// waiters are the wake channels of engines holding requests for the
	// queue; a release signals each without blocking.
	waiters map[chan struct{}]struct{}
}

// queue returns the state of path, created at cap or raised to it.
func (a *Adaptive) queue(path string, cap int) *queueLimit {
	if a.queues == nil {
		a.queues = map[string]*queueLimit{}
	}
	q := a.queues[path]
	if q == nil {
		q = &queueLimit{limit: float64(cap), cap: cap}
		a.queues[path] = q
	}
	if cap > q.cap {
		if q.limit >= float64(q.cap) {
			q.limit = float64(cap)
		}
		q.cap = cap
	}
	return q
}

// permit is one create that acquire let through, to be given back to release.
type permit struct {
	queue string
	seq   uint64
}

// acquire lets one create to queue start now, or says why not: until is the
// end of a pause (zero when the create must wait for a release instead). cap
// is the caller's MaxInFlight.
func (a *Adaptive) acquire(queue string, cap int, now time.Time) (p permit, ok bool, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap)
	if now.Before(q.pausedUntil) {
		return permit{}, false, q.pausedUntil
	}
	if q.limit < float64(q.cap) && float64(q.inFlight+1) > q.limit {
		return permit{}, false, time.Time{}
	}
	q.inFlight++
	p = permit{queue: queue, seq: q.sent}
	q.sent++
	return p, true, time.Time{}
}

// outcome is what a finished create tells the limit.
type outcome int

const (
	outcomeOther     outcome = iota // a failure that says nothing about the quota, or a cancellation
	outcomeSucceeded                // created, or ALREADY_EXISTS for a named task
	outcomeThrottled                // RESOURCE_EXHAUSTED
)

// release gives p back with the create's outcome, at the time the answer
// arrived; delay is a RetryInfo delay of a throttled create (0: none). It
// wakes the engines waiting for the queue.
func (a *Adaptive) release(p permit, o outcome, delay time.Duration, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queues[p.queue]
	q.inFlight--
	switch o {
	case outcomeSucceeded:
		if q.limit < float64(q.cap) {
			q.limit = min(q.limit+1/q.limit, float64(q.cap))
		}
	case outcomeThrottled:
		if p.seq >= q.roundStart {
			base := min(q.limit, float64(q.inFlight+1))
			q.limit = max(1, base*decreaseFactor)
			q.roundStart = q.sent
			q.decreases++
		}
		if delay > 0 {
			if until := at.Add(delay); until.After(q.pausedUntil) {
				q.pausedUntil = until
			}
		}
	}
	for ch := range q.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch makes releases for queue signal ch (buffered, capacity 1); unwatch
// stops it.
func (a *Adaptive) watch(queue string, cap int, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap)
	if q.waiters == nil {
		q.waiters = map[chan struct{}]struct{}{}
	}
	q.waiters[ch] = struct{}{}
}

func (a *Adaptive) unwatch(queue string, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.queues[queue]; q != nil {
		delete(q.waiters, ch)
	}
}

// throttle reads what a failed create says about the queue's quota:
// throttled is true when RESOURCE_EXHAUSTED is anywhere in err's chain, other
// than one refusing a message for its size (IsMessageTooLarge), and
// delay is the retry_delay of a google.rpc.RetryInfo detail of such a status
// (bounded by maxRetryDelay; 0 when there is none).
func throttle(err error) (throttled bool, delay time.Duration) {
	if err == nil {
		return false, 0
	}
	walkChain(err, func(node error) bool {
		code, msg, ok, _ := nodeStatus(node)
		if !ok || code != codes.ResourceExhausted || IsMessageTooLarge(code, msg) {
			return true // a request over a size limit says nothing of the quota
		}
		throttled = true
		if s, isStatuser := node.(grpcStatuser); isStatuser {
			if st, readable := safeStatus(s); readable && st != nil {
				for _, d := range st.Details() {
					if ri, isRetryInfo := d.(*errdetails.RetryInfo); isRetryInfo && ri.GetRetryDelay().IsValid() {
						delay = max(delay, ri.GetRetryDelay().AsDuration())
					}
				}
			}
		}
		return true
	})
	return throttled, min(max(delay, 0), maxRetryDelay)
}

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
	// granted is the permit startHeld took for grantedFor, an expired held
	// request it hands back to dispatch.
	granted    permit
	grantedFor *Request[T]
}

// send starts r now, or holds it when adaptive concurrency says its queue
// must wait. Requests of a queue that already has held ones queue behind them.
func (e *Engine[T]) send(r *Request[T]) {
	ad := &e.adaptive
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
	queue := r.Create.GetParent()
	if len(ad.held[queue]) == 0 {
		p, ok, until := ad.a.acquire(queue, e.opts.MaxInFlight, time.Now())
		if ok {
			e.start(r, &p)
			return
		}
		ad.notePause(until)
	}
	if ad.held == nil {
		ad.held = map[string][]*Request[T]{}
		ad.wake = make(chan struct{}, 1)
	}
	if len(ad.held[queue]) == 0 {
		ad.queues = append(ad.queues, queue)
		ad.a.watch(queue, e.opts.MaxInFlight, ad.wake)
	}
	ad.held[queue] = append(ad.held[queue], r)
	ad.n++
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
	ad := &e.adaptive
	if ad.n == 0 {
		return
	}
	ad.pausedUntil = time.Time{}
	queues := ad.queues
	ad.queues = nil
	for _, queue := range queues {
		for e.err == nil && len(ad.held[queue]) > 0 {
			now := time.Now()
			p, ok, until := ad.a.acquire(queue, e.opts.MaxInFlight, now)
			if !ok {
				ad.notePause(until)
				break
			}
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
					ad.a.release(p, outcomeOther, 0, now)
				}
				continue
			}
			e.start(r, &p)
		}
		if len(ad.held[queue]) > 0 {
			ad.queues = append(ad.queues, queue)
		} else if ad.held != nil {
			delete(ad.held, queue)
			ad.a.unwatch(queue, ad.wake)
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

// dropHeld forgets every held request (the engine has failed).
func (ad *engineAdaptive[T]) dropHeld() {
	for queue := range ad.held {
		ad.a.unwatch(queue, ad.wake)
	}
	ad.held, ad.queues, ad.n, ad.pausedUntil = nil, nil, 0, time.Time{}
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

// finished tells the Adaptive how an attempt that held permit p ended. It
// runs on the attempt's goroutine as soon as the answer arrives, so the
// limit follows the service even while the engine's caller is busy, and the
// permit comes back even from an engine that is abandoned.
func (a *Adaptive) finished(p *permit, err error, named bool, at time.Time) {
	if a == nil || p == nil {
		return
	}
	o, delay := outcomeOther, time.Duration(0)
	switch throttled, d := throttle(err); {
	case err == nil:
		o = outcomeSucceeded
	case throttled:
		o, delay = outcomeThrottled, d
	case Classify(err, named) == Deduplicated:
		o = outcomeSucceeded
	}
	a.release(*p, o, delay, at)
}
