package adaptive

import "time"

// QueueLimit is a snapshot of one queue's adaptive state.
type QueueLimit struct {
	// Limit is the current concurrency limit as one engine sees it, from 1
	// (one create may always be in flight) to Cap. In slow start it is the
	// limit slow start grew plus its floor, initialRate times the round
	// trip. Once paced, it is what the rate keeps in flight at the measured
	// round trip, Rate times RTT.
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
	// start. It is 0 in slow start, until slow start ends; a queue started at
	// a start rate has one from the start.
	Rate float64
	// RTT is the smoothed round trip of the queue's creates; 0 before the
	// first answer.
	RTT time.Duration
	// Unit is the rate, in creates per second, that the paced rate's growth
	// after a decrease is a share of; 0 in slow start.
	Unit float64
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
	limit := max(1, min(q.slowStartLimit(time.Now()), float64(q.cap)))
	if q.rate > 0 {
		limit = min(float64(q.cap), max(1, q.rate*q.rtt.Seconds()))
	}
	return QueueLimit{Limit: limit, Cap: q.cap, InFlight: q.inFlight, PausedUntil: q.pausedUntil,
		Decreases: q.decreases, Rate: q.rate, RTT: q.rtt, Unit: q.unit}
}
