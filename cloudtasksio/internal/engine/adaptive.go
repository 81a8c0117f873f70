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
// goes through two phases (a queue given a start rate skips the first, see
// the third point):
//
//   - Slow start. A queue no create has been rejected for starts with one
//     create in flight, not with the cap: a worker process that starts, or a
//     pipeline that starts many processes at once, does not send a whole cap's
//     worth into a quota it knows nothing about. On top of the limit slow
//     start grows from initialLimit (zero), it lets initialRate creates a
//     second through: initialRate times the round trip in flight once an
//     answer tells the round trip, and before that initialRate times the time
//     the first unanswered create has waited, up to maxUnanswered (the round
//     trip is at least that long), so a long round trip does not start at one
//     create per round trip, and a short one does not start at one create in
//     flight, 200 creates a second at 5 ms. One create may always be in
//     flight; below one, the limit paces it over more than a round trip.
//     Every create that succeeds
//     while the limit was at least half used raises the limit by
//     slowStartGrowth (one), and the creates of a round trip go out at 1 +
//     slowStartGrowth times the limit's rate, so the limit doubles every round
//     trip while creates succeed, to the cap (the largest MaxInFlight of the
//     engines using the queue), where it stops spreading creates over the round
//     trip but keeps bounding what all the engines of the process have in
//     flight together, growing on while that is used: sixty-four DoFn instances
//     of a cap of 1,000 each would otherwise have 64,000 creates in flight when
//     the first rejection of a deep bucket comes back. Below a round trip of
//     slowStartRound each success adds only its share of rtt/slowStartRound, so
//     the limit doubles about once per slowStartRound of time however short the
//     round trip: a quota's bucket hides the quota until it is empty, and at 5
//     ms a bucket of a tenth of a second lasts twenty round trips, in which
//     doubling every round trip would reach many times the quota before the
//     first rejection came back. A pipeline that is never throttled reaches the
//     cap within about log2(cap) round trips (or slowStartRounds) of its first
//     create to the queue and keeps it for the life of the process.
//   - Paced. RESOURCE_EXHAUSTED answers that are clearly a quota's (more than
//     a steady share of noise, adaptive_spell.go) end slow start: a
//     quota is a rate, so from then on the process starts the queue's creates
//     at a rate, spaced evenly, instead of bounding how many are in flight (at
//     a 5 ms round trip, a quota of 1,000/s shared by eight processes is less
//     than one create in flight per process, which no concurrency limit can
//     express). The rate starts at the rate at which the queue accepted the
//     process's creates just before, over at least firstReadSpan (the bucket
//     that hid the quota gave its tokens on top of it), a little below it
//     (setPoint). A
//     RESOURCE_EXHAUSTED answer to a create started after the last decrease
//     lowers it, at most once per round trip however many creates of that round
//     are rejected, to the smaller of decreaseFactor times itself and setPoint
//     times the rate the queue accepted over the last two round trips since
//     the first rejection (read over at least acceptedMinCount acceptances, so
//     a process with a small share is not steered by two or three; before the
//     first rejection the queue's bucket was emptying, and what it accepted
//     then says nothing of the quota): after a burst, or when other processes
//     take most of the quota, the rate falls to what the queue takes from this
//     process in one or two round trips instead of ten percent per round trip.
//     While creates succeed and the rate is what holds them back, it grows by
//     growthPerSecond of the rate the first rejection set (or the start rate,
//     below), or of twice the
//     rate if that is less (plus growthFloor), per second: by the same creates
//     per second for every process that started with the same share, whatever
//     its rate is now, so that a process left behind by its decreases gains on
//     the others instead of keeping a smaller share for good (growing by a
//     share of its own rate, it would finish its work last while the others'
//     share stood unused), and by at most twice as much as its rate's share
//     for a process that paced the queue alone before others joined. That growth
//     doubles with every growthDoubling without a decrease, up to
//     2^growthDoublings times and to at most maxGrowthPerRound per round trip:
//     just after a decrease the rate probes gently, near the quota it found.
//     After growthDoublings*growthDoubling without a decrease the rate grows by
//     a share of itself, if that is more: a process left alone with a quota
//     its peers stopped using (they finished, or scaled down) grows into it
//     within seconds instead of a minute, and the decrease that ends such a
//     spell sets the rate growth is a share of anew. Once the rate has then
//     also grown probeMargin past the rate the queue last refused, the quota
//     has room it had not then, and the rate probes for it: it grows by a
//     share of itself per round trip that doubles every round trip, up to
//     probeGrowth (probe). At 200 ms a process left alone with the quota eight
//     shared takes it up in about four seconds instead of thirteen.
//     A decrease a few round trips after the last, when most answers since
//     were rejections (more rejections than acceptances, and at least
//     stormMinRejected rejections), sets the rate a little below what the
//     queue accepted since, but to no less than half the rate before it: just
//     after the first rejection of processes that started together, each
//     paces at what the queue accepted while its bucket emptied, several times
//     its share, and a tenth per round trip would take many round trips of
//     rejections to reach it.
//   - A start rate (Options.StartRate) skips slow start: a queue first used
//     by an engine that has one starts paced at it, as if a rejection had just
//     set it there (startPaced). The caller knows its share of the quota (the
//     quota divided by the processes that share it) and so spends neither
//     slow start's ramp, which at 200 ms takes over a second to reach a
//     quota of 1,000/s, nor the burst of rejections that comes when the
//     processes of a job in slow start together empty the queue's bucket. A
//     start rate above the share costs rejections until the decreases bring
//     it down; one below it costs throughput until growth and then the probe
//     take the rate past it, a few seconds. The start rate also bounds the
//     decreases (softenDecrease): one rejection since the last decrease
//     takes the rate no further than loneRejectionFactor below the smaller
//     of the rate and the start rate, more no further than decreaseFactor
//     below it, because a process told its share that is refused there
//     learns only that some peers grew past theirs or that the shares add up
//     to more than the quota, and every process that shares the quota should
//     come down alike. After shareStormLimit decreases in a row whose rounds
//     were mostly rejections the start rate is given up: it was far too
//     high. And near the start rate (from it to shareHoldBand above it)
//     the rate holds until a quiet spell has passed: it grows by
//     growthFloor a second only until growthDoublings*growthDoubling have
//     gone without a decrease (holdsShare), since the shares add up to the
//     quota and growth past one finds room only where peers left it; then it
//     grows from the gentle pace of a queue just after a decrease. A start
//     rate below the share therefore costs that spell before growth takes the
//     rate past it.
//   - A google.rpc.RetryInfo detail in a RESOURCE_EXHAUSTED answer pauses the
//     queue's creates until its delay has passed, and the rejected request
//     waits at least that long before its next attempt.
//
// The state lives in an Adaptive; the sink keeps one per client setting and
// worker process, so every engine, bundle and DoFn instance of the process
// that writes to a queue shares that queue's limit and rate: they act as one
// client of the quota, whatever their number.

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

// queueLimit is the adaptive state of one queue, guarded by Adaptive.mu.
type queueLimit struct {
	// control is what decreases change and an undone spell restores
	// (adaptive_spell.go).
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
	// startedPaced is true for a queue started at Options.StartRate.
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
	// permit): only then does the accepted rate tell what the quota lets
	// through rather than what the process had to send.
	boundAt  time.Time
	accepted acceptedRate
	// startWindow is slow start's window of answers since a refusal, spell
	// the current spell of decreases (adaptive_spell.go).
	startWindow round
	spell       spell
	// exitRate is the paced rate slow start's end set; 0 in slow start and
	// for a queue started at Options.StartRate.
	exitRate float64
	// ahead are slow start's booked slots, by permit seq (adaptive_ahead.go).
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
	// unit is the rate paced growth is a share of (release); pacedAt is
	// when the first decrease ended slow start, or the queue started paced
	// at Options.StartRate.
	unit    float64
	pacedAt time.Time
	// ceiling is the rate the queue last refused: the rate the last
	// decrease lowered, or the accepted rate the first rejection read; for a
	// queue started at Options.StartRate, until its first decrease, that rate.
	ceiling float64
	// probeAge is the growth time credited to the probe since the last
	// decrease (queueLimit.probe).
	probeAge time.Duration
	// stormSpell is true from a storm decrease (decrease) until a decrease
	// that is not one.
	stormSpell bool
	// share is the start rate of a queue started at Options.StartRate, 0 for
	// one started in slow start and once the answers said it was far too
	// high; shareStorms counts the decreases in a row after rounds of mostly
	// rejections (softenDecrease).
	share       float64
	shareStorms int
	// heldAt is the last success whose growth the hold near the share held
	// back (holdsShare); growth past the hold doubles from there.
	heldAt time.Time
}

// queue returns the state of path, created at cap or raised to it; a state
// created with a startRate above 0 starts paced at that rate at now. The
// caller uses it (and settles it after).
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

// permit is one create that acquire let through, to be given back to release.
type permit struct {
	queue string
	seq   uint64
	// start is when the create may start (its paced slot, or the grant).
	start time.Time
	// binding is true when the limit or the rate held the create back, or
	// nearly: only such creates make the limit or the rate grow.
	binding bool
	// booked is true for a slow start slot ahead of the grant (adaptive_ahead.go).
	booked bool
}

// acquire lets one create to queue go, or says why not. A granted permit's
// start is when the create may start: now, or, once the queue is paced, a
// later slot the caller holds the create for (the permit counts as in flight
// from the grant). Refused, until is when to ask again: the end of a pause,
// the time a paced slot comes within the horizon, or the time slow start's
// floor lets one more create go while none has been answered; zero when the
// create must wait for a release instead. cap is the caller's MaxInFlight,
// startRate its Options.StartRate.
func (a *Adaptive) acquire(queue string, cap int, startRate float64, now time.Time) (p permit, ok bool, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.queue(queue, cap, startRate, now)
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
			return permit{}, false, until
		}
		p.binding = float64(inFlight+1) >= limit/2
		if q.rtt > 0 && limit < float64(q.cap) {
			// Spread the window over a round trip: a quota's bucket takes
			// an even rate that it would refuse in one burst. The window
			// goes out as much faster than its rate as a round trip's
			// successes grow it, so that the limit can double every round
			// trip: at its rate, the creates of one round trip would wait
			// for the successes of the one before, and it would grow only
			// by about 1.6 a round trip.
			// No further ahead than a round trip, what the window
			// spreads over: slots of creates cancelled before they
			// went, or booked at a longer round trip, stay booked.
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
	q.unbook(p)
	q.answered = latest(q.answered, at)
	if o != outcomeOther && at.After(p.start) {
		sample := at.Sub(p.start)
		if q.rtt == 0 {
			q.rtt = sample
		} else {
			q.rtt += (sample - q.rtt) / 8
		}
	}
	if q.rtt == 0 && q.inFlight == 0 {
		// Every create slow start sent went unanswered (cancelled, or
		// failed for a reason that measures no round trip): the next one
		// starts the wait afresh, not a wait that began long ago.
		q.started = time.Time{}
	}
	post := p.seq >= q.roundStart
	switch o {
	case outcomeSucceeded:
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
	case outcomeThrottled:
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
