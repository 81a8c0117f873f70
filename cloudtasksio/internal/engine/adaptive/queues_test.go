package adaptive

import (
	"fmt"
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
	p, ok, _ := a.Acquire(queue, 100, 0, time.Now())
	if !ok {
		panic("not let through: " + queue)
	}
	a.Release(p, Succeeded, 0, time.Now())
}

func TestAdaptiveKeepsAtMostMaxQueuesAndNeverForgetsAQueueInUse(t *testing.T) {
	a := &Adaptive{MaxQueues: 100}
	// A throttled queue with a create in flight all along, and one an engine waits for.
	rejected, ok, _ := a.Acquire("busy", 100, 0, time.Now())
	require.True(t, ok)
	a.Release(rejected, Throttled, 0, time.Now())
	busy, ok, _ := a.Acquire("busy", 100, 0, time.Now())
	require.True(t, ok)
	throttledLimit := a.Queue("busy").Limit
	require.Less(t, throttledLimit, 100.0)
	wake := make(chan struct{}, 1)
	a.Watch("waited-for", 100, 0, wake)

	for i := range 100_000 {
		touch(a, fmt.Sprint("q", i))
		require.LessOrEqual(t, a.Len(), 100, "after queue %d", i)
	}
	assert.Equal(t, throttledLimit, a.Queue("busy").Limit, "the queue in use keeps what it learnt")
	assert.Equal(t, 1, a.Queue("busy").InFlight)
	assert.Equal(t, 100, a.Queue("waited-for").Cap, "the queue an engine waits for is kept")
	assert.Zero(t, a.Queue("q0"), "the longest idle queue was forgotten")
	assert.Equal(t, 100, a.Queue("q99999").Cap, "the most recent is kept")

	a.Release(busy, Succeeded, 0, time.Now()) // its permit comes back to a kept state
	a.Unwatch("waited-for", wake)
	p, ok, _ := a.Acquire("q0", 100, 0, time.Now())
	require.True(t, ok)
	got := a.Queue("q0")
	assert.InDelta(t, float64(atOnce), got.Limit, 0.1, "a forgotten queue starts afresh: its limit grows only with time until an answer")
	got.Limit = atOnce
	assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 100, InFlight: 1}, got, "a forgotten queue starts afresh")
	a.Release(p, Other, 0, time.Now())
}

func TestAdaptiveForgetsAQueueIdleForIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &Adaptive{IdleTTL: 10 * time.Minute}
		// One create accepted, then a run of quotaRun rejections: the queue is paced.
		touch(a, "throttled")
		for range quotaRun {
			p, ok, _ := a.Acquire("throttled", 100, 0, time.Now())
			require.True(t, ok)
			a.Release(p, Throttled, 0, time.Now())
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

		p, ok, _ := a.Acquire("throttled", 100, 0, time.Now())
		require.True(t, ok, "it starts afresh")
		assert.Equal(t, QueueLimit{Limit: atOnce, Cap: 100, InFlight: 1}, a.Queue("throttled"))
		a.Release(p, Succeeded, 0, time.Now())
	})
}
