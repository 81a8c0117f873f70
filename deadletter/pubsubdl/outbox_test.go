package pubsubdl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeResult completes when complete is called (or at creation for an instant publisher).
type fakeResult struct {
	pub   *fakePublisher
	ready chan struct{}
	err   error
	seen  bool // the outbox has collected this result
}

func (r *fakeResult) Ready() <-chan struct{} { return r.ready }

func (r *fakeResult) Get(ctx context.Context) (string, error) {
	select {
	case <-r.ready:
	default:
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-r.ready:
		}
	}
	if !r.seen {
		r.seen = true
		r.pub.outstanding--
	}
	return "id", r.err
}

func (r *fakeResult) complete(err error) {
	r.err = err
	close(r.ready)
}

// fakePublisher records what the outbox publishes and how many publishes it had outstanding
// (published but not yet collected) at most.
type fakePublisher struct {
	instant        bool  // results complete at once
	failAt         int   // with instant: the publish with this 1-based index fails
	failWith       error // its error
	msgs           []*pubsub.Message
	results        []*fakeResult
	outstanding    int
	maxOutstanding int
}

func (p *fakePublisher) Publish(_ context.Context, msg *pubsub.Message) publishResult {
	p.msgs = append(p.msgs, msg)
	r := &fakeResult{pub: p, ready: make(chan struct{})}
	p.results = append(p.results, r)
	p.outstanding++
	p.maxOutstanding = max(p.maxOutstanding, p.outstanding)
	if p.instant {
		var err error
		if len(p.msgs) == p.failAt {
			err = p.failWith
		}
		r.complete(err)
	}
	return r
}

func msg(i int) *pubsub.Message { return &pubsub.Message{Data: fmt.Appendf(nil, "m%d", i)} }

func TestOutboxBoundsOutstandingPublishes(t *testing.T) {
	const n = 7
	cases := []struct {
		limit           int
		wantOutstanding int // most publishes outstanding at once
	}{
		{limit: 2, wantOutstanding: 2},    // waits after every second publish
		{limit: 1000, wantOutstanding: n}, // bound not reached within the bundle
		{limit: -1, wantOutstanding: n},   // only FinishBundle waits
		{limit: 1, wantOutstanding: 1},    // each publish is awaited before the next
		{limit: n, wantOutstanding: n},    // reached exactly at the last publish
		{limit: n - 1, wantOutstanding: n - 1},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			fp := &fakePublisher{instant: true}
			box := &outbox{pub: fp, topic: goodTopic, limit: tc.limit, timeout: time.Minute}
			for i := range n {
				require.NoError(t, box.publish(t.Context(), msg(i)))
			}
			require.NoError(t, box.wait(t.Context()))
			assert.Equal(t, tc.wantOutstanding, fp.maxOutstanding)
			assert.Zero(t, fp.outstanding, "every publish collected by the final wait")
			assert.Empty(t, box.pending)
			assert.Len(t, fp.msgs, n)
		})
	}
}

// Large dead letters are waited for once they add up to maxOutstandingBytes, however far the
// message count is from MaxInFlightMessages.
func TestOutboxBoundsTheBytesOutstanding(t *testing.T) {
	fp := &fakePublisher{instant: true}
	box := &outbox{pub: fp, topic: goodTopic, limit: 1000, timeout: time.Minute}
	big := &pubsub.Message{Data: make([]byte, 9<<20)}
	for range 20 {
		require.NoError(t, box.publish(t.Context(), big))
		assert.Less(t, box.bytes, maxOutstandingBytes)
	}
	require.NoError(t, box.wait(t.Context()))
	assert.Equal(t, 8, fp.maxOutstanding, "eight messages of 9 MiB reach 64 MiB")
	assert.Zero(t, box.bytes)

	// -1 still means no bound before the bundle's end.
	fp = &fakePublisher{instant: true}
	box = &outbox{pub: fp, topic: goodTopic, limit: -1, timeout: time.Minute}
	for range 10 {
		require.NoError(t, box.publish(t.Context(), big))
	}
	assert.Equal(t, 10, fp.maxOutstanding)
}

func TestOutboxUnboundedWaitsOnlyAtFinish(t *testing.T) {
	fp := &fakePublisher{instant: true}
	box := &outbox{pub: fp, topic: goodTopic, limit: -1, timeout: time.Minute}
	for i := range 5000 {
		require.NoError(t, box.publish(t.Context(), msg(i)))
	}
	assert.Equal(t, 5000, fp.outstanding, "nothing collected before the final wait")
	require.NoError(t, box.wait(t.Context()))
	assert.Zero(t, fp.outstanding)
}

func TestOutboxPublishErrorFailsTheWait(t *testing.T) {
	denied := errors.New("permission denied on topic")
	for _, limit := range []int{-1, 1, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			fp := &fakePublisher{instant: true, failAt: 2, failWith: denied}
			box := &outbox{pub: fp, topic: goodTopic, limit: limit, timeout: time.Minute}
			var err error
			for i := 0; i < 5 && err == nil; i++ {
				err = box.publish(t.Context(), msg(i))
			}
			if err == nil {
				err = box.wait(t.Context())
			}
			require.ErrorIs(t, err, denied)
			assert.Contains(t, err.Error(), goodTopic)
		})
	}
}

func TestOutboxFailsAtFlushTimeoutWhenPublishesNeverComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := &fakePublisher{}
		box := &outbox{pub: fp, topic: goodTopic, limit: -1, timeout: 45 * time.Second}
		for i := range 3 {
			require.NoError(t, box.publish(t.Context(), msg(i)))
		}
		start := time.Now()
		err := box.wait(t.Context())
		require.Error(t, err)
		assert.Equal(t, 45*time.Second, time.Since(start), "one deadline for the whole wait")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "3 of 3 messages")
		assert.Contains(t, err.Error(), "FlushTimeout (45s)")
		assert.Contains(t, err.Error(), goodTopic)
		assert.Contains(t, err.Error(), fmt.Sprintf("the largest of them %d bytes", messageSize(msg(2))), "a size says whether the server may refuse it")
		assert.Len(t, box.pending, 3, "nothing dropped from the outbox")
	})
}

func TestOutboxBoundedPublishFailsAtFlushTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := &fakePublisher{}
		box := &outbox{pub: fp, topic: goodTopic, limit: 2, timeout: time.Minute}
		require.NoError(t, box.publish(t.Context(), msg(0)))
		fp.results[0].complete(nil)
		start := time.Now()
		err := box.publish(t.Context(), msg(1)) // fills the bound: waits for both
		require.Error(t, err)
		assert.Equal(t, time.Minute, time.Since(start))
		assert.Contains(t, err.Error(), "1 of 2 messages")
		assert.Contains(t, err.Error(), "FlushTimeout (1m0s)")
	})
}

func TestOutboxSynchronousPublishFailsAtFlushTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := &fakePublisher{}
		box := &outbox{pub: fp, topic: goodTopic, limit: 1, timeout: DefaultFlushTimeout}
		start := time.Now()
		err := box.publish(t.Context(), msg(0))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, DefaultFlushTimeout, time.Since(start))
		assert.Contains(t, err.Error(), "1 of 1 messages")
	})
}

// The deadline covers the whole wait, not each publish: two publishes that each complete
// within the timeout of their own but not within one shared timeout fail the wait.
func TestOutboxFlushTimeoutIsOneDeadlineForAllPublishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := &fakePublisher{}
		box := &outbox{pub: fp, topic: goodTopic, limit: -1, timeout: time.Minute}
		require.NoError(t, box.publish(t.Context(), msg(0)))
		require.NoError(t, box.publish(t.Context(), msg(1)))
		first, second := fp.results[0], fp.results[1]
		time.AfterFunc(40*time.Second, func() { first.complete(nil) })
		time.AfterFunc(80*time.Second, func() { second.complete(nil) })
		start := time.Now()
		err := box.wait(t.Context())
		require.Error(t, err)
		assert.Equal(t, time.Minute, time.Since(start))
		assert.Contains(t, err.Error(), "1 of 2 messages")
	})
}

func TestOutboxWaitSucceedsWhenPublishesCompleteBeforeTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fp := &fakePublisher{}
		box := &outbox{pub: fp, topic: goodTopic, limit: -1, timeout: time.Minute}
		for i := range 3 {
			require.NoError(t, box.publish(t.Context(), msg(i)))
			r := fp.results[i]
			time.AfterFunc(time.Duration(20*(i+1))*time.Second-time.Second, func() { r.complete(nil) })
		}
		start := time.Now()
		require.NoError(t, box.wait(t.Context()))
		assert.Equal(t, 59*time.Second, time.Since(start))
		assert.Empty(t, box.pending)
	})
}
