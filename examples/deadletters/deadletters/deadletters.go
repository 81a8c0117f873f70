// Package deadletters is the dead-letter example: orders become Cloud Tasks, and the orders
// Cloud Tasks will never accept go to a Pub/Sub topic instead of failing the pipeline. After
// the pipeline it reads the topic the way a consumer would and recovers each rejected task.
//
// The program in examples/deadletters runs it; the integration tests call Run directly.
package deadletters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeFor[Order]())
	register.Function1x2(stampOrder)
	register.Function1x2(OrderTaskKey)
}

// FulfilmentURL is where the tasks of orders without their own endpoint go.
const FulfilmentURL = "https://fulfilment.example.com/orders"

// Order is one order event. The tagged fields are request metadata (see https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/metadata.md):
// Endpoint overrides the URL of the task and Method its HTTP method. Every other field is
// part of the JSON body.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Items    int    `json:"items"`
	Note     string `json:"note,omitempty"`
	PlacedAt int64  `json:"placed_at"` // Unix milliseconds; also the element's event time

	Endpoint string `cloudtasks:"url"`         // empty: FulfilmentURL
	Method   string `cloudtasks:"http-method"` // empty: POST
}

// stampOrder gives each order its placement time as event time, so dead letters carry it.
func stampOrder(o Order) (beam.EventTime, Order) {
	return mtime.FromMilliseconds(o.PlacedAt), o
}

// OrderTaskKey names each order's task after the order, so a replayed bundle does not create
// it twice. An order without an id cannot be named: that error sends it to the dead letters
// with code TASK_ID.
func OrderTaskKey(o Order) (string, error) {
	if o.ID == "" {
		return "", errors.New("the order has no id")
	}
	return "order-" + o.ID, nil
}

// DemoOrders returns the example's input: six good orders and one of each failure the
// dead-letter policy receives.
func DemoOrders() []Order {
	at := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	order := func(i int, id, customer string) Order {
		return Order{ID: id, Customer: customer, Items: i%3 + 1, PlacedAt: at.Add(time.Duration(i) * time.Minute).UnixMilli()}
	}
	var out []Order
	for i, c := range []string{"ada", "grace", "edsger", "barbara", "donald", "frances"} {
		out = append(out, order(i, fmt.Sprint(1001+i), c))
	}
	tooBig := order(6, "1007", "ken")
	tooBig.Note = strings.Repeat("gift message ", 12_000) // ~156 KB: over the 100 KiB task limit
	badURL := order(7, "1008", "linus")
	badURL.Endpoint = "ftp://partner.example.com/orders" // not http(s): the sink's own check
	badMethod := order(8, "1009", "margaret")
	badMethod.Method = "FETCH" // not an HTTP method: the task cannot be built
	noID := order(9, "", "niklaus")
	return append(out, tooBig, badURL, badMethod, noID)
}

// Settings name the Pub/Sub emulator and the resources of one run.
type Settings struct {
	// PubSubEndpoint is the Pub/Sub emulator's "host:port".
	PubSubEndpoint string
	// Queue receives the orders' tasks. It is created (paused, so that its tasks stay
	// listable) when missing.
	Queue cloudtasksio.Queue
	// Topic ("projects/P/topics/T") receives the dead letters, and Subscription
	// ("projects/P/subscriptions/S") is how the consumer reads them. Both are created when
	// missing, before the pipeline runs: ToPubSub never creates its topic.
	Topic, Subscription string
}

// DefaultSettings returns the example's resource names for the Pub/Sub emulator at
// pubSubEndpoint.
func DefaultSettings(pubSubEndpoint string) Settings {
	return Settings{
		PubSubEndpoint: pubSubEndpoint,
		Queue:          cloudtasksio.Queue{Project: "demo-project", Location: "us-central1", Name: "orders"},
		Topic:          "projects/demo-project/topics/order-dead-letters",
		Subscription:   "projects/demo-project/subscriptions/order-dead-letters-audit",
	}
}

// Config is the sink configuration the example uses: a JSON POST per order, tasks named by
// OrderTaskKey, failures sent to the dead letters.
func Config(cloudTasksEndpoint string, set Settings) cloudtasksio.Config {
	return cloudtasksio.Config{
		Queue: set.Queue,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:  FulfilmentURL,
			Body: formats.JSON(), // sent as Content-Type: application/json
		},
		TaskIDFn:         OrderTaskKey,
		OnFailure:        cloudtasksio.DeadLetter,
		EmulatorEndpoint: cloudTasksEndpoint,
	}
}

// Build adds the example's transforms to s: orders -> event time -> cloudtasksio.Write ->
// dead letters -> pubsubdl.ToPubSub.
func Build(s beam.Scope, cloudTasksEndpoint string, set Settings, orders []Order) {
	elems := make([]any, len(orders))
	for i, o := range orders {
		elems[i] = o
	}
	stamped := beam.ParDo(s, stampOrder, beam.Create(s, elems...))
	failed := cloudtasksio.Write(s, Config(cloudTasksEndpoint, set), stamped)
	pub := pubsubdl.DefaultPubSubConfig(set.Topic)
	pub.EmulatorEndpoint = set.PubSubEndpoint
	pubsubdl.ToPubSub(s, pub, failed)
}

// DeadLetter is one message a consumer received from the dead-letter topic.
type DeadLetter struct {
	// Attributes are the message's attributes (see the pubsubdl.Attr* constants).
	Attributes map[string]string
	// Failed is the dead letter rebuilt from the message with pubsubdl.FromMessage.
	Failed deadletter.FailedElement
	// Task is the task recovered from Failed with cloudtasksio.FailedTask, nil when no task
	// could be built.
	Task *cloudtaskspb.Task
	// Order is the order the dead letter stands for, decoded from Failed with
	// deadletter.DecodeElement: what examples/replay fixes and writes again.
	Order *Order
}

// Result is what a run produced.
type Result struct {
	// Tasks are the tasks stored in the queue after the run.
	Tasks []*cloudtaskspb.Task
	// Counters are the sink's metrics (namespace cloudtasksio), summed over steps.
	Counters map[string]int64
	// Published is the number of messages ToPubSub had accepted (metric messagesPublished).
	Published int64
	// DeadLetters are the messages the consumer received, ordered by code and event time.
	DeadLetters []DeadLetter

	set Settings // what the run used, for Print
}

// Options are the input of one run.
type Options struct {
	// Settings name the Pub/Sub emulator, the queue, the topic and the subscription.
	Settings Settings
	// Orders are written as one task each; those Cloud Tasks cannot accept become dead
	// letters.
	Orders []Order
}

// Run prepares the queue, topic and subscription, runs the pipeline over opts.Orders with
// env.Runner, reads the dead letters back through the subscription and the tasks through the
// Cloud Tasks API, and prints a summary to env.Out.
func Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error) {
	set := opts.Settings
	tasks, err := env.CloudTasks.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer tasks.Close()
	if err := exampleenv.EnsureQueue(ctx, tasks, set.Queue, true); err != nil {
		return nil, err
	}
	ps, err := newPubSubClient(ctx, set)
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	if err := ensureTopicAndSubscription(ctx, ps, set); err != nil {
		return nil, err
	}

	p, s := beam.NewPipelineWithRoot()
	Build(s, env.CloudTasks.Endpoint, set, opts.Orders)
	pr, err := env.Runner(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("running the pipeline: %w", err)
	}
	res := &Result{
		Counters:  exampleenv.Counters(pr, cloudtasksio.MetricsNamespace),
		Published: exampleenv.Counters(pr, "deadletter")["messagesPublished"],
		set:       set,
	}
	if res.DeadLetters, err = consume(ctx, ps, set.Subscription, int(res.Published)); err != nil {
		return nil, err
	}
	if res.Tasks, err = exampleenv.ListTasks(ctx, tasks, set.Queue); err != nil {
		return nil, err
	}
	res.Print(env.Output())
	return res, nil
}

func newPubSubClient(ctx context.Context, set Settings) (*pubsub.Client, error) {
	project, ok := strings.CutPrefix(set.Topic, "projects/")
	project, _, found := strings.Cut(project, "/")
	if !ok || !found {
		return nil, fmt.Errorf("topic %q is not projects/P/topics/T", set.Topic)
	}
	c, err := pubsub.NewClient(ctx, project, exampleenv.EmulatorOptions(set.PubSubEndpoint)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the Pub/Sub emulator at %s: %w", set.PubSubEndpoint, err)
	}
	return c, nil
}

func ensureTopicAndSubscription(ctx context.Context, c *pubsub.Client, set Settings) error {
	if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: set.Topic}); err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("creating topic %s: %w", set.Topic, err)
	}
	_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{Name: set.Subscription, Topic: set.Topic, AckDeadlineSeconds: 30})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("creating subscription %s: %w", set.Subscription, err)
	}
	return nil
}

// consumeTimeout bounds the wait for the published dead letters to arrive.
const consumeTimeout = 30 * time.Second

// consume receives want messages from subscription (more if they are already there),
// acknowledges them and recovers their tasks.
func consume(ctx context.Context, c *pubsub.Client, subscription string, want int) ([]DeadLetter, error) {
	if want == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, consumeTimeout)
	defer cancel()
	var mu sync.Mutex
	byID := map[string]DeadLetter{}
	err := c.Subscriber(subscription).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		dl := DeadLetter{Attributes: m.Attributes}
		// What any consumer does: rebuild the FailedElement from the message, let the sink
		// decode its task and Beam's coder its order.
		if fe, _, err := pubsubdl.FromMessage(m); err == nil {
			dl.Failed = fe
			if task, err := cloudtasksio.FailedTask(fe); err == nil {
				dl.Task = task
			}
			if o, err := deadletter.DecodeElement[Order](fe); err == nil {
				dl.Order = &o
			}
		}
		mu.Lock()
		defer mu.Unlock()
		byID[m.ID] = dl
		if len(byID) >= want {
			cancel()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("receiving from %s: %w", subscription, err)
	}
	if len(byID) < want {
		return nil, fmt.Errorf("received %d of the %d dead letters from %s within %v", len(byID), want, subscription, consumeTimeout)
	}
	out := make([]DeadLetter, 0, len(byID))
	for _, dl := range byID {
		out = append(out, dl)
	}
	slices.SortFunc(out, func(x, y DeadLetter) int {
		a, b := x.Attributes, y.Attributes
		return cmp.Or(cmp.Compare(a[pubsubdl.AttrCode], b[pubsubdl.AttrCode]), cmp.Compare(a[pubsubdl.AttrEventTime], b[pubsubdl.AttrEventTime]))
	})
	return out, nil
}

// Print writes the summary of the run: what was created, then each dead letter as a consumer
// of the topic sees it.
func (r *Result) Print(w io.Writer) {
	set := r.set
	created := r.Counters[cloudtasksio.MetricRecordsSend]
	fmt.Fprintf(w, "Cloud Tasks accepted %d order(s); queue %s now holds %d task(s).\n", created, set.Queue.Path(), len(r.Tasks))
	fmt.Fprintf(w, "%d order(s) reached the failure policy (numRecordsSendErrors); %d dead letter(s) published to %s.\n",
		r.Counters[cloudtasksio.MetricRecordsSendErrors], r.Published, set.Topic)
	if len(r.DeadLetters) > 0 {
		fmt.Fprintf(w, "A consumer of %s received:\n\n", set.Subscription)
	}
	for i, dl := range r.DeadLetters {
		a := dl.Attributes
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "dead letter %d of %d: code %s\n", i+1, len(r.DeadLetters), a[pubsubdl.AttrCode])
		fmt.Fprintf(w, "  destination: %s\n", a[pubsubdl.AttrDestination])
		fmt.Fprintf(w, "  event time:  %s\n", orNone(a[pubsubdl.AttrEventTime]))
		fmt.Fprintf(w, "  error:       %s\n", exampleenv.Cut(a[pubsubdl.AttrError], 220))
		fmt.Fprintf(w, "  published:   worker %s, bundle %s\n", a[pubsubdl.AttrWorker], a[pubsubdl.AttrBundle])
		if o := dl.Order; o != nil {
			fmt.Fprintf(w, "  order:       id %q, customer %s, %d item(s) (decoded from the dead letter)\n", o.ID, o.Customer, o.Items)
		}
		if dl.Task == nil {
			fmt.Fprintf(w, "  task:        none: no task could be built; the order above is the record to fix and replay\n")
			continue
		}
		req := dl.Task.GetHttpRequest()
		fmt.Fprintf(w, "  task:        %s %s, %d-byte body %s\n", req.GetHttpMethod(), req.GetUrl(), len(req.GetBody()), exampleenv.Cut(string(req.GetBody()), 60))
		name := dl.Task.GetName()
		if name == "" {
			name = "(unnamed)"
		}
		fmt.Fprintf(w, "  task name:   %s\n", name)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// StartPubSub returns the Pub/Sub endpoint an example publishes its dead letters to, and a
// function that releases it: endpoint itself when it is set (an emulator the user runs), else
// the address of an in-process pstest server that the function stops.
func StartPubSub(endpoint string) (addr string, stop func()) {
	if endpoint != "" {
		return endpoint, func() {}
	}
	srv := pstest.NewServer()
	return srv.Addr, func() { _ = srv.Close() }
}
