package adaptive

import (
	"math"
	"testing"
	"time"
)

// FuzzAdaptiveStateStaysSane drives an Adaptive through any sequence of grants, answers (created,
// throttled with or without a RetryInfo delay, failed or cancelled; in or out of time order) and
// steps of time, over three queues of which it keeps two (the third started at a rate,
// Options.StartRate, that the step's argument sets), and checks after every step what the
// engines rely on: the rate, limit and unit are finite numbers in their ranges, the rate is set
// exactly when a decrease came or the queue was started at a rate, a rejection never raises it and a success never lowers it, the
// creates in flight are the permits not given back, a granted create starts now or at a slot no
// further ahead than the queue books (latestStart), and a refused one is told a time to ask again
// that lies ahead, never one already past (its engine would ask again at once, forever), or to
// wait for a release only while a create is in flight (else it would wait forever). Its corpus
// (testdata/fuzz) keeps the input that found a rate of NaN, which every other test but one
// passed: a storm decrease read 0 acceptances over 0 seconds when the answers of a round came
// back in the instant of the decrease.
//
// Each step is three bytes: the operation and queue, then two arguments.
func FuzzAdaptiveStateStaysSane(f *testing.F) {
	// Slow start, answers a round trip later, then rejections in one instant and time steps.
	f.Add([]byte{0, 200, 0, 0, 200, 0, 0, 200, 0, 2, 30, 3, 1, 0, 1, 1, 0, 1, 0, 200, 0, 0, 200, 0,
		2, 30, 3, 1, 0, 2, 1, 0, 2, 1, 0, 2, 0, 200, 0, 1, 0, 2, 1, 0, 2, 2, 1, 4, 0, 7, 0})
	// Rejections with RetryInfo delays, cancellations before a paced slot, and a second queue.
	f.Add([]byte{0, 9, 0, 4, 9, 0, 3, 5, 0, 1, 0, 0x82, 0, 9, 0, 0, 9, 0, 1, 0, 0, 5, 1, 2, 2, 1,
		200, 3, 0, 1, 8, 0, 1, 8, 0, 2, 4, 255, 0, 255, 0})
	// Many grants and a long silence, then answers long after.
	f.Add([]byte{0, 255, 0, 0, 255, 0, 0, 255, 0, 0, 255, 0, 2, 4, 120, 3, 1, 7, 3, 0, 7, 1, 1, 2,
		1, 2, 1, 0, 255, 0})
	// The third queue started at 5.1/s: grants, a rejection and a success, time, grants again.
	f.Add([]byte{8, 50, 0, 8, 50, 0, 10, 3, 1, 9, 0, 2, 9, 0, 1, 10, 4, 3, 8, 200, 0, 8, 7, 0, 11, 1, 40})
	queues := []string{testQueue, testQueue + "-b", testQueue + "-c"}
	// startRate is the start rate an engine of queue path asks with: the third queue's engines
	// ask with one from 0.1 to 25.6 creates a second (a queue keeps the first it was started at).
	startRate := func(path string, x byte) float64 {
		if path == queues[2] {
			return (float64(x) + 1) / 10
		}
		return 0
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		a := New()
		a.MaxQueues = 2
		now := time.Now()
		held := map[string][]Permit{}
		for i := 0; i+2 < len(ops) && i < 3*4000; i += 3 {
			op, x, y := ops[i], ops[i+1], ops[i+2]
			path := queues[int(op>>2)%len(queues)]
			switch op % 4 {
			case 0: // a create asks to go
				p, ok, until := a.Acquire(path, 1+int(x)*4, startRate(path, x), now)
				switch {
				case ok && (p.start.Before(now) || p.start.After(now.Add(latestStart(a.Queue(path))))):
					t.Fatalf("step %d: granted to start %v after now; state %+v", i/3, p.start.Sub(now), a.Queue(path))
				case ok:
					held[path] = append(held[path], p)
				case !until.IsZero() && !until.After(now):
					t.Fatalf("step %d: refused until %v after now; state %+v", i/3, until.Sub(now), a.Queue(path))
				case until.IsZero() && len(held[path]) == 0:
					t.Fatalf("step %d: refused to wait for a release with nothing in flight; state %+v", i/3, a.Queue(path))
				}
			case 1, 3: // an answer comes back: now (1), or y ms after its start (3), which
				// may be before answers already taken: the engine reads the time of an
				// answer before it takes the lock, so answers can come in out of order.
				ps := held[path]
				if len(ps) == 0 {
					continue
				}
				j := int(x) % len(ps)
				p := ps[j]
				held[path] = append(ps[:j], ps[j+1:]...)
				o := Outcome(y % 3)
				at := now
				if op%4 == 3 {
					at = p.start.Add(time.Duration(y) * time.Millisecond)
				} else if o != Other {
					// A create is sent at its start, so answered after it; only a
					// cancelled one (Other) comes back before.
					at = latest(now, p.start)
				}
				now = latest(now, at)
				var delay time.Duration
				if o == Throttled && y&0x80 != 0 {
					delay = time.Duration(y&0x3f) * 100 * time.Millisecond
				}
				before := a.Queue(path)
				a.Release(p, o, delay, at)
				after := a.Queue(path)
				switch {
				case o == Throttled && before.Rate > 0 && after.Rate > before.Rate:
					t.Fatalf("step %d: a rejection raised the rate from %v to %v", i/3, before.Rate, after.Rate)
				case o == Succeeded && after.Rate < before.Rate:
					t.Fatalf("step %d: a success lowered the rate from %v to %v", i/3, before.Rate, after.Rate)
				}
			case 2: // time passes
				step := []time.Duration{0, time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Second}[x%5]
				now = now.Add(step * time.Duration(y))
			}
			for _, path := range queues {
				checkQueueState(t, a, path, len(held[path]), i/3, path == queues[2])
			}
		}
	})
}

// latestStart is how far ahead of now acquire may book a create of a queue in state s: a
// paced queue books no slot beyond its horizon (a round trip, at least minHorizon), slow start
// none beyond the round trip it spreads its window over.
func latestStart(s QueueLimit) time.Duration {
	if s.Rate > 0 {
		return max(s.RTT, minHorizon)
	}
	return s.RTT
}

// checkQueueState fails t when the state of path is not sane with held permits outstanding;
// startedPaced says the queue's engines ask with a start rate.
func checkQueueState(t *testing.T, a *Adaptive, path string, held, step int, startedPaced bool) {
	t.Helper()
	s := a.Queue(path)
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	a.mu.Lock()
	q := a.queues[path]
	var limit, ceiling float64
	var probeAge time.Duration
	if q != nil {
		limit, ceiling, probeAge = q.limit, q.ceiling, q.probeAge
	}
	a.mu.Unlock()
	switch {
	case q == nil && held > 0:
		t.Fatalf("step %d: %s forgotten with %d creates in flight", step, path, held)
	case q == nil:
		return
	case s.InFlight != held:
		t.Fatalf("step %d: %s has %d creates in flight, %d permits are out", step, path, s.InFlight, held)
	case !finite(s.Rate) || (s.Rate != 0 && s.Rate < minRate):
		t.Fatalf("step %d: %s rate %v", step, path, s.Rate)
	case !finite(s.Unit) || s.Unit < 0 || !finite(ceiling) || ceiling < 0:
		t.Fatalf("step %d: %s unit %v, ceiling %v", step, path, s.Unit, ceiling)
	case !finite(limit) || limit < 0 || !finite(s.Limit):
		t.Fatalf("step %d: %s limit %v (slow start's %v)", step, path, s.Limit, limit)
	case startedPaced && s.Rate == 0:
		t.Fatalf("step %d: %s started at a rate has none after %d decreases", step, path, s.Decreases)
	case !startedPaced && (s.Rate == 0) != (s.Decreases == 0):
		t.Fatalf("step %d: %s rate %v after %d decreases", step, path, s.Rate, s.Decreases)
	case s.RTT < 0 || probeAge < 0 || s.Decreases < 0:
		t.Fatalf("step %d: %s round trip %v, probe age %v, decreases %d", step, path, s.RTT, probeAge, s.Decreases)
	}
}
