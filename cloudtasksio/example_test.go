package cloudtasksio_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// Payment is an element type for a declarative HTTP target: its untagged fields are the JSON
// body, its `cloudtasks` fields are request metadata that never reach the body.
type Payment struct {
	ID          string    `json:"id"`
	AmountCents int64     `json:"amount_cents"`
	Key         string    `cloudtasks:"task-id"`       // names the task: replays are deduplicated
	NotBefore   time.Time `cloudtasks:"schedule-time"` // zero = dispatch as soon as the queue allows
}

// Invoice is an element type without metadata: TaskIDFn names its tasks.
type Invoice struct {
	ID          string `json:"id"`
	AmountCents int64  `json:"amount_cents"`
}

// invoiceID is a TaskIDFn: the task id is cloudtasksio.TaskID of the key it returns. Like
// every function in a Config it is top-level and registered (see init).
func invoiceID(i Invoice) (string, error) {
	if i.ID == "" {
		return "", errors.New("invoice without an id")
	}
	return "invoice-" + i.ID, nil
}

func init() {
	register.Function1x2(invoiceID)
}

// Write one task per element to a fixed queue. Each task is a POST of the element's JSON body
// to the URL; the queue's rate limits pace the deliveries. The pipeline is built here; run it
// with beamx.Run (on prism, Flink or Dataflow).
func ExampleWrite() {
	p, s := beam.NewPipelineWithRoot()
	payments := beam.Create(s,
		Payment{ID: "1", AmountCents: 1250, Key: "payment-1"},
		Payment{ID: "2", AmountCents: 990, Key: "payment-2", NotBefore: time.Date(2026, 12, 24, 8, 0, 0, 0, time.UTC)},
	)
	queue, err := cloudtasksio.NewQueue("my-project", "europe-west1", "payments")
	if err != nil {
		log.Fatal(err)
	}
	cloudtasksio.Write(s, cloudtasksio.Config{
		Queue: queue,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:  "https://payments.example.com/settle",
			OIDC: &cloudtasksio.OIDCToken{ServiceAccountEmail: "invoker@my-project.iam.gserviceaccount.com"},
			Body: formats.JSON(), // sent as Content-Type: application/json
		},
		// OnFailure is FailBundle: the returned dead letters stay empty.
	}, payments)
	_ = p // beamx.Run(ctx, p)
}

// Route the elements Cloud Tasks will never accept to a Pub/Sub topic instead of failing the
// bundle. TryWrite returns a bad configuration as an error, at pipeline construction.
// Under DeadLetter, the PCollection it returns holds one deadletter.FailedElement per routed
// failure, with Code cloudtasksio.CodeSerialization, CodeTaskID or CodeInvalidArgument.
func ExampleTryWrite() {
	p, s := beam.NewPipelineWithRoot()
	invoices := beam.Create(s, Invoice{ID: "1", AmountCents: 100}, Invoice{AmountCents: 5}) // the second has no id
	failed, err := cloudtasksio.TryWrite(s, cloudtasksio.Config{
		Queue:     cloudtasksio.Queue{Project: "my-project", Location: "europe-west1", Name: "invoices"},
		HTTP:      &cloudtasksio.HTTPTarget{URL: "https://billing.example.com/invoices", Body: formats.JSON()},
		TaskIDFn:  invoiceID, // fails for the second invoice: a TASK_ID dead letter
		OnFailure: cloudtasksio.DeadLetter,
	}, invoices)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("dead letters:", failed.Type())
	if err := pubsubdl.TryToPubSub(s, pubsubdl.PubSubConfig{Topic: "projects/my-project/topics/invoice-dead-letters"}, failed); err != nil {
		fmt.Println(err)
		return
	}
	_ = p // beamx.Run(ctx, p)

	// A mistake in the Config is an error naming the field, before anything runs.
	_, err = cloudtasksio.TryWrite(s, cloudtasksio.Config{
		Queue:     cloudtasksio.Queue{Project: "my-project", Location: "europe-west1", Name: "invoices"},
		HTTP:      &cloudtasksio.HTTPTarget{URL: "https://billing.example.com/invoices", Body: formats.JSON()},
		Delivery:  cloudtasksio.ExactlyOnce,
		OnFailure: cloudtasksio.DeadLetter,
	}, invoices)
	fmt.Println(err)
	// Output:
	// dead letters: deadletter.FailedElement
	// cloudtasksio: Config.Delivery ExactlyOnce requires Config.OnFailure FailBundle
}

// Build a Config from the flat option keys a template takes as flags
// (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md lists every
// key). Bad keys and values are errors naming the key.
func ExampleConfigFromOptions() {
	cfg, err := cloudtasksio.ConfigFromOptions(map[string]string{
		"project":                         "my-project",
		"location":                        "europe-west1",
		"queue":                           "orders",
		"http.url":                        "https://orders.example.com/ingest",
		"http.headers.X-Api-Version":      "2026-06",
		"format":                          "json",
		"sink.delivery-guarantee":         "exactly-once",
		"sink.staged.name-retention":      "2h",
		"sink.in-flight.max-tasks":        "500",
		"sink.recovery.max-attempts":      "5",
		"sink.metrics.per-destination":    "true",
		"http.oidc.service-account-email": "invoker@my-project.iam.gserviceaccount.com",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("queue:", cfg.Queue.Path())
	fmt.Println("url:", cfg.HTTP.URL, "headers:", cfg.HTTP.Headers, "body:", cfg.HTTP.Body.Name)
	fmt.Println("oidc:", cfg.HTTP.OIDC.ServiceAccountEmail)
	fmt.Println("delivery:", cfg.Delivery, "name retention:", cfg.Staged.NameRetention, "expired:", cfg.Staged.ExpiredEnvelopePolicy)
	fmt.Println("max in flight:", cfg.Writer.MaxInFlightTasks, "attempts:", cfg.Writer.RecoveryMaxAttempts, "per destination:", cfg.Writer.PerDestinationMetrics)
	fmt.Println("failure policy:", cfg.OnFailure)

	_, err = cloudtasksio.ConfigFromOptions(map[string]string{
		"project": "my-project", "location": "europe-west1", "queue": "orders",
		"http.url": "https://orders.example.com/ingest", "sink.in-flight.max-tasks": "many",
	})
	fmt.Println(err)
	// Output:
	// queue: projects/my-project/locations/europe-west1/queues/orders
	// url: https://orders.example.com/ingest headers: map[X-Api-Version:2026-06] body: json
	// oidc: invoker@my-project.iam.gserviceaccount.com
	// delivery: ExactlyOnce name retention: 2h0m0s expired: ExpiredFail
	// max in flight: 500 attempts: 5 per destination: true
	// failure policy: FailBundle
	// cloudtasksio: option "sink.in-flight.max-tasks": value "many" is not a decimal integer; accepted: an integer of at least 1
}
