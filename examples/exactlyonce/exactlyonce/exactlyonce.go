// Package exactlyonce is the exactly-once example: payments are written with
// Delivery: ExactlyOnce, first named by a task-id key and then with random ids, each time
// twice over the same input, to show what the mode deduplicates and what it cannot.
//
// The program in examples/exactlyonce runs it; the integration tests call Run directly.
package exactlyonce

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeFor[Payment]())
	register.Function1x2(PaymentKey)
}

// KeyedQueue receives the tasks named by PaymentKey; RandomQueue those named at random.
var (
	KeyedQueue  = cloudtasksio.Queue{Project: "demo-project", Location: "us-central1", Name: "payments"}
	RandomQueue = cloudtasksio.Queue{Project: "demo-project", Location: "us-central1", Name: "payments-random-ids"}
)

// NameRetention is how long the in-process server keeps task names for the example's queues:
// the retention preflight requires at least StagedOptions.NameRetention (1h by default).
const NameRetention = 2 * time.Hour

// Payment is one payment to settle; all its fields form the JSON body.
type Payment struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Cents   int64  `json:"amount_cents"`
}

// PaymentKey is the task-id key of a payment: the same payment always gets the same task
// name, in any run of any pipeline.
func PaymentKey(p Payment) (string, error) { return "payment-" + p.ID, nil }

// DemoPayments returns the example's input: five payments.
func DemoPayments() []Payment {
	accounts := []string{"acct-17", "acct-42", "acct-08", "acct-42", "acct-99"}
	out := make([]Payment, len(accounts))
	for i, a := range accounts {
		out[i] = Payment{ID: fmt.Sprintf("pay-%03d", i+1), Account: a, Cents: int64(1250 * (i + 1))}
	}
	return out
}

// Config is the sink configuration of the example: exactly-once creation with the default
// StagedOptions, named by PaymentKey when keyed, else by random ids.
func Config(cloudTasksEndpoint string, keyed bool) cloudtasksio.Config {
	cfg := cloudtasksio.Config{
		Queue: RandomQueue,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:  "https://payments.example.com/settle",
			Body: formats.JSON(), // sent as Content-Type: application/json
		},
		Delivery:         cloudtasksio.ExactlyOnce,
		EmulatorEndpoint: cloudTasksEndpoint,
	}
	if keyed {
		cfg.Queue, cfg.TaskIDFn = KeyedQueue, PaymentKey
	}
	return cfg
}

// Build adds the example's transforms to s.
func Build(s beam.Scope, cloudTasksEndpoint string, keyed bool, payments []Payment) {
	elems := make([]any, len(payments))
	for i, p := range payments {
		elems[i] = p
	}
	cloudtasksio.Write(s, Config(cloudTasksEndpoint, keyed), beam.Create(s, elems...))
}

// Pass is one pipeline run of the example.
type Pass struct {
	Label string
	Queue cloudtasksio.Queue
	// Created counts the tasks this run created (numRecordsSend - tasksDeduplicated);
	// Deduplicated those Cloud Tasks already had (tasksDeduplicated).
	Created, Deduplicated int64
	// Stored is the number of tasks in the queue after the run.
	Stored int
	// MaxAgeMillis is the largest stagedTaskAgeMillis (staging to create) of the run;
	// MinRemainingMillis the smallest stagedTaskRemainingMillis (time left before the
	// creation deadline).
	MaxAgeMillis, MinRemainingMillis int64
}

// Result is what the example produced.
type Result struct {
	Passes []Pass
	// RetentionSet tells whether the example set the queues' name retention (only possible
	// on the in-process server).
	RetentionSet bool
}

// Options are the input of one run.
type Options struct {
	// Payments are written as one task each, in every pass.
	Payments []Payment
}

// Run creates the two queues (paused, so their tasks stay listable), then runs the pipeline
// four times with env.Runner: twice over opts.Payments with task-id keys, twice with random
// ids. It prints a summary to env.Out. With the in-process server it also sets the queues'
// name retention to NameRetention.
func Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error) {
	ct := env.CloudTasks
	client, err := ct.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	res := &Result{RetentionSet: ct.Embedded()}
	for _, q := range []cloudtasksio.Queue{KeyedQueue, RandomQueue} {
		if err := exampleenv.EnsureQueue(ctx, client, q, true); err != nil {
			return nil, err
		}
		if ct.Embedded() {
			ct.Server.SetTombstoneTTL(q.Path(), NameRetention)
		}
	}
	for _, pass := range []struct {
		label string
		keyed bool
	}{
		{"run 1: task-id keys", true},
		{"run 2: same input, same keys", true},
		{"run 3: random ids", false},
		{"run 4: same input, random ids", false},
	} {
		p, s := beam.NewPipelineWithRoot()
		Build(s, ct.Endpoint, pass.keyed, opts.Payments)
		pr, err := env.Runner(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%s: running the pipeline: %w", pass.label, err)
		}
		counters := exampleenv.Counters(pr, cloudtasksio.MetricsNamespace)
		dists := exampleenv.Distributions(pr, cloudtasksio.MetricsNamespace)
		q := RandomQueue
		if pass.keyed {
			q = KeyedQueue
		}
		tasks, err := exampleenv.ListTasks(ctx, client, q)
		if err != nil {
			return nil, err
		}
		res.Passes = append(res.Passes, Pass{
			Label:              pass.label,
			Queue:              q,
			Created:            counters[cloudtasksio.MetricRecordsSend] - counters[cloudtasksio.MetricTasksDeduplicated],
			Deduplicated:       counters[cloudtasksio.MetricTasksDeduplicated],
			Stored:             len(tasks),
			MaxAgeMillis:       dists[cloudtasksio.MetricStagedTaskAgeMillis].Max,
			MinRemainingMillis: dists[cloudtasksio.MetricStagedTaskRemainingMillis].Min,
		})
	}
	res.Print(env.Output())
	return res, nil
}

// Print writes one line per run and what the runs show.
func (r *Result) Print(w io.Writer) {
	opts := cloudtasksio.DefaultStagedOptions()
	window := opts.NameRetention - opts.ClockSkewAllowance - opts.RequestTimeout
	fmt.Fprintf(w, "Exactly-once creation: stage (name + deadline) -> Reshuffle -> create. Each staged task must be created\n")
	fmt.Fprintf(w, "within NameRetention %v - ClockSkewAllowance %v - RequestTimeout %v = %v of staging.\n",
		opts.NameRetention, opts.ClockSkewAllowance, opts.RequestTimeout, window)
	if r.RetentionSet {
		fmt.Fprintf(w, "The queues keep task names for %v (tombstone_ttl), which the retention preflight checks against %v.\n", NameRetention, opts.NameRetention)
	} else {
		fmt.Fprintf(w, "The queues' name retention was left as the emulator has it; the retention preflight checks it when the emulator serves the v2beta3 API.\n")
	}
	fmt.Fprintln(w)
	for _, p := range r.Passes {
		fmt.Fprintf(w, "  %-31s queue %-19s created %d, already there %d -> queue holds %d task(s)\n",
			p.Label, p.Queue.Name, p.Created, p.Deduplicated, p.Stored)
	}
	var maxAge, minLeft int64 = 0, -1
	for _, p := range r.Passes {
		maxAge = max(maxAge, p.MaxAgeMillis)
		if minLeft < 0 || p.MinRemainingMillis < minLeft {
			minLeft = p.MinRemainingMillis
		}
	}
	fmt.Fprintf(w, "\nEvery staged task was created at most %dms after staging, with at least %v of its window left\n",
		maxAge, (time.Duration(minLeft) * time.Millisecond).Round(time.Second))
	fmt.Fprintf(w, "(metrics stagedTaskAgeMillis and stagedTaskRemainingMillis).\n\n")
	fmt.Fprintf(w, "Runs 1 and 2: a task-id key gives a payment the same task name in every run, so Cloud Tasks answers\n")
	fmt.Fprintf(w, "ALREADY_EXISTS for the second run and nothing is duplicated (while the queue remembers the names).\n")
	fmt.Fprintf(w, "Runs 3 and 4: random ids are drawn when a run stages its elements, so a second run is new work with\n")
	fmt.Fprintf(w, "new names. They stop duplicates only when the runner retries a bundle after the Reshuffle and replays\n")
	fmt.Fprintf(w, "the checkpointed names (Dataflow); on prism or the Flink portable runner, use a task-id key.\n")
}
