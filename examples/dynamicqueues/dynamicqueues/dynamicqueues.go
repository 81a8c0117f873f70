// Package dynamicqueues is the dynamic-destinations example: one Write routes each order to
// the queue of its region with Config.QueueFn, and per-destination metrics count what each
// queue received.
//
// The program in examples/dynamicqueues runs it; the integration tests call Run directly.
package dynamicqueues

import (
	"context"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeFor[Order]())
	register.Function1x2(QueueForOrder)
}

// Project is the Cloud Tasks project of every queue of the example.
const Project = "demo-project"

// Order is one order; all its fields form the JSON body.
type Order struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	Amount int    `json:"amount"`
}

// regionQueues maps a region to its queue, each in the location closest to the region's
// fulfilment centre. Orders of any other region go to FallbackQueue.
var regionQueues = map[string]cloudtasksio.Queue{
	"eu":   {Project: Project, Location: "europe-west1", Name: "orders-eu"},
	"us":   {Project: Project, Location: "us-central1", Name: "orders-us"},
	"asia": {Project: Project, Location: "asia-northeast1", Name: "orders-asia"},
}

// FallbackQueue receives the orders of regions without a queue of their own.
var FallbackQueue = cloudtasksio.Queue{Project: Project, Location: "us-central1", Name: "orders-other"}

// Queues returns every queue an order can be routed to.
func Queues() []cloudtasksio.Queue {
	out := []cloudtasksio.Queue{}
	for _, r := range slices.Sorted(maps.Keys(regionQueues)) {
		out = append(out, regionQueues[r])
	}
	return append(out, FallbackQueue)
}

// QueueForOrder is the example's Config.QueueFn: a top-level function, registered in init,
// that picks the order's queue by region. Returning an error (this one never does) would fail
// the bundle whatever the failure policy, because a routing mistake is not the element's
// fault.
func QueueForOrder(o Order) (cloudtasksio.Queue, error) {
	if q, ok := regionQueues[strings.ToLower(o.Region)]; ok {
		return q, nil
	}
	return FallbackQueue, nil
}

// DemoOrders returns the example's input: twelve orders over four regions.
func DemoOrders() []Order {
	regions := []string{"eu", "us", "eu", "asia", "us", "eu", "latam", "us", "asia", "eu", "us", "eu"}
	out := make([]Order, len(regions))
	for i, r := range regions {
		out[i] = Order{ID: fmt.Sprint(2001 + i), Region: r, Amount: 10 * (i + 1)}
	}
	return out
}

// Config is the sink configuration of the example: per-order queues, a JSON POST per order,
// and per-destination metrics. An order whose task Cloud Tasks rejects is logged and dropped
// rather than stopping the other regions' orders; its queue's sendErrors counter shows it,
// which is what the counter is for.
func Config(cloudTasksEndpoint string) cloudtasksio.Config {
	return cloudtasksio.Config{
		QueueFn: QueueForOrder,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:  "https://fulfilment.example.com/orders",
			Body: formats.JSON(), // sent as Content-Type: application/json
		},
		Writer:           cloudtasksio.WriterOptions{PerDestinationMetrics: true},
		OnFailure:        cloudtasksio.LogAndDrop,
		EmulatorEndpoint: cloudTasksEndpoint,
	}
}

// Build adds the example's transforms to s.
func Build(s beam.Scope, cloudTasksEndpoint string, orders []Order) {
	elems := make([]any, len(orders))
	for i, o := range orders {
		elems[i] = o
	}
	cloudtasksio.Write(s, Config(cloudTasksEndpoint), beam.Create(s, elems...))
}

// Destination is what one queue received.
type Destination struct {
	Queue cloudtasksio.Queue
	// Sent is the metric destination.<queue path>.recordsSend: tasks the queue accepted.
	Sent int64
	// Errors is the metric destination.<queue path>.sendErrors.
	Errors int64
	// Stored is the number of tasks listed in the queue after the run.
	Stored int
	// OrderIDs are the ids in the bodies of the stored tasks, sorted.
	OrderIDs []string
}

// Result is what a run produced.
type Result struct {
	// Destinations has one entry per queue of Queues(), in that order.
	Destinations []Destination
	// Counters are the sink's metrics (namespace cloudtasksio), summed over steps.
	Counters map[string]int64
}

// Options are the input of one run.
type Options struct {
	// Orders are written as one task each, to the queue of their region.
	Orders []Order
}

// Run creates the queues (paused, so their tasks stay listable), runs the pipeline over
// opts.Orders with env.Runner, and prints what each queue received to env.Out.
func Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error) {
	client, err := env.CloudTasks.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	for _, q := range Queues() {
		if err := exampleenv.EnsureQueue(ctx, client, q, true); err != nil {
			return nil, err
		}
	}

	p, s := beam.NewPipelineWithRoot()
	Build(s, env.CloudTasks.Endpoint, opts.Orders)
	pr, err := env.Runner(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("running the pipeline: %w", err)
	}
	res := &Result{Counters: exampleenv.Counters(pr, cloudtasksio.MetricsNamespace)}
	for _, q := range Queues() {
		d := Destination{
			Queue:  q,
			Sent:   res.Counters[cloudtasksio.MetricDestinationRecordsSend(q.Path())],
			Errors: res.Counters[cloudtasksio.MetricDestinationSendErrors(q.Path())],
		}
		tasks, err := exampleenv.ListTasks(ctx, client, q)
		if err != nil {
			return nil, err
		}
		d.Stored = len(tasks)
		for _, t := range tasks {
			d.OrderIDs = append(d.OrderIDs, orderID(t.GetHttpRequest().GetBody()))
		}
		slices.Sort(d.OrderIDs)
		res.Destinations = append(res.Destinations, d)
	}
	res.Print(env.Output())
	return res, nil
}

// orderID pulls the id out of a task body written by the JSON format ({"id":"2001",...}).
func orderID(body []byte) string {
	_, rest, ok := strings.Cut(string(body), `"id":"`)
	id, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		return "?"
	}
	return id
}

// Print writes one line per queue, then the totals.
func (r *Result) Print(w io.Writer) {
	width := 0
	for _, d := range r.Destinations {
		width = max(width, len(d.Queue.Path()))
	}
	fmt.Fprintln(w, "Per-destination metrics (namespace cloudtasksio) and the tasks each queue holds:")
	for _, d := range r.Destinations {
		fmt.Fprintf(w, "  %-*s  recordsSend=%d sendErrors=%d stored=%d orders=%s\n",
			width, d.Queue.Path(), d.Sent, d.Errors, d.Stored, strings.Join(d.OrderIDs, ","))
	}
	fmt.Fprintf(w, "Total: numRecordsSend=%d numRecordsSendErrors=%d over %d queues.\n",
		r.Counters[cloudtasksio.MetricRecordsSend], r.Counters[cloudtasksio.MetricRecordsSendErrors], len(r.Destinations))
}
