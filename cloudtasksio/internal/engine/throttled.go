package engine

import "time"

// This file holds the engine's throttled time (Engine.Throttled): the wall
// time during which it holds at least one request back under a quota, which
// the sink reports so that an autoscaler does not add workers that would only
// add rejections.
//
// A request is held under a quota while either
//   - adaptive concurrency holds it back and its queue is paced (its rate,
//     set by a RESOURCE_EXHAUSTED answer or by Options.StartRate, says wait)
//     or paused (a RetryInfo delay says wait), or
//   - it is parked after a RESOURCE_EXHAUSTED answer whose RetryInfo delay
//     set its retry later than the backoff would have.
//
// Slow start's limit is no quota: it is how a queue starts, throttled or not.
// Nor is the backoff of the transient budget, which UNAVAILABLE and
// DEADLINE_EXCEEDED share: it paces the engine's own retries. Both happen in
// jobs that no quota slows, and counting them would hold back an autoscaler
// for nothing. The time runs from the moment the engine holds the first such
// request until it lets the last one go, as seen inside Submit, Flush and
// Fail, the only calls in which the engine acts.

// throttleClock adds up the wall time during which the engine holds a request
// under a quota.
type throttleClock struct {
	on    bool
	since time.Time // when on: when the current spell began
	total time.Duration
}

// noteThrottled starts or stops the throttle clock as the engine starts or
// stops holding requests under a quota. Every call that may change what the
// engine holds ends with it.
func (e *Engine[T]) noteThrottled() {
	held := e.quotaParked > 0 || len(e.adaptive.quota) > 0
	c := &e.throttle
	if held == c.on {
		return
	}
	now := time.Now()
	if held {
		c.since = now
	} else {
		c.total += now.Sub(c.since)
	}
	c.on = held
}

// Throttled returns the engine's throttled time so far: how long, in wall
// time, it has held at least one request back under a quota (see the rule at
// the top of throttled.go). It is zero with adaptive concurrency off, which
// holds nothing back under a quota.
func (e *Engine[T]) Throttled() time.Duration {
	c := e.throttle
	if c.on {
		return c.total + time.Since(c.since)
	}
	return c.total
}

// noteQuota records whether queue, which has held requests, waits under a
// quota: paced by its rate, or paused by a RetryInfo delay.
func (ad *engineAdaptive[T]) noteQuota(queue string, now time.Time) {
	l := ad.a.Queue(queue)
	if l.Rate > 0 || now.Before(l.PausedUntil) {
		if ad.quota == nil {
			ad.quota = map[string]bool{}
		}
		ad.quota[queue] = true
	} else {
		delete(ad.quota, queue)
	}
}
