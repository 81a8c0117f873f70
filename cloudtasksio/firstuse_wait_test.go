package cloudtasksio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// The first-use checks of many DoFn instances starting together behind one slow read: the
// last instance must wait about one read, not one read per instance before it. Under
// PreflightWarn, the default, neither the creates nor the bundle's end wait for the queue read.

const (
	firstUseInstances = 64
	slowReadTime      = 200 * time.Millisecond
)

// slowQueueReader answers every queue read after slowReadTime, with err or with the queue in
// state.
type slowQueueReader struct {
	state cloudtaskspb.Queue_State
	err   error
	reads atomic.Int64
}

func (r *slowQueueReader) readQueue(_ context.Context, queue string) (*cloudtaskspb.Queue, error) {
	r.reads.Add(1)
	time.Sleep(slowReadTime)
	if r.err != nil {
		return nil, r.err
	}
	return &cloudtaskspb.Queue{Name: queue, State: r.state}, nil
}

// slowRetentionReader answers every retention read after slowReadTime.
type slowRetentionReader struct {
	err   error
	reads atomic.Int64
}

func (r *slowRetentionReader) tombstoneTTL(context.Context, string) (time.Duration, bool, error) {
	r.reads.Add(1)
	time.Sleep(slowReadTime)
	return time.Hour, true, r.err
}

// startTogether runs check on firstUseInstances goroutines at once and returns the longest
// wait and every result.
func startTogether(check func() error) (longest time.Duration, errs []error) {
	errs = make([]error, firstUseInstances)
	waits := make([]time.Duration, firstUseInstances)
	var wg sync.WaitGroup
	for i := range firstUseInstances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[i] = check()
			waits[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for _, w := range waits {
		longest = max(longest, w)
	}
	return longest, errs
}

func TestSixtyFourInstancesWaitForOneSlowQueuePreflightRead(t *testing.T) {
	for _, c := range []struct {
		name    string
		mode    QueuePreflight
		reader  *slowQueueReader
		failing bool
	}{
		{"the read succeeds", PreflightWarn, &slowQueueReader{state: cloudtaskspb.Queue_RUNNING}, false},
		{"the read times out", PreflightWarn, &slowQueueReader{err: status.Error(codes.DeadlineExceeded, "slow")}, false},
		{"the queue is paused under PreflightFail", PreflightFail, &slowQueueReader{state: cloudtaskspb.Queue_PAUSED}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A client setting of this run alone, so no other test or run shares its state.
				spec := clientSpec{EmulatorEndpoint: ownSetting("first-use-"+c.mode.String()+"-"+c.name) + ".invalid:1"}
				longest, errs := startTogether(func() error {
					ctx, _ := metricsContext() // each instance's bundle has its own
					p := newQueuePreflighter(c.mode, spec)
					p.reader = c.reader
					p.startBundle()
					start := time.Now()
					err := p.check(ctx, &cloudtaskspb.CreateTaskRequest{Parent: preflightQueue, Task: &cloudtaskspb.Task{
						MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.com/"}}}})
					if c.mode == PreflightWarn {
						// Nothing waits for a warning.
						assert.Zero(t, time.Since(start), "under PreflightWarn the element does not wait for the read")
						p.finishBundle(ctx)
					}
					return err
				})
				synctest.Wait() // the read has begun
				t.Logf("the last of %d instances waited %v behind one read of %v (%d reads)", firstUseInstances, longest, slowReadTime, c.reader.reads.Load())
				assert.Equal(t, int64(1), c.reader.reads.Load(), "one read for every instance")
				if c.mode == PreflightWarn {
					assert.Zero(t, longest, "no instance waits for the read, not even at the bundle's end")
					time.Sleep(slowReadTime) // the read ends before the bubble does
				} else {
					assert.LessOrEqual(t, longest, slowReadTime, "the last instance waits one read")
				}
				for _, err := range errs {
					if c.failing {
						require.Error(t, err)
						assert.Contains(t, err.Error(), "is PAUSED")
					} else {
						assert.NoError(t, err)
					}
				}
			})
		})
	}
}

func TestSixtyFourInstancesWaitForOneSlowRetentionRead(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"the read succeeds", nil},
		{"the read times out", status.Error(codes.DeadlineExceeded, "slow")},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &slowRetentionReader{err: c.err}
				spec := clientSpec{EmulatorEndpoint: ownSetting("first-use-retention-"+c.name) + ".invalid:1"}
				longest, errs := startTogether(func() error {
					return verifyRetention(context.Background(), r, spec, preflightQueue, time.Hour)
				})
				t.Logf("the last of %d instances waited %v behind one read of %v (%d reads)", firstUseInstances, longest, slowReadTime, r.reads.Load())
				assert.Equal(t, int64(1), r.reads.Load(), "one read for every instance")
				assert.LessOrEqual(t, longest, slowReadTime, "the last instance waits one read")
				for _, err := range errs {
					if c.err != nil {
						require.Error(t, err)
						assert.Contains(t, err.Error(), "DEADLINE_EXCEEDED")
					} else {
						assert.NoError(t, err)
					}
				}
			})
		})
	}
}

// warnPreflighter returns the PreflightWarn preflighter of a DoFn instance, with a process
// state of its own and its first bundle started, reading through a slowQueueReader that finds
// every queue in state.
func warnPreflighter(state cloudtaskspb.Queue_State) (*queuePreflighter, *slowQueueReader) {
	r := &slowQueueReader{state: state}
	p := scriptedPreflighter(PreflightWarn, r, &gcpconn.Cache[preflightKey, *preflightResult]{})
	p.startBundle()
	return p, r
}

// createIn is an HTTP create request to the queue called name.
func createIn(name string) *cloudtaskspb.CreateTaskRequest {
	req := httpCreate("https://example.com/")
	req.Parent = "projects/p/locations/l/queues/" + name
	return req
}

func TestUnderPreflightWarnABundleOverManyNewQueuesWaitsForItsReadsTogetherNotOneAfterAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := warnPreflighter(cloudtaskspb.Queue_PAUSED)
		logs := captureSyncLogs(t)
		ctx, counters := metricsContext()
		const queues = 50
		start := time.Now()
		for i := range queues {
			require.NoError(t, p.check(ctx, createIn(fmt.Sprint("q", i))))
		}
		// The reads run in rounds of maxPendingReads+1 (the one whose element waits for the
		// oldest has started too): the elements waited for one read per round. The bundle's end
		// does not wait for the last round.
		rounds := (queues + maxPendingReads) / (maxPendingReads + 1)
		assert.Equal(t, time.Duration(rounds-1)*slowReadTime, time.Since(start), "not one read per queue")
		p.finishBundle(ctx)
		assert.Equal(t, time.Duration(rounds-1)*slowReadTime, time.Since(start), "the bundle's end did not wait")
		counted := counters()[MetricQueuePreflightPaused]
		assert.Less(t, counted, int64(queues), "the last reads are still under way")

		time.Sleep(slowReadTime)
		synctest.Wait()
		assert.Equal(t, int64(queues), r.reads.Load(), "one read per queue")
		assert.Len(t, logs.lines("is PAUSED"), queues, "each read logged what it found as it ended")
		assert.Equal(t, counted, counters()[MetricQueuePreflightPaused], "counting needs a bundle")

		// The next bundle knows the queues: no read, no wait, nothing said again; it counts
		// what the last one could not.
		p.startBundle()
		for i := range queues {
			require.NoError(t, p.check(ctx, createIn(fmt.Sprint("q", i))))
		}
		p.finishBundle(ctx)
		assert.Equal(t, int64(queues), r.reads.Load())
		assert.Equal(t, int64(queues), counters()[MetricQueuePreflightPaused])
		assert.Len(t, logs.lines("is PAUSED"), queues)
	})
}

func TestAnInstanceHasAtMostMaxPendingReadsUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := warnPreflighter(cloudtaskspb.Queue_PAUSED)
		ctx, counters := metricsContext()
		check := func(i int) {
			require.NoError(t, p.check(ctx, createIn(fmt.Sprint("q", i))))
		}
		start := time.Now()
		for i := range maxPendingReads {
			check(i)
		}
		assert.Zero(t, time.Since(start), "up to maxPendingReads reads, no element waits")
		synctest.Wait() // the reads have begun
		assert.Equal(t, int64(maxPendingReads), r.reads.Load())

		check(maxPendingReads)
		assert.Equal(t, slowReadTime, time.Since(start), "the next element waited for the oldest read")
		assert.Len(t, p.pending, maxPendingReads)
		assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused], "the read it waited for is reported")

		// The others had started with the oldest and ended with it: no more waiting.
		for i := maxPendingReads + 1; i < 2*maxPendingReads; i++ {
			check(i)
		}
		assert.Equal(t, slowReadTime, time.Since(start))
		synctest.Wait() // every read that ended with the oldest has said so
		p.finishBundle(ctx)
		assert.Equal(t, slowReadTime, time.Since(start), "the bundle's end does not wait for the last reads")
		assert.Len(t, p.pending, maxPendingReads-1, "they are left to a later bundle")
		assert.Equal(t, int64(maxPendingReads+1), counters()[MetricQueuePreflightPaused], "what had ended is counted")
		time.Sleep(slowReadTime)
		synctest.Wait()
		p.startBundle()
		p.finishBundle(ctx)
		assert.Empty(t, p.pending)
		assert.Equal(t, int64(2*maxPendingReads), counters()[MetricQueuePreflightPaused])
	})
}

func TestAReadABundleLeftUnderWayIsReportedByTheNextBundleOfItsQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := warnPreflighter(cloudtaskspb.Queue_DISABLED)
		ctx, counters := metricsContext()
		// The bundle fails before its end: the runner calls no FinishBundle.
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
		time.Sleep(slowReadTime)
		synctest.Wait()
		assert.Empty(t, counters())

		// Its retry finds the read done and reports it at once, once.
		p.startBundle()
		start := time.Now()
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
		assert.Zero(t, time.Since(start))
		assert.Equal(t, int64(1), counters()[MetricQueuePreflightDisabled])
		p.finishBundle(ctx)
		assert.Equal(t, int64(1), counters()[MetricQueuePreflightDisabled])
		assert.Equal(t, int64(1), r.reads.Load())
	})
}

func TestABundleEndingWhileAPreflightReadIsUnderWayDoesNotWaitForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := warnPreflighter(cloudtaskspb.Queue_PAUSED)
		logs := captureSyncLogs(t)
		ctx, counters := metricsContext()
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
		start := time.Now()
		p.finishBundle(ctx)
		assert.Zero(t, time.Since(start), "the bundle's end does not wait for the read")
		synctest.Wait()
		assert.Empty(t, counters(), "nothing known, nothing counted")
		assert.Empty(t, logs.lines("is PAUSED"), "nor said")

		// The read ends between bundles, and logs what it found then.
		time.Sleep(slowReadTime)
		synctest.Wait()
		assert.Len(t, logs.lines("is PAUSED"), 1, "logged as the read ended")
		assert.Empty(t, counters(), "counting needs a bundle")

		// The next bundle writes elsewhere; its end counts the read the last one left, and
		// does not wait for its own.
		p.startBundle()
		start = time.Now()
		require.NoError(t, p.check(ctx, createIn("other")))
		p.finishBundle(ctx)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused], "the first queue counted by the next bundle's end")
		time.Sleep(slowReadTime)
		synctest.Wait()
		assert.Len(t, logs.lines("is PAUSED"), 2)
		assert.Equal(t, int64(2), r.reads.Load())
	})
}

// Under PreflightFail a bundle whose context ends while the queue read is under way fails: it
// does not go on to create tasks in a queue the read has not seen (here a paused one), and the
// queue is checked again by the next element or bundle.
func TestUnderPreflightFailABundleWhoseContextEndsDuringTheReadCreatesNothingUnchecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &slowQueueReader{state: cloudtaskspb.Queue_PAUSED}
		p := scriptedPreflighter(PreflightFail, r, &gcpconn.Cache[preflightKey, *preflightResult]{})
		p.startBundle()
		base, _ := metricsContext()
		ctx, cancel := context.WithTimeout(base, slowReadTime/2)
		defer cancel()
		start := time.Now()
		err := p.check(ctx, createIn("q"))
		assert.Equal(t, slowReadTime/2, time.Since(start), "the wait ends with the context")
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "projects/p/locations/l/queues/q")
		assert.Contains(t, err.Error(), "sink.queue-preflight=fail")

		// The read went on for the others; the same bundle's next element waits for it and
		// meets the paused queue instead of passing unchecked.
		err = p.check(base, createIn("q"))
		var fe *preflightFindingsError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, int64(1), r.reads.Load(), "one read, shared")
	})
}

// Under PreflightWarn an instance keeps at most maxPendingReads reads even when its context
// has ended, whatever number of new queues its elements name: the oldest read's report is left
// to the next bundle that sees it.
func TestUnderPreflightWarnAnEndedContextKeepsThePendingReadsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, r := warnPreflighter(cloudtaskspb.Queue_PAUSED)
		base, _ := metricsContext()
		ctx, cancel := context.WithCancel(base)
		cancel()
		for i := range 5 * maxPendingReads {
			require.NoError(t, p.check(ctx, createIn(fmt.Sprint("q", i))))
			assert.LessOrEqual(t, len(p.pending), maxPendingReads, "after element %d", i)
		}
		assert.Len(t, p.pending, maxPendingReads)
		synctest.Wait()
		assert.Equal(t, int64(5*maxPendingReads), r.reads.Load(), "every queue's read started")
		time.Sleep(slowReadTime)
		synctest.Wait() // the reads end before the bubble does
	})
}

func TestAFailedBundlesReadsAreReportedByTheInstancesNextBundleWhereverItWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := warnPreflighter(cloudtaskspb.Queue_PAUSED)
		ctx, counters := metricsContext()
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
		// The bundle fails: no FinishBundle. The read ends; the next bundle writes to no queue
		// at all.
		time.Sleep(slowReadTime)
		synctest.Wait()
		p.startBundle()
		p.finishBundle(ctx)
		assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused])
		assert.Empty(t, p.pending)
	})
}

func TestAnElementToAQueueTheProcessHasReadDoesNotWaitForOtherReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := warnPreflighter(cloudtaskspb.Queue_RUNNING)
		ctx, _ := metricsContext()
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/"))) // the known queue
		p.finishBundle(ctx)
		time.Sleep(slowReadTime) // its read ends

		p.startBundle()
		for i := range maxPendingReads {
			require.NoError(t, p.check(ctx, createIn(fmt.Sprint("q", i))))
		}
		start := time.Now()
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
		assert.Zero(t, time.Since(start), "its answer is at hand: no wait behind the reads under way")
		assert.Len(t, p.pending, maxPendingReads)
		p.finishBundle(ctx)
		time.Sleep(slowReadTime) // the reads end before the bubble does
	})
}

// BenchmarkFirstUseWaitOf64Instances measures, in real time, how long the last of 64 DoFn
// instances starting together waits for its first-use check behind one read of 200 ms
// (last-wait-ms), and how many reads they make (reads/op). Run it with -benchtime=1x: each
// iteration is a fresh process state.
func BenchmarkFirstUseWaitOf64Instances(b *testing.B) {
	for _, name := range []string{"preflight/read-times-out", "preflight/paused-under-PreflightFail", "retention/read-times-out"} {
		b.Run(name, func(b *testing.B) {
			var last time.Duration
			var reads int64
			for b.Loop() {
				spec := clientSpec{EmulatorEndpoint: ownSetting("bench-"+strings.ReplaceAll(name, "/", "-")) + ".invalid:1"}
				var check func() error
				var count func() int64
				switch name {
				case "preflight/read-times-out", "preflight/paused-under-PreflightFail":
					r := &slowQueueReader{state: cloudtaskspb.Queue_PAUSED}
					mode := PreflightFail
					if name == "preflight/read-times-out" {
						r.err, mode = status.Error(codes.DeadlineExceeded, "slow"), PreflightWarn
					}
					check = func() error {
						ctx, _ := metricsContext()
						p := newQueuePreflighter(mode, spec)
						p.reader = r
						p.startBundle()
						err := p.check(ctx, &cloudtaskspb.CreateTaskRequest{Parent: preflightQueue, Task: &cloudtaskspb.Task{
							MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.com/"}}}})
						p.finishBundle(ctx) // under PreflightWarn the wait is here
						return err
					}
					count = r.reads.Load
				default:
					r := &slowRetentionReader{err: status.Error(codes.DeadlineExceeded, "slow")}
					check = func() error { return verifyRetention(context.Background(), r, spec, preflightQueue, time.Hour) }
					count = r.reads.Load
				}
				longest, _ := startTogether(check)
				last, reads = longest, count()
			}
			b.ReportMetric(float64(last.Milliseconds()), "last-wait-ms")
			b.ReportMetric(float64(reads), "reads/op")
		})
	}
}
