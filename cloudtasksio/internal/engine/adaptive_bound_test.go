package engine

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of how many queues an Adaptive keeps: a process writing to very many queues must not
// keep a limit for each of them for ever, and must never forget a queue it is writing to.

// touch makes one successful create to queue.
func touch(a *Adaptive, queue string) {
	p, ok, _ := a.acquire(queue, 100, 0, time.Now())
	if !ok {
		panic("not let through: " + queue)
	}
	a.release(p, outcomeSucceeded, 0, time.Now())
}

func TestAdaptiveKeepsAtMostMaxQueuesAndNeverForgetsAQueueInUse(t *testing.T) {
	a := &Adaptive{MaxQueues: 100}
	// A throttled queue with a create in flight all along, and one an engine waits for.
	rejected, ok, _ := a.acquire("busy", 100, 0, time.Now())
	require.True(t, ok)
	a.release(rejected, outcomeThrottled, 0, time.Now())
	busy, ok, _ := a.acquire("busy", 100, 0, time.Now())
	require.True(t, ok)
	throttledLimit := a.Queue("busy").Limit
	require.Less(t, throttledLimit, 100.0)
	wake := make(chan struct{}, 1)
	a.watch("waited-for", 100, 0, wake)

	for i := range 100_000 {
		touch(a, fmt.Sprint("q", i))
		require.LessOrEqual(t, a.Len(), 100, "after queue %d", i)
	}
	assert.Equal(t, throttledLimit, a.Queue("busy").Limit, "the queue in use keeps what it learnt")
	assert.Equal(t, 1, a.Queue("busy").InFlight)
	assert.Equal(t, 100, a.Queue("waited-for").Cap, "the queue an engine waits for is kept")
	assert.Zero(t, a.Queue("q0"), "the longest idle queue was forgotten")
	assert.Equal(t, 100, a.Queue("q99999").Cap, "the most recent is kept")

	a.release(busy, outcomeSucceeded, 0, time.Now()) // its permit comes back to a kept state
	a.unwatch("waited-for", wake)
	p, ok, _ := a.acquire("q0", 100, 0, time.Now())
	require.True(t, ok)
	got := a.Queue("q0")
	assert.InDelta(t, float64(atOnce), got.Limit, 0.1, "a forgotten queue starts afresh: its limit grows only with time until an answer")
	got.Limit = atOnce
	assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 100, InFlight: 1}, got, "a forgotten queue starts afresh")
	a.release(p, outcomeOther, 0, time.Now())
}

func TestAdaptiveForgetsAQueueIdleForIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &Adaptive{IdleTTL: 10 * time.Minute}
		// One create accepted, then a run of quotaRun rejections: the queue is paced.
		touch(a, "throttled")
		for range quotaRun {
			p, ok, _ := a.acquire("throttled", 100, 0, time.Now())
			require.True(t, ok)
			a.release(p, outcomeThrottled, 0, time.Now())
		}
		require.Equal(t, 1, a.Queue("throttled").Decreases)
		touch(a, "steady")
		for range 12 {
			time.Sleep(time.Minute)
			touch(a, "steady")
			touch(a, fmt.Sprint("new-", time.Now().Unix())) // new queues make the Adaptive look
		}
		assert.Zero(t, a.Queue("throttled"), "forgotten after 10 minutes idle")
		assert.Equal(t, 100, a.Queue("steady").Cap, "a queue written every minute is kept")
		assert.Equal(t, 11, a.Len(), "steady and the new queues of the last 10 minutes")

		p, ok, _ := a.acquire("throttled", 100, 0, time.Now())
		require.True(t, ok, "it starts afresh")
		assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 100, InFlight: 1}, a.Queue("throttled"))
		a.release(p, outcomeSucceeded, 0, time.Now())
	})
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
	released := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for q := range rates {
			if st := a.queues[q]; st.inFlight != 0 || len(st.waiters) != 0 || st.idleEl == nil {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(30 * time.Second); !released(); runtime.Gosched() {
		require.False(t, time.Now().After(deadline), "the dropped engines' slots and watches were never given back")
		runtime.GC()
	}
	// Idle now, the queues are forgotten like any other.
	a.IdleTTL = time.Nanosecond
	touch(a, "other")
	assert.Equal(t, 1, a.Len(), "only the queue just used is kept")
}
