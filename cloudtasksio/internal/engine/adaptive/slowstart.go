package adaptive

// The slow start phase (doc.go): what a queue lets through before slow start
// ends, and how a success grows it.

import "time"

// slowStartLimit is what slow start lets the process have in flight: the
// limit it grew, plus a floor of initialRate times the round trip (roundTrip).
// The floor follows the smoothed round trip and is not stored in the limit.
// A slow first answer (a cold connection, a token fetch) thus raises it only
// while the round trip it measured lasts. Before any answer it adds at most
// maxUnanswered's worth.
func (q *queueLimit) slowStartLimit(now time.Time) float64 {
	return q.limit + initialRate*q.roundTrip(now).Seconds()
}

// roundTrip is the smoothed round trip. Before any answer it is how long the
// first unanswered create has waited, at most maxUnanswered: the round trip
// is at least that long. Slow start's floor thus lets initialRate creates a
// second go from the first create on.
func (q *queueLimit) roundTrip(now time.Time) time.Duration {
	if q.rtt > 0 || q.started.IsZero() {
		return q.rtt
	}
	return min(max(now.Sub(q.started), 0), maxUnanswered)
}

// unansweredGrowth is when slow start's floor lets one more create go while
// no answer has come back yet; zero once one has (a release then lets it).
func (q *queueLimit) unansweredGrowth() time.Time {
	if q.rtt > 0 || q.started.IsZero() {
		return time.Time{}
	}
	need := (float64(q.inFlight+1) - q.limit) / initialRate // seconds
	if need > maxUnanswered.Seconds() {
		return time.Time{}
	}
	// A microsecond late, so that the floor, a float, has surely grown enough
	// by then.
	return q.started.Add(time.Duration(need*float64(time.Second)) + time.Microsecond)
}

// slowStartStep is what a success adds to slow start's limit:
// slowStartGrowth, or below a round trip of slowStartRound its share
// rtt/slowStartRound of it.
func (q *queueLimit) slowStartStep() float64 {
	if q.rtt > 0 && q.rtt < slowStartRound {
		return slowStartGrowth * q.rtt.Seconds() / slowStartRound.Seconds()
	}
	return slowStartGrowth
}
