// Package quickstart is the program behind examples/quickstart, kept as a library so that the
// integration tests run exactly what the example runs.
//
// This file is the pipeline: generated orders written with one cloudtasksio.Write, one named
// JSON task per order. run.go is the harness around it (the in-memory Cloud Tasks server with
// a rate-limited queue, the local endpoint, the wait for every delivery) and summary.go the
// numbers it prints.
package quickstart

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Order)(nil)).Elem())
	register.Function3x0(generateOrders)
	register.Emitter1[Order]()
	register.Function2x0(countDeadLetter)
}

// Pipeline builds the example's pipeline: n generated orders written to queue as JSON tasks
// for url, with failed elements counted as dead letters.
func Pipeline(n int, queue cloudtasksio.Queue, url, emulator string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	orders := beam.ParDo(s, generateOrders, beam.Create(s, n))
	deadLetters := cloudtasksio.Write(s, cloudtasksio.Config{
		Queue: queue,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:  url,
			Body: formats.JSON(), // sent as Content-Type: application/json
		},
		OnFailure:        cloudtasksio.DeadLetter,
		EmulatorEndpoint: emulator,
	}, orders)
	beam.ParDo0(s, countDeadLetter, deadLetters)
	return p
}

// Order is one generated order: its JSON body fields, and Key, the task-id metadata that names
// its task so that a replayed order is deduplicated by Cloud Tasks.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
	// TotalCents is the order total in cents.
	TotalCents int64 `json:"total_cents"`

	Key string `cloudtasks:"task-id"`
}

// metricsNamespace holds the example's own counters, next to the sink's "cloudtasksio".
const metricsNamespace = "quickstart"

var (
	customers = []string{"ada", "grace", "alan", "edsger", "barbara", "ken", "margaret", "dennis"}
	items     = []string{"keyboard", "monitor", "cable", "lamp", "chair", "desk", "headset"}
)

// generateOrders emits n deterministic orders, counting them.
func generateOrders(ctx context.Context, n int, emit func(Order)) {
	generated := beam.NewCounter(metricsNamespace, "orders")
	for i := range n {
		id := fmt.Sprintf("%06d", i+1)
		emit(Order{
			ID:         id,
			Customer:   customers[i%len(customers)],
			Item:       items[(i*7)%len(items)],
			Quantity:   1 + i%5,
			TotalCents: int64(499 + (i*389)%20000),
			Key:        "order-" + id,
		})
	}
	generated.Inc(ctx, int64(n))
}

// countDeadLetter counts the elements of the sink's dead-letter output.
func countDeadLetter(ctx context.Context, _ deadletter.FailedElement) {
	beam.NewCounter(metricsNamespace, "deadLetters").Inc(ctx, 1)
}
