package cloudtasksio

import (
	"context"
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
)

// The first-use checks of many DoFn instances starting together behind one slow read: the
// last instance must wait about one read, not one read per instance before it.

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
					return p.check(ctx, &cloudtaskspb.CreateTaskRequest{Parent: preflightQueue, Task: &cloudtaskspb.Task{
						MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.com/"}}}})
				})
				t.Logf("the last of %d instances waited %v behind one read of %v (%d reads)", firstUseInstances, longest, slowReadTime, c.reader.reads.Load())
				assert.Equal(t, int64(1), c.reader.reads.Load(), "one read for every instance")
				assert.LessOrEqual(t, longest, slowReadTime, "the last instance waits one read")
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
						return p.check(ctx, &cloudtaskspb.CreateTaskRequest{Parent: preflightQueue, Task: &cloudtaskspb.Task{
							MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "https://example.com/"}}}})
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
