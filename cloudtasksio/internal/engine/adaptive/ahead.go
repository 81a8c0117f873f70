package adaptive

// Slow start's booked slots. Slow start spreads a round trip's creates over
// it, so a create it lets through may start at a slot a little ahead. Its
// engine holds the request until then, and the permit counts as in flight
// from the grant.
//
// An engine starts its held requests only inside its own Submit or Flush.
// Beam runs the DoFns of sibling steps (two Write steps fed by one
// PCollection, fused into one stage) one after the other on one goroutine.
// While one sibling waits in its Submit or Flush, the other is not called. A
// slot the other booked would keep a create in flight taken with nothing on
// the wire, and the waiting engine would wait for a release that never
// comes. So a booked slot not started within a horizon of its time stops
// counting against slow start's limit. A refusal while slots are booked says
// when the next one lapses.
//
// A lapsed slot started late puts one create over the limit. Each engine
// holds at most one booked slot per queue, so the queue goes over by at most
// one create per engine whose goroutine was held up past its slot.

import "time"

// book records p, granted with a start ahead of the grant, as a booked slot.
func (q *queueLimit) book(p *Permit) {
	if q.ahead == nil {
		q.ahead = map[uint64]time.Time{}
	}
	q.ahead[p.seq] = p.start
	p.booked = true
}

// unbook forgets p's booked slot: its create started, or it was given back.
func (q *queueLimit) unbook(p Permit) {
	if p.booked {
		delete(q.ahead, p.seq)
	}
}

// lapsed counts the booked slots whose create has not started within a
// horizon of the slot's time, and returns when the next of the others lapses
// (zero if none).
func (q *queueLimit) lapsed(now time.Time) (n int, next time.Time) {
	grace := q.horizon()
	for _, start := range q.ahead {
		end := start.Add(grace)
		if !end.After(now) {
			n++
			continue
		}
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return n, next
}

// Begin tells the Adaptive that the create of p started; a no-op unless p
// holds a booked slot.
func (a *Adaptive) Begin(p Permit) {
	if a == nil || !p.booked {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.queues[p.queue]; q != nil {
		q.unbook(p)
	}
}
