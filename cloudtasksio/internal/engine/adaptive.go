package engine

import (
	"container/list"
	"context"
	"math"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
)

// Adaptive concurrency: how many creates a worker process starts to one
// queue, driven by the service's answers. Cloud Tasks answers
// RESOURCE_EXHAUSTED when a queue takes creates faster than its quota; without
// a limit every request then retries on its own schedule, the retries keep the
// queue over its quota, and requests run out of attempts. Each queue's state
// goes through two phases:
//
//   - Slow start. A queue no create has been rejected for starts with
//     initialLimit creates in flight, not with the cap: a worker process that
//     starts, or a pipeline that starts many processes at once, does not send
//     a whole cap's worth into a quota it knows nothing about. Every create
//     that succeeds while the limit was at least half used raises the limit
//     by slowStartGrowth (one), so the limit doubles every round trip while creates succeed, up
//     to the cap (the largest MaxInFlight of the engines using the queue). At
//     the cap it holds nothing back: the engines' own caps apply as without
//     it. A pipeline that is never throttled reaches the cap within about
//     log2(cap/initialLimit) round trips of its first create to the queue and
//     keeps it for the life of the process.
//   - Paced. The first RESOURCE_EXHAUSTED answer ends slow start for good: a
//     quota is a rate, so from then on the process starts the queue's creates
//     at a rate, spaced evenly, instead of bounding how many are in flight
//     (at a 5 ms round trip, a quota of 1,000/s shared by eight processes is
//     less than one create in flight per process, which no concurrency limit
//     can express). The rate starts at the rate at which the queue accepted
//     the process's creates just before, a little below it (setPoint). A
//     RESOURCE_EXHAUSTED answer to a create started after the last decrease
//     lowers it to the smaller of decreaseFactor times itself and setPoint
//     times the accepted rate, at most once per round trip however many
//     creates of that round are rejected. While creates succeed and the rate
//     is what holds them back, it grows by growthPerSecond of itself (plus
//     growthFloor) per second, probing for more.
//   - A google.rpc.RetryInfo detail in a RESOURCE_EXHAUSTED answer pauses the
//     queue's creates until its delay has passed, and the rejected request
//     waits at least that long before its next attempt.
//
// The state lives in an Adaptive; the sink keeps one per client setting and
// worker process, so every engine, bundle and DoFn instance of the process
// that writes to a queue shares that queue's limit and rate: they act as one
// client of the quota, whatever their number.

const (
	// initialLimit is the concurrency limit a queue starts with in slow start.
	initialLimit = 4
	// decreaseFactor bounds each decrease of the rate from above.
	decreaseFactor = 0.9
	// setPoint is the share of the measured accepted rate the rate is set to
	// at a decrease: a little below it, so the queue's bucket refills.
	setPoint = 0.97
	// growthPerSecond and growthFloor are how fast the rate grows while it is
	// what holds creates back and they succeed: rate*growthPerSecond +
	// growthFloor creates per second, per second.
	growthPerSecond = 0.05
	growthFloor     = 1.0
	// slowStartGrowth is what each success adds to slow start's limit (the
	// limit grows by this share of itself per round trip): the creates of
	// the round trip in which the first rejections come back are sent at up
	// to 1+slowStartGrowth times the rate that was accepted. Measured with
	// 0.5 too (adaptive_sim_test.go): a little fewer rejections, a start-up
	// half again as long for a pipeline that is never throttled.
	slowStartGrowth = 1.0
	// minRate is the lowest rate, in creates per second.
	minRate = 0.5
	// maxGrowthStep bounds the time one success may credit to growth, so a
	// pause in the traffic does not turn into a jump of the rate.
	maxGrowthStep = 100 * time.Millisecond
	// pacerSlack is how far behind now the next paced start may lie: after a
	// quiet spell, at most this much of the rate starts at once.
	pacerSlack = 10 * time.Millisecond
)

// maxRetryDelay bounds a RetryInfo delay the engine honours, so a malformed
// answer cannot stop a queue's creates for longer than this.
const maxRetryDelay = 5 * time.Minute

// Adaptive holds the adaptive concurrency state of one client setting, one
// per queue. It is safe for concurrent use. Give the same *Adaptive to the
// Options of every engine that should share the limits.
//
// A queue with nothing in flight and no engine waiting for it is idle. IdleTTL
// and MaxQueues bound the queues kept, for a process that writes to very many:
// a queue idle for IdleTTL is forgotten, and beyond MaxQueues queues the one
// idle the longest is. A forgotten queue starts afresh on its next create, as
// if never used. A queue in use is never forgotten. Set them before the first
// engine uses the Adaptive; zero keeps every queue.
type Adaptive struct {
	IdleTTL   time.Duration
	MaxQueues int

	mu     sync.Mutex
	queues map[string]*queueLimit
	idle   list.List // of *queueLimit: the idle queues, most recently idle first
}

// NewAdaptive returns an Adaptive of its own, sharing nothing with any other.
func NewAdaptive() *Adaptive { return &Adaptive{} }

// QueueLimit is a snapshot of one queue's adaptive state.
type QueueLimit struct {
	// Limit is the current concurrency limit, between 1 and Cap: in slow
	// start the limit itself, once paced the creates the rate keeps in flight
	// at the measured round trip (Rate times RTT, at least 1).
	Limit float64
	// Cap is the largest MaxInFlight of the engines that used the queue; in
	// slow start the limit grows up to it and holds nothing back there.
	Cap int
	// InFlight is the number of creates to the queue in flight now, across
	// every engine sharing the Adaptive, a create waiting for its paced start
	// included.
	InFlight int
	// PausedUntil is when the queue's creates may start again after a
	// RetryInfo delay; zero or past when they are not paused.
	PausedUntil time.Time
	// Decreases counts the decreases so far, the one ending slow start
	// included.
	Decreases int
	// Rate is the rate, in creates per second, at which the queue's creates
	// start; 0 in slow start, before any create to the queue was rejected.
	Rate float64
	// RTT is the smoothed round trip of the queue's creates; 0 before the
	// first answer.
	RTT time.Duration
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
	limit := q.limit
	if q.rate > 0 {
		limit = min(float64(q.cap), max(1, q.rate*q.rtt.Seconds()))
	}
	return QueueLimit{Limit: limit, Cap: q.cap, InFlight: q.inFlight, PausedUntil: q.pausedUntil,
		Decreases: q.decreases, Rate: q.rate, RTT: q.rtt}
}

// queueLimit is the adaptive state of one queue, guarded by Adaptive.mu.
type queueLimit struct {
	limit    float64 // slow start's concurrency limit
	cap      int
	inFlight int
	// sent numbers the sends; roundStart is the number of the first send
	// after the last decrease.
	sent, roundStart uint64
	pausedUntil      time.Time
	decreases        int
	// rate is the paced rate in creates per second, 0 in slow start; next is
	// the earliest start of the next paced create; grown is when the rate
	// last grew.
	rate        float64
	next, grown time.Time
	rtt         time.Duration // smoothed round trip
	accepted    acceptedRate
	// waiters are the wake channels of engines holding requests for the
	// queue; a release signals each without blocking.
	waiters map[chan struct{}]struct{}

	path      string
	idleEl    *list.Element // in Adaptive.idle while the queue is idle
	idleSince time.Time
}

// queue returns the state of path, created at cap or raised to it. The
// caller uses it (and settles it after).
func (a *Adaptive) queue(path string, cap int) *queueLimit {
	if a.queues == nil {
		a.queues = map[string]*queueLimit{}
	}
	q := a.queues[path]
	if q == nil {
		a.forgetIdle(time.Now())
		q = &queueLimit{limit: float64(min(cap, initialLimit)), cap: cap, path: path}
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
	// start is when the create may start (its paced slot, or the grant).
	start time.Time
	// binding is true when the limit or the rate held the create back, or
	// nearly: only such creates make the limit or the rate grow.
	binding bool
}

// acquire lets one create to queue go, or says why not. A granted permit's
// start is when the create may start: now, or, once the queue is paced, a
// later slot the caller holds the create for (the permit counts as in flight
// from the grant). Refused, until is the end of a pause, or zero when the
// create must wait for a release instead. cap is the caller's MaxInFlight.
func (a *Adaptive) acquire(queue string, cap int, now time.Time) (p permit, ok bool, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap)
	defer a.settle(q)
	if now.Before(q.pausedUntil) {
		return permit{}, false, q.pausedUntil
	}
	p = permit{queue: queue, seq: q.sent, start: now}
	switch {
	case q.rate > 0:
		p.start, p.binding = q.slot(now, q.rate)
	case q.limit < float64(q.cap):
		if float64(q.inFlight+1) > q.limit {
			return permit{}, false, time.Time{}
		}
		p.binding = float64(q.inFlight+1) >= q.limit/2
		if q.rtt > 0 {
			// Spread the window over a round trip: a quota's bucket takes
			// an even rate that it would refuse in one burst.
			p.start, _ = q.slot(now, q.limit/q.rtt.Seconds())
		}
	}
	q.inFlight++
	q.sent++
	return p, true, time.Time{}
}

// slot returns the start of the next create paced at rate (creates per
// second) and whether it lies ahead of now, and books it.
func (q *queueLimit) slot(now time.Time, rate float64) (time.Time, bool) {
	slot := q.next
	if earliest := now.Add(-pacerSlack); slot.Before(earliest) {
		slot = earliest
	}
	q.next = slot.Add(time.Duration(float64(time.Second) / rate))
	if slot.After(now) {
		return slot, true
	}
	return now, false
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
	defer a.settle(q)
	q.inFlight--
	if o != outcomeOther && at.After(p.start) {
		sample := at.Sub(p.start)
		if q.rtt == 0 {
			q.rtt = sample
		} else {
			q.rtt += (sample - q.rtt) / 8
		}
	}
	switch o {
	case outcomeSucceeded:
		q.accepted.add(at)
		switch {
		case q.rate > 0 && p.binding:
			step := min(max(at.Sub(q.grown), 0), maxGrowthStep)
			q.rate += (q.rate*growthPerSecond + growthFloor) * step.Seconds()
			q.grown = at
		case q.rate > 0:
			q.grown = at
		case q.limit < float64(q.cap) && p.binding:
			q.limit = min(q.limit+slowStartGrowth, float64(q.cap))
		}
	case outcomeThrottled:
		if p.seq >= q.roundStart {
			q.decrease(at)
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

// decrease lowers the queue's rate after a rejection at time at, ending slow
// start when it is the first.
func (q *queueLimit) decrease(at time.Time) {
	if q.rate == 0 {
		accepted := q.accepted.perSecond(at, q.rtt)
		// The first rejection: pace at the rate the queue accepted. Nothing
		// accepted yet (another process took the quota first): start from
		// half of what was in flight over a round trip.
		rate := accepted
		if rate == 0 {
			rate = float64(q.inFlight+1) / 2 / max(q.rtt, time.Millisecond).Seconds()
		}
		q.rate = rate * setPoint
		q.limit = float64(q.cap)
		q.next = at
	} else {
		q.rate *= decreaseFactor
	}
	q.rate = max(q.rate, minRate)
	q.grown = at
	q.roundStart = q.sent
	q.decreases++
}

// acceptedRate counts the creates the queue accepted in recent slots of
// acceptedSlot each, to tell the rate the quota lets through.
type acceptedRate struct {
	slots [acceptedSlots]uint16 // 200 bytes a queue; a slot saturates at 65,535
	// last is the number of the slot counted last (time since the Unix epoch
	// divided by acceptedSlot); first is the time of the first count.
	last  int64
	first time.Time
}

const (
	acceptedSlot  = 10 * time.Millisecond
	acceptedSlots = 100 // one second of history
	// acceptedMinSpan and acceptedRounds: the accepted rate is measured over
	// the last acceptedRounds round trips, at least acceptedMinSpan and at
	// most the history.
	acceptedMinSpan = 50 * time.Millisecond
	acceptedRounds  = 2
)

func (r *acceptedRate) advance(at time.Time) int64 {
	n := at.UnixNano() / int64(acceptedSlot)
	if r.first.IsZero() {
		r.first, r.last = at, n
	}
	for i := r.last + 1; i <= n && i <= r.last+acceptedSlots; i++ {
		r.slots[i%acceptedSlots] = 0
	}
	if n > r.last {
		r.last = n
	}
	return n
}

func (r *acceptedRate) add(at time.Time) {
	n := r.advance(at)
	if r.slots[n%acceptedSlots] < math.MaxUint16 {
		r.slots[n%acceptedSlots]++
	}
}

// perSecond is the accepted rate over the last acceptedRounds round trips
// (bounded as above, and by the time since the first acceptance); 0 when
// nothing was accepted.
func (r *acceptedRate) perSecond(at time.Time, rtt time.Duration) float64 {
	if r.first.IsZero() {
		return 0
	}
	n := r.advance(at)
	span := min(max(acceptedRounds*rtt, acceptedMinSpan), acceptedSlots*acceptedSlot)
	span = min(span, max(at.Sub(r.first), acceptedSlot))
	k := int64((span + acceptedSlot - 1) / acceptedSlot)
	count := 0
	for i := n - k + 1; i <= n; i++ {
		count += int(r.slots[((i%acceptedSlots)+acceptedSlots)%acceptedSlots])
	}
	// The current slot is partly over: measure from the start of the oldest
	// slot counted to now.
	from := time.Unix(0, (n-k+1)*int64(acceptedSlot))
	return float64(count) / max(at.Sub(from), acceptedSlot).Seconds()
}

// watch makes releases for queue signal ch (buffered, capacity 1); unwatch
// stops it.
func (a *Adaptive) watch(queue string, cap int, ch chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap)
	defer a.settle(q)
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
		a.settle(q)
	}
}

// settle puts q on the idle list when nothing is in flight to it and no
// engine waits for it, and takes it off when either changes.
func (a *Adaptive) settle(q *queueLimit) {
	idle := q.inFlight == 0 && len(q.waiters) == 0
	switch {
	case idle && q.idleEl == nil:
		q.idleSince = time.Now()
		q.idleEl = a.idle.PushFront(q)
	case !idle && q.idleEl != nil:
		a.idle.Remove(q.idleEl)
		q.idleEl = nil
	}
}

// forgetIdle forgets the queues idle for IdleTTL, and the longest idle ones
// while a new queue would take the Adaptive beyond MaxQueues.
func (a *Adaptive) forgetIdle(now time.Time) {
	for el := a.idle.Back(); el != nil; el = a.idle.Back() {
		q := el.Value.(*queueLimit)
		expired := a.IdleTTL > 0 && now.Sub(q.idleSince) >= a.IdleTTL
		full := a.MaxQueues > 0 && len(a.queues) >= a.MaxQueues
		if !expired && !full {
			return
		}
		a.idle.Remove(el)
		delete(a.queues, q.path)
	}
}

// Len returns the number of queues the Adaptive keeps.
func (a *Adaptive) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queues)
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
	// reserved holds, per queue, the permit for a paced slot ahead that the
	// queue's first held request starts with when the slot comes.
	reserved map[string]permit
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
		now := time.Now()
		p, ok, until := ad.a.acquire(queue, e.opts.MaxInFlight, now)
		if ok && !p.start.After(now) {
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

// reserve keeps p, a permit for a paced slot ahead, for the first held
// request of queue, and wakes the engine at the slot.
func (ad *engineAdaptive[T]) reserve(queue string, p permit) {
	if ad.reserved == nil {
		ad.reserved = map[string]permit{}
	}
	ad.reserved[queue] = p
	ad.notePause(p.start)
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
			p, reserved := ad.reserved[queue]
			if !reserved {
				var ok bool
				var until time.Time
				if p, ok, until = ad.a.acquire(queue, e.opts.MaxInFlight, now); !ok {
					ad.notePause(until)
					break
				}
			}
			if p.start.After(now) {
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

// dropHeld forgets every held request (the engine has failed), giving back
// the permits of paced slots it held for them.
func (ad *engineAdaptive[T]) dropHeld() {
	for queue := range ad.held {
		ad.a.unwatch(queue, ad.wake)
	}
	for _, p := range ad.reserved {
		ad.a.release(p, outcomeOther, 0, time.Now())
	}
	ad.held, ad.reserved, ad.queues, ad.n, ad.pausedUntil = nil, nil, nil, 0, time.Time{}
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
