package replay

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/deadletters/deadletters"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

func init() { register.Function2x2(FixOrder) }

// maxNoteBytes is how much of an order's note FixOrder keeps.
const maxNoteBytes = 1000

// FixOrder is the fix function of the demo, for the dead letters of the dead-letter example:
// the one function a user writes for a replay. It gets each dead letter and the order it
// carries, and returns the order to write again, or false to leave it out:
//
//   - an HTTP method Cloud Tasks does not know (SERIALIZATION) becomes POST;
//   - an endpoint that is not http(s) (INVALID_ARGUMENT) is cleared, so the order goes to
//     the fulfilment URL;
//   - a note that made the task too large (INVALID_ARGUMENT) is cut to 1,000 bytes;
//   - an order without an id (TASK_ID) cannot be named, so it is left out: a replay must
//     not create a task that a second replay could create again.
func FixOrder(fe deadletter.FailedElement, o deadletters.Order) (deadletters.Order, bool) {
	if o.ID == "" {
		return o, false
	}
	switch strings.ToUpper(o.Method) {
	case "", "POST", "PUT", "PATCH", "GET", "HEAD", "DELETE", "OPTIONS":
	default:
		o.Method = "POST"
	}
	if o.Endpoint != "" && !strings.HasPrefix(o.Endpoint, "https://") && !strings.HasPrefix(o.Endpoint, "http://") {
		o.Endpoint = ""
	}
	if len(o.Note) > maxNoteBytes {
		o.Note = o.Note[:maxNoteBytes]
	}
	return o, true
}

// DemoResult is what the demo did: the dead-letter example's run, then two replays of the
// same dead letters from two subscriptions.
type DemoResult struct {
	DeadLetters   *deadletters.Result
	First, Second *Result
}

// Demo subscriptions: each replay reads all the dead letters, as two consumers would.
const (
	FirstSubscription  = "projects/demo-project/subscriptions/order-dead-letters-replay"
	SecondSubscription = "projects/demo-project/subscriptions/order-dead-letters-replay-again"
)

// Demo runs the dead-letter example (ten orders, four dead letters on the topic), then
// replays its dead letters with FixOrder from FirstSubscription, then once more from
// SecondSubscription to show that the second replay creates nothing.
func Demo(ctx context.Context, env exampleenv.Env, pubSubEndpoint string) (*DemoResult, error) {
	set := deadletters.DefaultSettings(pubSubEndpoint)
	// The replay subscriptions must exist before the dead letters are published.
	c, err := newPubSub(ctx, FirstSubscription, pubSubEndpoint)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: set.Topic}); err != nil && status.Code(err) != codes.AlreadyExists {
		return nil, fmt.Errorf("creating topic %s: %w", set.Topic, err)
	}
	for _, sub := range []string{FirstSubscription, SecondSubscription} {
		_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: set.Topic, AckDeadlineSeconds: 60})
		if err != nil && status.Code(err) != codes.AlreadyExists {
			return nil, fmt.Errorf("creating subscription %s: %w", sub, err)
		}
	}
	res := &DemoResult{}
	res.DeadLetters, err = deadletters.Run(ctx, env, deadletters.Options{Settings: set, Orders: deadletters.DemoOrders()})
	dryRun := errors.Is(err, exampleenv.ErrDryRun)
	if err != nil && !dryRun {
		return nil, err
	}
	w := env.Output()
	cfg := deadletters.Config(env.CloudTasks.Endpoint, set)
	cfg.OnFailure = cloudtasksio.FailBundle
	opts := Options{Subscription: FirstSubscription, PubSubEndpoint: pubSubEndpoint, Write: cfg, Fix: FixOrder}
	if dryRun {
		// The runner translated the dead-letter pipeline without running it: translate the
		// replay too (the pipeline this example is about, printed last), and stop there.
		_, err = Run(ctx, env, opts, reflect.TypeFor[deadletters.Order]())
		return nil, err
	}
	fmt.Fprintln(w, "\nReplaying the dead letters with FixOrder:")
	if res.First, err = Run(ctx, env, opts, reflect.TypeFor[deadletters.Order]()); err != nil {
		return nil, err
	}
	fmt.Fprintln(w, "\nReplaying the same dead letters again, from a second subscription:")
	opts.Subscription = SecondSubscription
	if res.Second, err = Run(ctx, env, opts, reflect.TypeFor[deadletters.Order]()); err != nil {
		return nil, err
	}
	return res, nil
}
