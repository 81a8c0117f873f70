package gcpconn

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// slowRead is a creation that takes readTime of fake time and counts its calls.
const readTime = 200 * time.Millisecond

func slowRead(calls *atomic.Int64, result string, err error) func() (string, error) {
	return func() (string, error) {
		calls.Add(1)
		time.Sleep(readTime)
		return result, err
	}
}

// waitAll runs n callers of key at once and returns each one's wait and result.
func waitAll(c *Cache[string, string], n int, key string, create func() (string, error)) (waits []time.Duration, errs []error) {
	waits, errs = make([]time.Duration, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = c.Get(context.Background(), key, create)
			waits[i] = time.Since(start)
		})
	}
	wg.Wait()
	return waits, errs
}

func TestCacheKeepsOneValuePerKey(t *testing.T) {
	var c Cache[string, *int]
	calls := 0
	create := func() (*int, error) { calls++; v := calls; return &v, nil }
	a, err := c.Get(t.Context(), "a", create)
	require.NoError(t, err)
	again, err := c.Get(t.Context(), "a", create)
	require.NoError(t, err)
	b, err := c.Get(t.Context(), "b", create)
	require.NoError(t, err)
	assert.Same(t, a, again, "one value per key")
	assert.NotSame(t, a, b)
	assert.Equal(t, 2, calls)
}

func TestSixtyFourCallersShareOneSlowRead(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{{"the read succeeds", nil}, {"the read fails", errors.New("UNAVAILABLE")}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var cache Cache[string, string]
				var calls atomic.Int64
				waits, errs := waitAll(&cache, 64, "queue", slowRead(&calls, "found", c.err))
				assert.Equal(t, int64(1), calls.Load(), "one read for the 64 callers")
				longest := slices64Max(waits)
				t.Logf("the last of 64 callers waited %v behind one read of %v", longest, readTime)
				assert.Equal(t, readTime, longest, "nobody waits longer than the one read")
				for _, err := range errs {
					assert.Equal(t, c.err, err, "every caller gets the read's own result")
				}
			})
		})
	}
}

func slices64Max(d []time.Duration) time.Duration {
	var m time.Duration
	for _, v := range d {
		m = max(m, v)
	}
	return m
}

func TestCacheRemembersAFailureForFailureTTLThenReadsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		failing := slowRead(&calls, "", errors.New("the topic does not exist"))
		_, err := c.Get(t.Context(), "topic", failing)
		require.EqualError(t, err, "the topic does not exist")

		// Until FailureTTL has passed since the failure, every caller gets it at once.
		time.Sleep(FailureTTL - time.Second)
		start := time.Now()
		for range 10 {
			_, err = c.Get(t.Context(), "topic", slowRead(&calls, "created meanwhile", nil))
			require.EqualError(t, err, "the topic does not exist")
		}
		assert.Zero(t, time.Since(start), "a remembered failure costs no wait")
		assert.Equal(t, int64(1), calls.Load())

		// Then the next caller reads again and finds the fix.
		time.Sleep(time.Second)
		v, err := c.Get(t.Context(), "topic", slowRead(&calls, "created meanwhile", nil))
		require.NoError(t, err)
		assert.Equal(t, "created meanwhile", v)
		assert.Equal(t, int64(2), calls.Load())
	})
}

func TestATransientFailureReachesItsWaitersButIsNotRemembered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		overloaded := status.Error(codes.ResourceExhausted, "try again")
		// The callers of one read share it, and its failure, as with any other failure.
		_, errs := waitAll(&c, 16, "queue", slowRead(&calls, "", Transient(overloaded)))
		assert.Equal(t, int64(1), calls.Load(), "one read in flight for the 16 callers")
		for _, err := range errs {
			require.ErrorIs(t, err, overloaded)
			assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the mark keeps the status readable")
			assert.EqualError(t, err, overloaded.Error(), "and the text as it was")
		}
		assert.Zero(t, c.Len(), "nothing kept")

		// Each caller after it reads again, at once; the first answer that is not transient is
		// kept.
		for i := range 3 {
			_, err := c.Get(t.Context(), "queue", slowRead(&calls, "", Transient(overloaded)))
			require.ErrorIs(t, err, overloaded)
			assert.Equal(t, int64(2+i), calls.Load())
		}
		v, err := c.Get(t.Context(), "queue", slowRead(&calls, "found", nil))
		require.NoError(t, err)
		assert.Equal(t, "found", v)
		v, err = c.Get(t.Context(), "queue", slowRead(&calls, "read again", nil))
		require.NoError(t, err)
		assert.Equal(t, "found", v, "kept")
		assert.Equal(t, int64(5), calls.Load())
		assert.NoError(t, Transient(nil))
	})
}

func TestCallersOfOtherKeysDoNotWaitForASlowRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		release := make(chan struct{})
		go c.Get(context.Background(), "stuck", func() (string, error) { <-release; return "late", nil })
		synctest.Wait() // the stuck read is under way

		start := time.Now()
		var calls atomic.Int64
		waits, errs := waitAll(&c, 8, "other", slowRead(&calls, "fast", nil))
		assert.Equal(t, readTime, slices64Max(waits), "the other key's callers wait for their own read only")
		assert.Equal(t, readTime, time.Since(start))
		for _, err := range errs {
			assert.NoError(t, err)
		}
		close(release)
	})
}

func TestAWaiterGivesUpOnItsOwnContextAndTheReadGoesOnForTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		read := slowRead(&calls, "found", nil)
		var patient string
		var patientErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			patient, patientErr = c.Get(context.Background(), "queue", read)
		}()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Get(ctx, "queue", read)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "it gave up when its own context ended")

		<-done
		require.NoError(t, patientErr)
		assert.Equal(t, "found", patient)
		assert.Equal(t, readTime, time.Since(start))
		assert.Equal(t, int64(1), calls.Load())
	})
}

func TestTheFirstCallerGivingUpDoesNotCancelTheRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		read := func() (string, error) {
			time.Sleep(readTime)
			return "found", nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := c.Get(ctx, "queue", read)
		require.ErrorIs(t, err, context.Canceled)
		synctest.Wait()
		time.Sleep(readTime)
		v, err := c.Get(t.Context(), "queue", func() (string, error) { return "", errors.New("not read again") })
		require.NoError(t, err)
		assert.Equal(t, "found", v, "the read finished and its value is kept")
	})
}

func TestCacheDropsIdleEntriesAndCreatesThemAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Cache[string, string]{IdleTTL: 10 * time.Minute}
		reads := map[string]int{}
		read := func(key string) func() (string, error) {
			return func() (string, error) { reads[key]++; return fmt.Sprint(key, "#", reads[key]), nil }
		}
		for range 3 {
			for _, k := range []string{"busy", "idle"} {
				_, err := c.Get(t.Context(), k, read(k))
				require.NoError(t, err)
			}
		}
		// "busy" is asked for every minute; "idle" never again.
		for range 11 {
			time.Sleep(time.Minute)
			v, err := c.Get(t.Context(), "busy", read("busy"))
			require.NoError(t, err)
			assert.Equal(t, "busy#1", v, "an entry in use stays")
		}
		assert.Equal(t, 1, c.Len(), "the idle entry is gone")
		v, err := c.Get(t.Context(), "idle", read("idle"))
		require.NoError(t, err)
		assert.Equal(t, "idle#2", v, "a dropped entry is read again")
	})
}

func TestCacheKeepsAtMostMaxEntriesDroppingTheLeastRecentlyUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Cache[int, int]{MaxEntries: 100}
		reads := 0
		read := func() (int, error) { reads++; return reads, nil }
		_, err := c.Get(t.Context(), -1, read) // a queue used all along
		require.NoError(t, err)
		for q := range 100_000 {
			_, err := c.Get(t.Context(), q, read)
			require.NoError(t, err)
			if q%50 == 0 {
				_, err = c.Get(t.Context(), -1, read)
				require.NoError(t, err)
			}
			require.LessOrEqual(t, c.Len(), 100)
		}
		assert.Equal(t, 100_001, reads)
		v, err := c.Get(t.Context(), -1, read)
		require.NoError(t, err)
		assert.Equal(t, 1, v, "the entry used all along was never dropped")
		_, err = c.Get(t.Context(), 0, read)
		require.NoError(t, err)
		assert.Equal(t, 100_002, reads, "the least recently used was dropped and is read again")
	})
}

func TestACreationUnderWayIsNeverDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Cache[string, string]{MaxEntries: 1, IdleTTL: time.Millisecond}
		var calls atomic.Int64
		go c.Get(context.Background(), "slow", slowRead(&calls, "slow value", nil))
		synctest.Wait()
		// Other keys push the cache over its bound and past the idle time while "slow" is read.
		for i := range 10 {
			time.Sleep(10 * time.Millisecond)
			_, err := c.Get(t.Context(), fmt.Sprint(i), func() (string, error) { return "", nil })
			require.NoError(t, err)
		}
		v, err := c.Get(t.Context(), "slow", slowRead(&calls, "a second read", nil))
		require.NoError(t, err)
		assert.Equal(t, "slow value", v, "the late caller joined the read under way")
		assert.Equal(t, int64(1), calls.Load())
	})
}

func TestCreatingAValueDoesNotHoldTheCacheLock(t *testing.T) {
	var c Cache[string, string]
	var lockHeld bool
	var other string
	var otherErr error
	_, err := c.Get(t.Context(), "slow", func() (string, error) {
		// A slow or blocking creation must not hold up every other key of the worker: the
		// shared lock is free while the value is created... (Get starts the creation just
		// before it lets the lock go, so the creation may run a moment before that: it yields
		// until the lock is free, a bounded number of times, instead of trying once.)
		free := false
		for range 10_000 {
			if free = c.mu.TryLock(); free {
				break
			}
			runtime.Gosched()
		}
		if !free {
			lockHeld = true
			return "", errors.New("stopped: the shared lock is held during the creation")
		}
		c.mu.Unlock()
		// ...so another key gets its value meanwhile.
		other, otherErr = c.Get(t.Context(), "fast", func() (string, error) { return "fast client", nil })
		return "", errors.New("the test's key cannot be read")
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the test's key cannot be read")
	assert.False(t, lockHeld, "the value was created under the lock every key of the worker shares")
	require.NoError(t, otherErr)
	assert.Equal(t, "fast client", other)
}

func TestStartBeginsTheCreationWithoutWaitingAndAGetWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		read := slowRead(&calls, "found", nil)

		// The first Start begins the read and returns at once; so does a second while it runs,
		// without a read of its own.
		start := time.Now()
		first, ready := c.Start("queue", read)
		assert.False(t, ready)
		second, ready := c.Start("queue", read)
		assert.False(t, ready)
		assert.Zero(t, time.Since(start), "Start does not wait")

		// A Get waits for that read, not one of its own; so do the results Start returned.
		v, err := c.Get(t.Context(), "queue", read)
		require.NoError(t, err)
		assert.Equal(t, "found", v)
		assert.Equal(t, readTime, time.Since(start))
		for _, result := range []func(context.Context) (string, error){first, second} {
			v, err = result(t.Context())
			require.NoError(t, err)
			assert.Equal(t, "found", v)
		}
		assert.Equal(t, int64(1), calls.Load())

		// Once the read has ended, Start hands its result over.
		result, ready := c.Start("queue", read)
		assert.True(t, ready)
		v, err = result(t.Context())
		assert.Equal(t, "found", v)
		assert.NoError(t, err)
		assert.Equal(t, int64(1), calls.Load())
	})
}

func TestStartHandsOverARememberedFailureAndStartsAgainAfterFailureTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		_, ready := c.Start("queue", slowRead(&calls, "", errors.New("UNAVAILABLE")))
		require.False(t, ready)
		time.Sleep(readTime)
		synctest.Wait()

		result, ready := c.Start("queue", slowRead(&calls, "fixed", nil))
		assert.True(t, ready)
		_, err := result(t.Context())
		assert.EqualError(t, err, "UNAVAILABLE", "the failure is remembered")
		assert.Equal(t, int64(1), calls.Load())

		time.Sleep(FailureTTL)
		_, ready = c.Start("queue", slowRead(&calls, "fixed", nil))
		assert.False(t, ready, "after FailureTTL the read starts again")
		v, err := c.Get(t.Context(), "queue", slowRead(&calls, "not this one", nil))
		require.NoError(t, err)
		assert.Equal(t, "fixed", v)
		assert.Equal(t, int64(2), calls.Load())
	})
}

func TestAResultStartReturnedWaitsForItsOwnCreationEvenIfTheEntryIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Cache[string, string]{MaxEntries: 1}
		var calls atomic.Int64
		result, _ := c.Start("a", slowRead(&calls, "a's", nil))
		time.Sleep(readTime)
		synctest.Wait()
		_, err := c.Get(t.Context(), "b", slowRead(&calls, "b's", nil)) // drops a
		require.NoError(t, err)
		require.Equal(t, 1, c.Len())

		v, err := result(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "a's", v)
		assert.Equal(t, int64(2), calls.Load(), "no read of a again")
	})
}

func TestAResultStartReturnedGivesUpWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		result, _ := c.Start("a", slowRead(&calls, "a's", nil))
		ctx, cancel := context.WithTimeout(t.Context(), readTime/2)
		defer cancel()
		_, err := result(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		v, err := result(t.Context())
		require.NoError(t, err, "the read went on")
		assert.Equal(t, "a's", v)
	})
}

// A context that has ended makes a result a poll: the creation's result once it has ended,
// every time (a select between two ready cases would pick either), else the context's error.
func TestAResultStartReturnedPollsWithAnEndedContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c Cache[string, string]
		var calls atomic.Int64
		result, _ := c.Start("a", slowRead(&calls, "a's", nil))
		ended, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := result(ended)
		assert.ErrorIs(t, err, context.Canceled, "under way")
		time.Sleep(readTime)
		synctest.Wait()
		for range 100 {
			v, err := result(ended)
			require.NoError(t, err, "ended")
			assert.Equal(t, "a's", v)
		}
	})
}

func TestACacheGrownPastItsBoundByCreationsUnderWayShrinksBackAsTheyEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := Cache[string, string]{MaxEntries: 3}
		var calls atomic.Int64
		results := make([]func(context.Context) (string, error), 12)
		for i := range results {
			results[i], _ = c.Start(fmt.Sprint(i), slowRead(&calls, fmt.Sprint("value ", i), nil))
		}
		assert.Equal(t, 12, c.Len(), "none of them may be dropped while under way")
		time.Sleep(readTime)
		synctest.Wait()
		assert.Equal(t, 3, c.Len(), "back to MaxEntries once they have ended")
		for i, result := range results {
			v, err := result(t.Context())
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprint("value ", i), v, "a dropped entry's result is still its own")
		}
	})
}
