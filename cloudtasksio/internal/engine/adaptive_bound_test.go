package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine/adaptive"
)

// How many queues an Adaptive keeps when engines are dropped; the controller's own rules for
// it are tested in package adaptive (queues_test.go).

// touch makes one successful create to queue.
func touch(a *Adaptive, queue string) {
	p, ok, _ := a.Acquire(queue, 100, 0, time.Now())
	if !ok {
		panic("not let through: " + queue)
	}
	a.Release(p, adaptive.Succeeded, 0, time.Now())
}

// An engine dropped while it holds requests back gives back, once the garbage collector has
// found it unreachable, the paced slot it reserved and its watch of the queues. That happens
// when another step of the engine's bundle fails: the runner calls neither Flush nor Fail on
// the sink's DoFn and never uses that instance again. Without it the reserved slot would count
// as in flight for the life of the process and the queues would never be forgotten. (Not
// under synctest: cleanups run outside any bubble.)
func TestAnEngineDroppedWhileItHoldsRequestsGivesBackItsSlotsOnceCollected(t *testing.T) {
	a := &Adaptive{}
	f := (&throttlingFake{}).init()
	// 2/s: the queue's next slot lies far ahead, the requests wait without a permit;
	// 300/s: the next slot lies within the horizon, the first held request keeps its permit.
	rates := map[string]float64{"slow": 2, "fast": 300}
	func() {
		for q, rate := range rates {
			o := adaptiveOptions(a)
			o.StartRate = rate
			e := New[string](f, o, nil)
			for i := range 5 {
				require.NoError(t, e.Submit(context.Background(), requestTo(q, fmt.Sprint(q, i))))
			}
			_, held := e.Stats()
			require.Positive(t, held, "%s: the engine holds requests back", q)
			if rate > 100 {
				require.Len(t, e.adaptive.reserved, 1, "%s: the first held request keeps a permit", q)
			}
			// e is dropped here, as the runner drops the DoFn of a failed bundle.
		}
	}()
	// An Adaptive forgets a queue only once it is idle: nothing in flight to it and no engine
	// watching it. Each pass uses a queue not used before, which makes the Adaptive forget the
	// queues idle for IdleTTL.
	a.IdleTTL = time.Nanosecond
	released := func(pass int) bool {
		touch(a, fmt.Sprint("other-", pass))
		for q := range rates {
			if a.Queue(q).Cap != 0 {
				return false
			}
		}
		return true
	}
	for pass, deadline := 0, time.Now().Add(30*time.Second); !released(pass); pass++ {
		require.False(t, time.Now().After(deadline), "the dropped engines' slots and watches were never given back")
		runtime.GC()
		runtime.Gosched()
	}
	// Idle now, the queues were forgotten like any other.
	assert.Equal(t, 1, a.Len(), "only the queue just used is kept")
}
