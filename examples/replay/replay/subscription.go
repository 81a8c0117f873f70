package replay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

// subscriber is what the replay calls on its subscription. The Pub/Sub client serves it;
// tests give a fake, so that the waits of a pull run in fake time.
type subscriber interface {
	Pull(ctx context.Context, req *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error)
	ModifyAckDeadline(ctx context.Context, req *pubsubpb.ModifyAckDeadlineRequest) error
	Acknowledge(ctx context.Context, req *pubsubpb.AcknowledgeRequest) error
	Close() error
}

// clientSubscriber is a subscriber on the Pub/Sub client.
type clientSubscriber struct{ c *pubsub.Client }

func (s clientSubscriber) Pull(ctx context.Context, req *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error) {
	return s.c.SubscriptionAdminClient.Pull(ctx, req)
}

func (s clientSubscriber) ModifyAckDeadline(ctx context.Context, req *pubsubpb.ModifyAckDeadlineRequest) error {
	return s.c.SubscriptionAdminClient.ModifyAckDeadline(ctx, req)
}

func (s clientSubscriber) Acknowledge(ctx context.Context, req *pubsubpb.AcknowledgeRequest) error {
	return s.c.SubscriptionAdminClient.Acknowledge(ctx, req)
}

func (s clientSubscriber) Close() error { return s.c.Close() }

// connect returns a subscriber of subscription: from dial when it is set (tests), else from a
// Pub/Sub client for endpoint.
func connect(ctx context.Context, dial func(context.Context) (subscriber, error), subscription, endpoint string) (subscriber, error) {
	if dial != nil {
		return dial(ctx)
	}
	c, err := newPubSub(ctx, subscription, endpoint)
	if err != nil {
		return nil, err
	}
	return clientSubscriber{c}, nil
}

// newPubSub connects to the emulator at endpoint, or to the service when it is empty.
func newPubSub(ctx context.Context, subscription, endpoint string) (*pubsub.Client, error) {
	project, _, err := splitSubscription(subscription)
	if err != nil {
		return nil, err
	}
	var opts []option.ClientOption
	if endpoint != "" {
		opts = exampleenv.EmulatorOptions(endpoint)
	}
	c, err := pubsub.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("replay: connecting to Pub/Sub for %s: %w", subscription, err)
	}
	return c, nil
}

// leases holds, per replay run, the ack ids this process's reader pulled that no ack step has
// acknowledged yet: what Run releases when the run ends. On a runner whose workers run in other
// processes (Dataflow) they hold their own, which Run cannot reach: there, what a failed run
// read comes back when the reader's ack deadline passes.
var leases = leaseBook{runs: map[string]map[string]struct{}{}}

type leaseBook struct {
	mu   sync.Mutex
	runs map[string]map[string]struct{}
}

// hold records ids as pulled by run.
func (b *leaseBook) hold(run string, ids []string) {
	if run == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.runs[run]
	if held == nil {
		held = map[string]struct{}{}
		b.runs[run] = held
	}
	for _, id := range ids {
		held[id] = struct{}{}
	}
}

// done forgets ids, acknowledged.
func (b *leaseBook) done(run string, ids []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		delete(b.runs[run], id)
	}
}

// take returns what run holds and forgets the run.
func (b *leaseBook) take(run string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.runs[run]))
	for id := range b.runs[run] {
		ids = append(ids, id)
	}
	delete(b.runs, run)
	return ids
}

// releaseTimeout bounds the release of a run's dead letters, which may follow a Ctrl-C.
const releaseTimeout = 30 * time.Second

// release sets the ack deadline of every dead letter run read and did not acknowledge to 0, so
// that the subscription offers them again at once, and returns how many it released. It runs
// whether the run succeeded or not, on a context of its own: a stopped run's context is done.
func release(ctx context.Context, opts Options, run string) (int, error) {
	ids := leases.take(run)
	if len(ids) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	c, err := connect(ctx, nil, opts.Subscription, opts.PubSubEndpoint)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	released := 0
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		if err := c.ModifyAckDeadline(ctx, &pubsubpb.ModifyAckDeadlineRequest{Subscription: opts.Subscription, AckIds: batch, AckDeadlineSeconds: 0}); err != nil {
			return released, fmt.Errorf("replay: releasing %d dead letters on %s (they come back when their ack deadline passes): %w", len(batch)+len(ids), opts.Subscription, err)
		}
		released += len(batch)
	}
	return released, nil
}
