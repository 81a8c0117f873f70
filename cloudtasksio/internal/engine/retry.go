package engine

import (
	"fmt"
	"math"
	"time"
)

// This file holds the retry schedule: a Budget (its jittered exponential
// backoff and its checks) and the heap of requests parked until their retry
// comes due.

// Budget is the retry schedule for one class of retryable failure. Each
// request counts its failures per budget.
type Budget struct {
	// Initial and Max bound the backoff: after the n-th failure the request
	// waits min(Initial*2^(n-1), Max) times a jitter factor in [0.75, 1.25),
	// and never less than 1ms. Initial must be > 0 and Max >= Initial.
	Initial, Max time.Duration
	// MaxAttempts counts attempts with the first one included: the
	// MaxAttempts-th failure of this budget is terminal, so 1 means no retry.
	// Must be >= 1.
	MaxAttempts int
}

// backoff returns the wait after the n-th failure (n >= 1) for jitter value j
// in [0, 1).
func (b Budget) backoff(n int, j float64) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		if d > b.Max/2 {
			d = b.Max
			break
		}
		d *= 2
	}
	d = min(d, b.Max)
	j = min(max(j, 0), 1)
	// Saturating: past the largest Duration the conversion would wrap to a negative wait.
	f := float64(d) * (0.75 + 0.5*j)
	if f >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return max(time.Duration(f), time.Millisecond)
}

func (b Budget) validate(name string) error {
	switch {
	case b.Initial <= 0:
		return fmt.Errorf("engine: Options.%s.Initial must be > 0, got %v", name, b.Initial)
	case b.Max < b.Initial:
		return fmt.Errorf("engine: Options.%s.Max must be >= Initial (%v), got %v", name, b.Initial, b.Max)
	case b.MaxAttempts < 1:
		return fmt.Errorf("engine: Options.%s.MaxAttempts must be >= 1, got %d", name, b.MaxAttempts)
	}
	return nil
}

// parkedRequest is a request waiting for its retry.
type parkedRequest[T any] struct {
	due   time.Time
	seq   uint64 // ties keep submission order
	r     *Request[T]
	quota bool // a RetryInfo delay set due, not the backoff
}

// parkQueue is a min-heap of parked requests by due time.
type parkQueue[T any] []parkedRequest[T]

func (q parkQueue[T]) Len() int { return len(q) }
func (q parkQueue[T]) Less(i, j int) bool {
	if q[i].due.Equal(q[j].due) {
		return q[i].seq < q[j].seq
	}
	return q[i].due.Before(q[j].due)
}
func (q parkQueue[T]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *parkQueue[T]) Push(x any)   { *q = append(*q, x.(parkedRequest[T])) }
func (q *parkQueue[T]) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = parkedRequest[T]{}
	*q = old[:len(old)-1]
	return p
}
