package cloudtasksio

import (
	"context"
	"sync"
	"time"

	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// retentionReader reads how long a queue remembers the names of deleted or executed tasks.
// ok is false when the queue does not report it (the service default of 1h applies).
type retentionReader interface {
	tombstoneTTL(ctx context.Context, queue string) (ttl time.Duration, ok bool, err error)
}

// betaQueueReader reads tombstone_ttl through the v2beta3 API: the v2 Queue lacks the field.
type betaQueueReader struct{ spec clientSpec }

func (r betaQueueReader) tombstoneTTL(ctx context.Context, queue string) (time.Duration, bool, error) {
	// One GetQueue per queue and process needs no connection pool.
	spec := r.spec
	spec.ChannelPoolSize = 0
	client, err := betaClients.get(ctx, spec)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	q, err := client.GetQueue(ctx, &betapb.GetQueueRequest{Name: queue})
	if err != nil {
		return 0, false, err
	}
	if q.GetTombstoneTtl() == nil {
		return 0, false, nil
	}
	return q.GetTombstoneTtl().AsDuration(), true, nil
}

// retentionVerdict is a passed retention check, kept in verified (caches.go).
type retentionVerdict struct {
	unimplemented bool      // the server lacks v2beta3 GetQueue: not verified
	logged        sync.Once // that it was not verified
}

type retentionKey struct {
	client    clientSpec
	queue     string
	retention time.Duration
}

// defaultTombstoneTTL is the name retention of a queue that does not report one.
const defaultTombstoneTTL = time.Hour

// verifyRetention checks once per process, client setting and queue that the queue remembers
// task names at least as long as the staged options assume. A server that does not implement
// the v2beta3 API (an emulator) skips the check with one log line. A read that fails for the
// moment (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) fails the bundles waiting for it
// and is not remembered: the next bundle reads again. Any other failure is remembered for
// gcpconn.FailureTTL. ctx bounds the wait for a read that another instance started.
func verifyRetention(ctx context.Context, r retentionReader, spec clientSpec, queue string, want time.Duration) error {
	key := retentionKey{client: spec, queue: queue, retention: want}
	v, err := verified.Get(ctx, key, func() (*retentionVerdict, error) {
		// The read serves every instance waiting for it and may outlive the bundle that
		// started it: it runs on a context of its own.
		ttl, ok, err := r.tombstoneTTL(context.Background(), queue)
		switch {
		case status.Code(err) == codes.Unimplemented:
			return &retentionVerdict{unimplemented: true}, nil
		case err != nil:
			code := engine.OutermostCode(err)
			failed := stagedErrorf("reading the name retention of queue %s failed with %s: %s; "+
				"or set StagedOptions.VerifyQueueRetention to false to skip the check (the retention is then yours to guarantee)",
				queue, code, retentionFailureMeaning(code))
			if engine.Classify(err, false) == engine.Transient {
				// It says nothing about the queue: the next bundle reads again.
				return nil, gcpconn.Transient(failed)
			}
			return nil, failed
		case !ok && defaultTombstoneTTL < want:
			return nil, stagedErrorf("queue %s reports no tombstone_ttl, so it keeps task names for the default %v, shorter than StagedOptions.NameRetention %v",
				queue, defaultTombstoneTTL, want)
		case ok && ttl < want:
			return nil, stagedErrorf("queue %s keeps task names for %v (tombstone_ttl), shorter than StagedOptions.NameRetention %v",
				queue, ttl, want)
		}
		return &retentionVerdict{}, nil
	})
	if err == nil && v.unimplemented {
		v.logged.Do(func() {
			infof(ctx, stagedLabel+"the server does not implement the v2beta3 GetQueue call (an emulator?); not verifying the name retention of queue %s", queue)
		})
	}
	return err
}

// retentionFailureMeaning says what a failed GetQueue of the retention preflight means and
// what to do about it, by the outermost status.
func retentionFailureMeaning(code string) string {
	switch code {
	case "PERMISSION_DENIED":
		return "the sink's identity may not read the queue; grant cloudtasks.queues.get (for example with roles/cloudtasks.viewer) on the queue or its project"
	case "NOT_FOUND":
		return "the queue does not exist (check Config.Queue: project, location and name), or it is reactivating after a long idle time; the bundle is retried"
	case "UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED":
		return "the service could not be reached or was overloaded; this is transient: the bundle fails, and the next bundle reads the queue again"
	case "UNAUTHENTICATED":
		return "the sink's credentials were refused; check Config.ServiceAccountKeyFile or the worker's application-default credentials"
	case "INVALID_ARGUMENT":
		return "the service says this is not a valid queue name"
	}
	return "the service refused the read"
}
