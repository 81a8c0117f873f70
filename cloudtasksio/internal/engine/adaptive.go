package engine

import (
	"container/list"
	"math"
	"sync"
	"time"
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
//     starts, or a pipeline that starts many processes at once, does not send a
//     whole cap's worth into a quota it knows nothing about; at a round trip
//     long enough that initialLimit is a slow rate, at initialRate times the
//     round trip once the first answer tells it. Every create that succeeds
//     while the limit was at least half used raises the limit by
//     slowStartGrowth (one), so the limit doubles every round trip while
//     creates succeed, to the cap (the largest MaxInFlight of the engines using
//     the queue), where it stops spreading creates over the round trip but
//     keeps bounding what all the engines of the process have in flight
//     together, growing on while that is used: sixty-four DoFn instances of a
//     cap of 1,000 each would otherwise have 64,000 creates in flight when the
//     first rejection of a deep bucket comes back. Below a round trip of
//     slowStartRound each success adds only its share of rtt/slowStartRound, so
//     the limit doubles about once per slowStartRound of time however short the
//     round trip: a quota's bucket hides the quota until it is empty, and at 5
//     ms a bucket of a tenth of a second lasts twenty round trips, in which
//     doubling every round trip would reach many times the quota before the
//     first rejection came back. A pipeline that is never throttled reaches the
//     cap within about log2(cap/initialLimit) round trips (or slowStartRounds)
//     of its first create to the queue and keeps it for the life of the
//     process.
//   - Paced. The first RESOURCE_EXHAUSTED answer ends slow start for good: a
//     quota is a rate, so from then on the process starts the queue's creates
//     at a rate, spaced evenly, instead of bounding how many are in flight (at
//     a 5 ms round trip, a quota of 1,000/s shared by eight processes is less
//     than one create in flight per process, which no concurrency limit can
//     express). The rate starts at the rate at which the queue accepted the
//     process's creates just before, a little below it (setPoint). A
//     RESOURCE_EXHAUSTED answer to a create started after the last decrease
//     lowers it, at most once per round trip however many creates of that round
//     are rejected, to the smaller of decreaseFactor times itself and setPoint
//     times the rate the queue accepted over the last two round trips (read
//     over at least acceptedMinCount acceptances, so a process with a small
//     share is not steered by two or three): after a burst, or when other
//     processes take most of the quota, the rate falls to what the queue takes
//     from this process in one or two round trips instead of ten percent per
//     round trip. While creates succeed and the rate is what holds them back,
//     it grows by growthPerSecond of itself (plus growthFloor) per second, and
//     that growth doubles with every growthDoubling without a decrease, up to
//     2^growthDoublings times and to at most maxGrowthPerRound per round trip:
//     just after a decrease the rate probes gently, near the quota it found; a
//     process left alone with a quota its peers stopped using (they finished,
//     or scaled down) grows into it within seconds instead of a minute.
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
	// initialRate is where slow start begins at a long round trip: once an
	// answer tells the round trip, the limit is at least initialRate times it
	// (20 in flight at 200 ms; below 40 ms initialLimit is more). At 200 ms,
	// 4 in flight are 20 creates per second, which take two seconds of
	// doubling to reach a quota of 1,000/s; from 20 they take 1.3 s, and eight
	// processes that start at once send 800/s, not a cap's worth each.
	initialRate = 100.0
	// decreaseFactor bounds each decrease of the rate from above.
	decreaseFactor = 0.9
	// setPoint is the share of the measured accepted rate the rate is set to
	// at a decrease: a little below it, so the queue's bucket refills.
	setPoint = 0.97
	// growthPerSecond and growthFloor are how fast the rate grows while it is
	// what holds creates back and they succeed, just after a decrease:
	// rate*growthPerSecond + growthFloor creates per second, per second. The
	// share growthPerSecond doubles every growthDoubling without a decrease,
	// growthDoublings times at most (to 160% of the rate per second). Measured
	// with a doubling every second (adaptive_sim_test.go): eight processes of
	// a 20,000-task job held 88 to 92% of the quota instead of 94 to 97%.
	growthPerSecond = 0.05
	growthFloor     = 1.0
	growthDoubling  = 500 * time.Millisecond
	growthDoublings = 5
	// maxGrowthPerRound bounds that growth per round trip (to 15% per second
	// at 200 ms): a rejection comes back a round trip after the rate passed
	// the quota, so at long round trips a fast growth runs far past it.
	// Measured with 0.1 (adaptive_sim_test.go): one process at 200 ms made
	// 0.044-0.058 rejected attempts per task over 20,000 tasks; with 0.03,
	// 0.035.
	maxGrowthPerRound = 0.03
	// slowStartGrowth is what each success adds to slow start's limit (the
	// limit grows by this share of itself per round trip): the creates of
	// the round trip in which the first rejections come back are sent at up
	// to 1+slowStartGrowth times the rate that was accepted. Measured with
	// 0.5 and 1.5 too (adaptive_sim_test.go): 0.5 rejects a little less and
	// starts half again as slowly; 1.5 starts 15% faster at 200 ms and
	// rejects up to a third more.
	slowStartGrowth = 1.0
	// slowStartRound is the shortest time in which slow start's limit may
	// double: below it a success adds rtt/slowStartRound of slowStartGrowth.
	slowStartRound = 25 * time.Millisecond
	// minHorizon is the shortest time ahead for which a paced queue books
	// slots (queueLimit.horizon).
	minHorizon = 20 * time.Millisecond
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
	// Limit is the current concurrency limit as one engine sees it, between 1
	// and Cap: in slow start the limit itself, at most Cap; once paced the
	// creates the rate keeps in flight at the measured round trip (Rate times
	// RTT, at least 1).
	Limit float64
	// Cap is the largest MaxInFlight of the engines that used the queue. Slow
	// start paces its creates over the round trip up to it, and from it on
	// starts them at once.
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
	limit := min(q.slowStartLimit(), float64(q.cap))
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
	decreasedAt time.Time
	rtt         time.Duration // smoothed round trip
	// boundAt is when the rate last held a create back (a binding paced
	// permit): only then does the accepted rate tell what the quota lets
	// through rather than what the process had to send.
	boundAt  time.Time
	accepted acceptedRate
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
			q.limit = max(q.limit, float64(cap))
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
		// Book no slot further ahead than the horizon: a slot booked is spaced at
		// the rate of the moment, and a decrease cannot move it.
		if ahead := q.next.Sub(now); ahead > q.horizon() {
			return permit{}, false, q.next.Add(-q.horizon())
		}
		p.start, p.binding = q.slot(now, q.rate)
		if p.binding {
			q.boundAt = now
		}
	default:
		limit := q.slowStartLimit()
		if float64(q.inFlight+1) > limit {
			return permit{}, false, time.Time{}
		}
		p.binding = float64(q.inFlight+1) >= limit/2
		if q.rtt > 0 && limit < float64(q.cap) {
			// Spread the window over a round trip: a quota's bucket takes
			// an even rate that it would refuse in one burst.
			p.start, _ = q.slot(now, limit/q.rtt.Seconds())
		}
	}
	q.inFlight++
	q.sent++
	return p, true, time.Time{}
}

// slowStartLimit is what slow start lets the process have in flight: its
// limit, or at a round trip long enough that the limit is a slow rate,
// initialRate times the round trip. The floor follows the smoothed round trip
// and is never stored in the limit: a slow first answer (a cold connection, a
// token fetch) raises it only while the round trip it measured lasts.
func (q *queueLimit) slowStartLimit() float64 {
	return max(q.limit, initialRate*q.rtt.Seconds())
}

// horizon is how far ahead of now a paced queue books slots: a round trip,
// at least minHorizon. Every DoFn instance of a process holds up to one
// booked slot per queue; without a horizon, sixty-four instances sharing a
// rate of 125/s would book half a second ahead at the rate of the moment,
// and a decrease would reach the queue only after that half second.
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
			quiet := min(max(at.Sub(q.decreasedAt), 0), growthDoublings*growthDoubling)
			g := growthPerSecond * math.Exp2(quiet.Seconds()/growthDoubling.Seconds())
			if q.rtt > 0 {
				g = max(growthPerSecond, min(g, maxGrowthPerRound/q.rtt.Seconds()))
			}
			q.rate += (q.rate*g + growthFloor) * step.Seconds()
			q.grown = at
		case q.rate > 0:
			q.grown = at
		default:
			if p.binding {
				grow := slowStartGrowth
				if q.rtt > 0 && q.rtt < slowStartRound {
					grow *= q.rtt.Seconds() / slowStartRound.Seconds()
				}
				q.limit += grow
			}
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
		q.next = at
	} else {
		q.rate *= decreaseFactor
		// The accepted rate says what the quota lets through only if the rate
		// held creates back lately; otherwise it is what the process had to
		// send, and a quiet process must not fall to it.
		recent := max(acceptedRounds*q.rtt, acceptedMinSpan)
		if !q.boundAt.IsZero() && at.Sub(q.boundAt) <= recent {
			if accepted := q.accepted.perSecond(at, q.rtt); accepted > 0 {
				q.rate = min(q.rate, accepted*setPoint)
			}
		}
	}
	q.rate = max(q.rate, minRate)
	q.grown, q.decreasedAt = at, at
	q.roundStart = q.sent
	q.decreases++
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
