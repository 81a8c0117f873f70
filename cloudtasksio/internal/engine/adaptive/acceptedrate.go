package adaptive

// The accepted rate of a queue: the creates it accepted from this process in
// recent slots of time. A decrease reads it to tell the rate the quota lets
// through.

import (
	"math"
	"time"
)

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
	// acceptedMinSpan, acceptedRounds and acceptedMinCount: the accepted rate
	// is measured over the last acceptedRounds round trips, at least
	// acceptedMinSpan, longer until it holds acceptedMinCount acceptances, and
	// at most the history.
	acceptedMinSpan  = 20 * time.Millisecond
	acceptedRounds   = 2
	acceptedMinCount = 16
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

// perSecond is the accepted rate over the last acceptedRounds round trips, at least
// acceptedMinSpan. It reads further back while that holds fewer than acceptedMinCount
// acceptances: a process with a small share of a quota sees few per round trip, and a rate
// read from two or three is noise. It reads no further than the history and the first
// acceptance, and is 0 when nothing was accepted.
func (r *acceptedRate) perSecond(at time.Time, rtt time.Duration) float64 {
	return r.perSecondSince(at, rtt, time.Time{})
}

// perSecondSince is perSecond read over acceptances counted after the slot of since (zero:
// any). It is 0 when since lies within the history and fewer than acceptedMinCount
// acceptances came after it. What the queue accepted before since, from a bucket that was
// emptying, does not say what it accepts now.
func (r *acceptedRate) perSecondSince(at time.Time, rtt time.Duration, since time.Time) float64 {
	rate, _ := r.read(at, rtt, since)
	return rate
}

// read is perSecondSince and the number of acceptances it was read from.
func (r *acceptedRate) read(at time.Time, rtt time.Duration, since time.Time) (float64, int) {
	if r.first.IsZero() {
		return 0, 0
	}
	n := r.advance(at)
	span := min(max(acceptedRounds*rtt, acceptedMinSpan), acceptedSlots*acceptedSlot)
	limit := min(max(at.Sub(r.first), acceptedSlot), acceptedSlots*acceptedSlot)
	span = min(span, limit)
	k := int64((span + acceptedSlot - 1) / acceptedSlot)
	// Up to the slot of the first acceptance, which the time since it can
	// miss when the two lie on either side of a slot's edge.
	maxK := min(n-r.first.UnixNano()/int64(acceptedSlot)+1, acceptedSlots)
	k = min(k, maxK)
	// since cuts the span when it lies within the history: then fewer than
	// acceptedMinCount acceptances after it read as unknown, even when the
	// first acceptance came later still.
	cut := !since.IsZero() && at.Sub(since) < acceptedSlots*acceptedSlot
	if cut {
		// The slot of since counts acceptances before it too: start after it.
		maxK = min(maxK, max(n-since.UnixNano()/int64(acceptedSlot), 1))
		k = min(k, maxK)
	}
	count := 0
	for i := n - k + 1; i <= n; i++ {
		count += int(r.slots[((i%acceptedSlots)+acceptedSlots)%acceptedSlots])
	}
	for ; count < acceptedMinCount && k < maxK; k++ {
		i := n - k
		count += int(r.slots[((i%acceptedSlots)+acceptedSlots)%acceptedSlots])
	}
	if cut && count < acceptedMinCount {
		return 0, count
	}
	// The current slot is partly over: measure from the start of the oldest
	// slot counted to now.
	from := time.Unix(0, (n-k+1)*int64(acceptedSlot))
	return float64(count) / max(at.Sub(from), acceptedSlot).Seconds(), count
}
