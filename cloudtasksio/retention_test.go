package cloudtasksio

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// fakeRetention answers the retention preflight.
type fakeRetention struct {
	ttl   time.Duration
	ok    bool
	err   error
	calls int
}

func (r *fakeRetention) tombstoneTTL(context.Context, string) (time.Duration, bool, error) {
	r.calls++
	return r.ttl, r.ok, r.err
}

func TestRetentionPreflight(t *testing.T) {
	for _, c := range []struct {
		name string
		r    fakeRetention
		want time.Duration
		err  string
	}{
		{"shorter", fakeRetention{ttl: 30 * time.Minute, ok: true}, time.Hour, "keeps task names for 30m0s (tombstone_ttl), shorter than StagedOptions.NameRetention 1h0m0s"},
		{"equal", fakeRetention{ttl: time.Hour, ok: true}, time.Hour, ""},
		{"absent means 1h", fakeRetention{}, time.Hour, ""},
		{"absent is shorter than 2h", fakeRetention{}, 2 * time.Hour, "default 1h0m0s, shorter than StagedOptions.NameRetention 2h0m0s"},
		{"unimplemented skips", fakeRetention{err: status.Error(codes.Unimplemented, "no v2beta3")}, time.Hour, ""},
		{"permission denied", fakeRetention{err: status.Error(codes.PermissionDenied, "secret detail")}, time.Hour, "failed with PERMISSION_DENIED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A queue of this run alone: a verdict is kept for the process.
			queue := "projects/p/locations/l/queues/" + ownSetting(strings.ReplaceAll(c.name, " ", "-"))
			err := verifyRetention(context.Background(), &c.r, clientSpec{}, queue, c.want)
			if c.err == "" {
				require.NoError(t, err)
				require.NoError(t, verifyRetention(context.Background(), &c.r, clientSpec{}, queue, c.want))
				assert.Equal(t, 1, c.r.calls, "checked once per process and queue")
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
			assert.NotContains(t, err.Error(), "secret detail", "only the status code is reported")
			assert.Contains(t, err.Error(), queue)
		})
	}
}

func TestRetentionPreflightErrorsSayWhatEachStatusMeans(t *testing.T) {
	for code, c := range map[codes.Code]struct{ want, notWant string }{
		codes.PermissionDenied:  {"grant cloudtasks.queues.get", ""},
		codes.NotFound:          {"does not exist", "cloudtasks.queues.get"},
		codes.Unavailable:       {"could not be reached", "cloudtasks.queues.get"},
		codes.DeadlineExceeded:  {"could not be reached", "cloudtasks.queues.get"},
		codes.Unauthenticated:   {"credentials", "cloudtasks.queues.get"},
		codes.InvalidArgument:   {"not a valid queue", "cloudtasks.queues.get"},
		codes.Internal:          {"INTERNAL", "cloudtasks.queues.get"},
		codes.ResourceExhausted: {"could not be reached", "cloudtasks.queues.get"},
	} {
		t.Run(code.String(), func(t *testing.T) {
			// A queue of this run alone: a failed read is remembered for gcpconn.FailureTTL.
			queue := "projects/p/locations/l/queues/" + ownSetting("preflight-"+strings.ToLower(code.String()))
			err := verifyRetention(context.Background(), &fakeRetention{err: status.Error(code, "secret detail")}, clientSpec{}, queue, time.Hour)
			require.Error(t, err)
			assert.Contains(t, err.Error(), engine.CodeName(code))
			assert.Contains(t, err.Error(), c.want)
			if c.notWant != "" {
				assert.NotContains(t, err.Error(), c.notWant, "only PERMISSION_DENIED calls for the permission")
			}
			assert.Contains(t, err.Error(), "VerifyQueueRetention", "the way out is always named")
			assert.NotContains(t, err.Error(), "secret detail")
		})
	}
}

// flakyRetention answers the retention read with err, counting the reads.
type flakyRetention struct {
	mu    sync.Mutex
	err   error
	reads int
}

func (r *flakyRetention) tombstoneTTL(context.Context, string) (time.Duration, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	return time.Hour, true, r.err
}

func TestRetentionCheckRemembersAFailedReadForFailureTTLThenReadsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &flakyRetention{err: status.Error(codes.PermissionDenied, "no access")}
		spec := clientSpec{EmulatorEndpoint: ownSetting("retention-failure-ttl") + ".invalid:1"}
		const queue = "projects/p/locations/l/queues/retention-failure-ttl"
		for range 10 { // bundles retried at once
			err := verifyRetention(context.Background(), r, spec, queue, time.Hour)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "PERMISSION_DENIED")
		}
		r.mu.Lock()
		r.err = nil // the permission is granted
		r.mu.Unlock()
		require.Error(t, verifyRetention(context.Background(), r, spec, queue, time.Hour), "remembered until FailureTTL")
		assert.Equal(t, 1, r.reads)

		time.Sleep(gcpconn.FailureTTL)
		require.NoError(t, verifyRetention(context.Background(), r, spec, queue, time.Hour))
		require.NoError(t, verifyRetention(context.Background(), r, spec, queue, time.Hour))
		assert.Equal(t, 2, r.reads, "read again once, then kept")
	})
}

// A read that fails for the moment says nothing about the queue: the bundle fails (its retry
// is the runner's), and the next bundle reads again instead of failing at once for
// gcpconn.FailureTTL on the strength of one overloaded answer.
func TestRetentionCheckReadsAgainAfterATransientFailure(t *testing.T) {
	for _, code := range []codes.Code{codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &flakyRetention{err: status.Error(code, "busy")}
				spec := clientSpec{EmulatorEndpoint: ownSetting("retention-transient-"+code.String()) + ".invalid:1"}
				const queue = "projects/p/locations/l/queues/retention-transient"
				for bundle := range 5 {
					err := verifyRetention(context.Background(), r, spec, queue, time.Hour)
					require.Error(t, err, "bundle %d", bundle)
					assert.Contains(t, err.Error(), engine.CodeName(code))
					assert.Contains(t, err.Error(), "the next bundle reads the queue again")
					assert.Equal(t, bundle+1, r.count(), "bundle %d read the queue", bundle)
					time.Sleep(100 * time.Millisecond) // the runner retries the bundle
				}

				r.set(nil) // the service answers again
				require.NoError(t, verifyRetention(context.Background(), r, spec, queue, time.Hour), "the next bundle passes")
				require.NoError(t, verifyRetention(context.Background(), r, spec, queue, time.Hour))
				assert.Equal(t, 6, r.count(), "a definitive answer is kept")
			})
		})
	}
}

// set makes the reads answer err from now on.
func (r *flakyRetention) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// count returns the reads so far.
func (r *flakyRetention) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}
