package replay

import (
	"context"
	"fmt"

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
