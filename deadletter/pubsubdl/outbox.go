package pubsubdl

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Metrics of ToPubSub, in namespace "deadletter".
var (
	messagesPublished   = beam.NewCounter("deadletter", "messagesPublished")
	messagesReduced     = beam.NewCounter("deadletter", "messagesReduced")
	messagesOutstanding = beam.NewGauge("deadletter", "messagesOutstanding")
	flushWaitMillis     = beam.NewDistribution("deadletter", "flushWaitMillis")
)

// publisher sends messages to one topic and reports each outcome later. *pubsub.Publisher
// satisfies it through pubsubPublisher; tests use fakes.
type publisher interface {
	Publish(ctx context.Context, msg *pubsub.Message) publishResult
}

// publishResult is the pending outcome of one publish, as *pubsub.PublishResult.
type publishResult interface {
	Ready() <-chan struct{}
	Get(ctx context.Context) (serverID string, err error)
}

// pubsubPublisher adapts *pubsub.Publisher to publisher.
type pubsubPublisher struct{ p *pubsub.Publisher }

func (p pubsubPublisher) Publish(ctx context.Context, msg *pubsub.Message) publishResult {
	return p.p.Publish(ctx, msg)
}

// outbox holds the publishes of one DoFn instance within a bundle and waits for them when
// the in-flight bound fills and at the end of the bundle. It is used from one goroutine.
type outbox struct {
	pub     publisher
	topic   string
	limit   int           // MaxInFlightMessages after defaults: -1 unbounded, n >= 1 wait at n
	timeout time.Duration // one deadline per wait
	pending []publishResult
	sizes   []int // the size of each pending message (messageSize)
	bytes   int   // the size of the messages published since the last wait that emptied pending
}

// maxOutstandingBytes bounds, beside MaxInFlightMessages, the size of the messages one DoFn
// instance leaves outstanding (unless MaxInFlightMessages is -1): a thousand dead letters near
// Pub/Sub's 10 MB limit would otherwise hold about 10 GB while a topic fails.
const maxOutstandingBytes = 64 << 20

// publish hands msg to the publisher and, when the in-flight bound is reached, waits for
// everything outstanding.
func (o *outbox) publish(ctx context.Context, msg *pubsub.Message) error {
	size := messageSize(msg)
	o.pending = append(o.pending, o.pub.Publish(ctx, msg))
	o.sizes = append(o.sizes, size)
	o.bytes += size
	messagesOutstanding.Set(ctx, int64(len(o.pending)))
	if o.limit > 0 && (len(o.pending) >= o.limit || o.bytes >= maxOutstandingBytes) {
		return o.wait(ctx)
	}
	return nil
}

// wait blocks until every outstanding publish has completed, under one deadline of
// o.timeout for all of them. A failed publish or an expired deadline is returned as an
// error that fails the bundle; the messages are not dropped silently, because the runner
// replays the bundle's input. On success nothing is outstanding afterwards.
func (o *outbox) wait(ctx context.Context) error {
	if len(o.pending) == 0 {
		o.bytes = 0
		return nil
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	defer func() { flushWaitMillis.Update(ctx, time.Since(start).Milliseconds()) }()

	total := len(o.pending)
	for i, r := range o.pending {
		_, err := r.Get(wctx)
		if err == nil {
			messagesPublished.Inc(ctx, 1)
			continue
		}
		size := o.sizes[i]
		o.pending, o.sizes = o.pending[i:], o.sizes[i:]
		messagesOutstanding.Set(ctx, int64(len(o.pending)))
		if !isReady(r) {
			// The wait ended before this publish did: the deadline expired or the bundle
			// was cancelled.
			left, largest := 0, 0
			for j, p := range o.pending {
				if !isReady(p) {
					left++
					largest = max(largest, o.sizes[j])
				}
			}
			if ctx.Err() != nil {
				return fmt.Errorf("bundle cancelled with %d of %d messages to topic %q unpublished: %w", left, total, o.topic, ctx.Err())
			}
			return fmt.Errorf("%d of %d messages to topic %q were still unpublished when FlushTimeout (%v) expired (the largest of them %d bytes); failing the bundle so its input is replayed: %w", left, total, o.topic, o.timeout, largest, err)
		}
		if refusedForSize(err) {
			return fmt.Errorf("the server refused a message of %d bytes to topic %q for its size: %w; Pub/Sub takes up to 10 MB, an emulator may take less (pstest and other gRPC servers with default settings: 4 MiB, 4194304 bytes)", size, o.topic, err)
		}
		return fmt.Errorf("publishing a message of %d bytes to topic %q failed: %w", size, o.topic, err)
	}
	o.pending, o.sizes = o.pending[:0], o.sizes[:0]
	o.bytes = 0
	messagesOutstanding.Set(ctx, 0)
	return nil
}

// isReady reports whether r has completed, without blocking.
func isReady(r publishResult) bool {
	select {
	case <-r.Ready():
		return true
	default:
		return false
	}
}
