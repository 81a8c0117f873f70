package adaptive

import (
	"container/list"
	"math"
	"sync"
	"time"
)

// MaxRetryDelay bounds the RetryInfo delay the engine honours, so that a
// malformed answer cannot stop a queue's creates for longer.
const MaxRetryDelay = 5 * time.Minute

// Adaptive holds the adaptive concurrency state of one client setting, one
// entry per queue. It is safe for concurrent use. Give the same *Adaptive to
// the Options of every engine that should share the limits.
//
// A queue with nothing in flight and no engine waiting for it is idle.
// IdleTTL and MaxQueues bound the queues kept, for a process that writes to
// very many. A queue in use is never forgotten. A forgotten queue starts
// afresh on its next create, as if never used. Set both before the first
// engine uses the Adaptive.
type Adaptive struct {
	// IdleTTL is how long a queue may stay idle before it is forgotten; zero
	// keeps idle queues.
	IdleTTL time.Duration
	// MaxQueues is the most queues kept: a new queue beyond it makes the
	// Adaptive forget the queue idle the longest. Zero keeps every queue.
	MaxQueues int

	mu     sync.Mutex
	queues map[string]*queueLimit
	idle   list.List // of *queueLimit: the idle queues, most recently idle first
}

// New returns an Adaptive of its own, sharing nothing with any other.
func New() *Adaptive { return &Adaptive{} }

// queueLimit is the adaptive state of one queue, guarded by Adaptive.mu.
type queueLimit struct {
	// control is what decreases change and an undone spell restores
	// (spell.go).
	control
	cap      int
	inFlight int
	// sent numbers the sends; roundStart is the number of the first send
	// after the last decrease.
	sent, roundStart uint64
	pausedUntil      time.Time
	decreases        int
	// next is the earliest start of the next paced create.
	next time.Time
	rtt  time.Duration // smoothed round trip
	// roundAccepted and roundRejected count the answers that came back
	// since the last decrease; postAccepted and postRejected only those to
	// creates sent after it.
	roundAccepted, roundRejected int
	postAccepted, postRejected   int
	// startedPaced is true for a queue started at a start rate.
	startedPaced bool
	// busySince is when slow start's current busy spell began: its first
	// create after more than a round trip with nothing in flight; answered
	// is when the last answer came back.
	busySince, answered time.Time
	// started is when slow start sent its first create; zero again when
	// every create it sent went unanswered (no round trip measured) and none
	// is in flight.
	started time.Time
	// boundAt is when the rate last held a create back (a binding paced
	// permit). Only then does the accepted rate tell what the quota lets
	// through, not what the process had to send.
	boundAt  time.Time
	accepted acceptedRate
	// startWindow is slow start's window of answers since a refusal, spell
	// the current spell of decreases (spell.go).
	startWindow round
	spell       spell
	// exitRate is the paced rate slow start's end set; 0 in slow start and
	// for a queue started at a start rate.
	exitRate float64
	// ahead are slow start's booked slots, by permit seq (ahead.go).
	ahead map[uint64]time.Time
	// waiters are the wake channels of engines holding requests for the
	// queue; a release signals each without blocking.
	waiters map[chan struct{}]struct{}

	path      string
	idleEl    *list.Element // in Adaptive.idle while the queue is idle
	idleSince time.Time
}

// control is the part of a queue's state that steers its creates: slow
// start's limit, or the paced rate and what its growth and decreases read.
type control struct {
	limit float64 // slow start's concurrency limit
	// rate is the paced rate in creates per second, 0 in slow start; grown
	// is when the rate last grew.
	rate        float64
	grown       time.Time
	decreasedAt time.Time
	// unit is the rate paced growth is a share of (grow); pacedAt is when
	// the first decrease ended slow start, or the queue started paced at a
	// start rate.
	unit    float64
	pacedAt time.Time
	// ceiling is the rate the queue last refused: the rate the last
	// decrease lowered, or the accepted rate the first refusal read. A queue
	// started at a start rate has that rate until its first decrease.
	ceiling float64
	// probeAge is the growth time credited to the probe since the last
	// decrease (queueLimit.probe).
	probeAge time.Duration
	// stormSpell is true from a storm decrease (decrease) until a decrease
	// that is not one.
	stormSpell bool
	// share is the start rate of a queue started at one. It is 0 for a queue
	// started in slow start, and once the answers said it was far too high.
	// shareStorms counts the decreases in a row after rounds of mostly
	// refusals (softenDecrease).
	share       float64
	shareStorms int
	// heldAt is the last success whose growth the hold near the share held
	// back (holdsShare); growth past the hold doubles from there.
	heldAt time.Time
}

// queue returns the state of path, created at cap or raised to it. A state
// created with a startRate above 0 starts paced at that rate at now. The
// caller uses it, and settles it after.
func (a *Adaptive) queue(path string, cap int, startRate float64, now time.Time) *queueLimit {
	if a.queues == nil {
		a.queues = map[string]*queueLimit{}
	}
	q := a.queues[path]
	if q == nil {
		a.forgetIdle(time.Now())
		q = &queueLimit{control: control{limit: float64(min(cap, initialLimit))}, cap: cap, path: path}
		if startRate > 0 && !math.IsInf(startRate, 1) {
			q.startPaced(startRate, now)
		}
		a.queues[path] = q
	}
	if cap > q.cap {
		// At its cap (one create may always be in flight), the limit
		// follows the cap up.
		if max(q.limit, 1) >= float64(q.cap) {
			q.limit = max(q.limit, float64(cap))
		}
		q.cap = cap
	}
	return q
}

// Permit is one create that Acquire let through, to be given back to Release.
type Permit struct {
	queue string
	seq   uint64
	// start is when the create may start (its paced slot, or the grant).
	start time.Time
	// binding is true when the limit or the rate held the create back, or
	// nearly: only such creates make the limit or the rate grow.
	binding bool
	// booked is true for a slow start slot ahead of the grant (ahead.go).
	booked bool
}

// Start is when the create may start: at the grant, or at a paced slot
// ahead of it that the caller holds the create for.
func (p Permit) Start() time.Time { return p.start }

// Booked reports whether p holds a slow start slot ahead of the grant; the
// caller calls Begin when the create starts.
func (p Permit) Booked() bool { return p.booked }

// Acquire lets one create to queue go at now, or says why not. cap is the
// caller's MaxInFlight, startRate its Options.StartRate.
//
// A granted permit's Start is when the create may start: now, or a later
// slot that the caller holds the create for. The permit counts as in flight
// from the grant. A refused create gets until, the time to ask again. That
// is the end of a pause, the time a paced slot comes within the horizon, or
// the time slow start's floor lets one more create go before any answer. It
// is zero when the create must wait for a Release instead.
func (a *Adaptive) Acquire(queue string, cap int, startRate float64, now time.Time) (p Permit, ok bool, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap, startRate, now)
	defer a.settle(q)
	if now.Before(q.pausedUntil) {
		return Permit{}, false, q.pausedUntil
	}
	p = Permit{queue: queue, seq: q.sent, start: now}
	switch {
	case q.rate > 0:
		// Book no slot further ahead than the horizon: a booked slot keeps
		// the rate of the moment, and a decrease cannot move it.
		if ahead := q.next.Sub(now); ahead > q.horizon() {
			return Permit{}, false, q.next.Add(-q.horizon())
		}
		p.start, p.binding = q.slot(now, q.rate)
		if p.binding {
			q.bindStart(now)
			q.boundAt = now
		}
	default:
		if q.started.IsZero() {
			q.started = now
		}
		if q.inFlight == 0 && (q.busySince.IsZero() || now.Sub(q.answered) > max(q.rtt, minHorizon)) {
			// Nothing in flight for over a round trip: a busy spell starts.
			q.busySince = now
		}
		limit := q.slowStartLimit(now)
		inFlight, lapseAt := q.inFlight, time.Time{}
		if len(q.ahead) > 0 {
			var n int
			n, lapseAt = q.lapsed(now)
			inFlight -= n
		}
		// One create may always be in flight: a limit below one paces a
		// single create over more than a round trip.
		if inFlight > 0 && float64(inFlight+1) > limit {
			until := q.unansweredGrowth()
			if !lapseAt.IsZero() && (until.IsZero() || lapseAt.Before(until)) {
				until = lapseAt
			}
			return Permit{}, false, until
		}
		p.binding = float64(inFlight+1) >= limit/2
		if q.rtt > 0 && limit < float64(q.cap) {
			// Spread the window over a round trip: a quota's bucket takes
			// an even rate that it would refuse as one burst. The window
			// goes out faster than its rate by what a round trip's
			// successes add to it, so the limit can double every round
			// trip. At its own rate, each round trip's creates would wait
			// for the successes of the one before, and the limit would
			// grow by less than twice a round trip.
			//
			// Book no further ahead than the round trip the window spreads
			// over. Slots of creates cancelled before they went, or booked
			// at a longer round trip, stay booked.
			if late := now.Add(q.rtt); q.next.After(late) {
				q.next = late
			}
			p.start, _ = q.slot(now, (1+q.slowStartStep())*limit/q.rtt.Seconds())
			if p.start.After(now) {
				q.book(&p)
			}
		}
	}
	q.inFlight++
	q.sent++
	return p, true, time.Time{}
}

// horizon is how far ahead of now a paced queue books slots: a round trip,
// at least minHorizon. Every DoFn instance of a process holds up to one
// booked slot per queue. Without a horizon, many instances sharing a low rate
// would book far ahead at the rate of the moment. A decrease would then
// reach the queue only once those slots had passed.
func (q *queueLimit) horizon() time.Duration { return max(q.rtt, minHorizon) }

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

// Outcome is what the answer to a create tells the controller.
type Outcome int

const (
	Other     Outcome = iota // a failure that says nothing about the quota, or a cancellation
	Succeeded                // created, or ALREADY_EXISTS for a named task
	Throttled                // RESOURCE_EXHAUSTED
)

// Release gives p back with the outcome of its create, at the time at that
// the answer arrived. delay is the RetryInfo delay of a Throttled answer, 0
// for none. Release wakes the engines that watch the queue.
func (a *Adaptive) Release(p Permit, o Outcome, delay time.Duration, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queues[p.queue]
	defer a.settle(q)
	q.inFlight--
	q.unbook(p)
	q.answered = latest(q.answered, at)
	if o != Other && at.After(p.start) {
		sample := at.Sub(p.start)
		if q.rtt == 0 {
			q.rtt = sample
		} else {
			q.rtt += (sample - q.rtt) / 8
		}
	}
	if q.rtt == 0 && q.inFlight == 0 {
		// Every create slow start sent went unanswered: cancelled, or failed
		// for a reason that measures no round trip. The next one starts the
		// wait afresh, not a wait that began long ago.
		q.started = time.Time{}
	}
	post := p.seq >= q.roundStart
	switch o {
	case Succeeded:
		q.accepted.add(at)
		q.roundAccepted++
		q.acceptedInSpell(at)
		q.startAnswer(false)
		if post {
			q.postAccepted++
		}
		switch {
		case q.rate > 0 && p.binding:
			q.grow(at)
		case q.rate > 0:
			q.grown = latest(q.grown, at)
		default:
			if p.binding && !q.startSuspect() {
				q.limit += q.slowStartStep()
			}
		}
	case Throttled:
		q.roundRejected++
		q.rejectedInSpell()
		q.startAnswer(true)
		if post {
			q.postRejected++
		}
		if post && q.material(at) {
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
