package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Beam runs the DoFns of sibling steps (two Write steps fed by one PCollection, fused into one
// stage) one after the other on the bundle's goroutine. Two engines sharing an Adaptive and a
// queue, driven from one goroutine: engine 1 books a slow start slot a millisecond ahead (a
// permit that counts as in flight), engine 2 is refused for it with nothing on the wire, and
// only engine 1 starting its slot could let engine 2 go, which it cannot while engine 2 waits
// in Submit or Flush. The booked slot must lapse instead of stalling engine 2 for good.
func TestSiblingEnginesOnOneGoroutineDoNotWaitForEachOthersBookedSlot(t *testing.T) {
	for _, flush := range []bool{false, true} {
		name := map[bool]string{false: "Submit at the cap", true: "Flush"}[flush]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive()
				f := (&throttlingFake{latency: time.Millisecond}).init()
				bg := context.Background()
				o1, o2 := adaptiveOptions(a), adaptiveOptions(a)
				if !flush {
					o2.MaxInFlight = 1
				}
				e1, e2 := New[string](f, o1, nil), New[string](f, o2, nil)
				submit := func(e *Engine[string], id string) {
					t.Helper()
					require.NoError(t, e.Submit(bg, requestTo(testQueue, id)), id)
				}
				submit(e1, "a") // sent; "b" waits behind it (one create in flight before any answer)
				submit(e1, "b")
				time.Sleep(1100 * time.Microsecond) // "a" answers: a round trip of 1 ms
				submit(e2, "c")
				time.Sleep(1100 * time.Microsecond)
				submit(e1, "d") // "b" goes, "d" waits behind it
				time.Sleep(1100 * time.Microsecond)
				submit(e1, "e") // "d" books a slot ahead, held by engine 1
				_, held := e1.Stats()
				require.Equal(t, 2, held, "engine 1 holds d (with a booked slot) and e")
				require.Equal(t, 1, a.Queue(testQueue).InFlight, "the booked slot counts as in flight")

				submit(e2, "f") // refused while the slot is booked
				ctx, cancel := context.WithTimeout(bg, 10*time.Minute)
				defer cancel()
				start := time.Now()
				var err error
				if flush {
					err = e2.Flush(ctx)
				} else {
					err = e2.Submit(ctx, requestTo(testQueue, "g"))
				}
				require.NoError(t, err, "engine 2 must not wait for engine 1's slot, which only this goroutine could start")
				assert.LessOrEqual(t, time.Since(start), 10*time.Millisecond,
					"the slot lapses a horizon after its time, and the wait ends then")

				require.NoError(t, e2.Flush(bg))
				require.NoError(t, e1.Flush(bg))
				created, _, _ := f.counts(testQueue)
				assert.Equal(t, map[bool]int{false: 7, true: 6}[flush], created, "every request was created")
				assert.Zero(t, a.Queue(testQueue).InFlight, "every permit came back")
			})
		})
	}
}

// randomLatency answers every create after a latency drawn from lat.
type randomLatency struct {
	mu  sync.Mutex
	rng *rand.Rand
	lat []time.Duration
}

func (f *randomLatency) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	f.mu.Lock()
	d := f.lat[f.rng.IntN(len(f.lat))]
	f.mu.Unlock()
	if err := sleepCtx(ctx, d); err != nil {
		return nil, err
	}
	return req.GetTask(), nil
}

// The same shape at random: two engines on one goroutine, Submits to either at random with small
// caps and latencies from a microsecond to 60 ms, then each Flush in turn. Before booked slots
// lapsed, about one seed in five stalled a Submit or a Flush for good.
func TestSiblingEnginesOnOneGoroutineNeverStall(t *testing.T) {
	const seeds = 200
	for seed := range seeds {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			f := &randomLatency{rng: rand.New(rand.NewPCG(uint64(seed), 2)),
				lat: []time.Duration{time.Microsecond, 500 * time.Microsecond, 2 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond}}
			a := NewAdaptive()
			o := adaptiveOptions(a)
			o.MaxInFlight = 1 + rng.IntN(4)
			e := []*Engine[string]{New[string](f, o, nil), New[string](f, o, nil)}
			for i := range 300 {
				if rng.IntN(5) == 0 {
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := e[rng.IntN(2)].Submit(ctx, requestTo(testQueue, fmt.Sprint(i)))
				cancel()
				require.NoError(t, err, "seed %d, request %d: a Submit waited a minute", seed, i)
			}
			for k, x := range e {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := x.Flush(ctx)
				cancel()
				require.NoError(t, err, "seed %d: engine %d's Flush waited a minute", seed, k)
			}
			assert.Zero(t, a.Queue(testQueue).InFlight, "seed %d: every permit came back", seed)
		})
	}
}
