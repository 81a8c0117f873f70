// Package exampleenv holds what the example programs share: the emulators they run against
// (an external one named by a flag, or an in-process default), the Cloud Tasks calls that
// prepare and inspect queues, and reading a pipeline's metrics.
//
// The examples talk to Cloud Tasks only through its API, so the same code works against the
// in-process cloudtaskstest server and against any external emulator.
package exampleenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// Env is what an example runs against and where it reports. Every example's Run takes one:
//
//	Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error)
type Env struct {
	// CloudTasks is the Cloud Tasks emulator the example writes to (StartCloudTasks).
	CloudTasks *CloudTasks
	// Runner runs the example's pipelines.
	Runner Runner
	// Out receives what the example prints (its progress and its result); nil prints
	// nothing.
	Out io.Writer
}

// Output is env.Out, or io.Discard when it is nil.
func (env Env) Output() io.Writer {
	if env.Out == nil {
		return io.Discard
	}
	return env.Out
}

// Runner runs a pipeline and returns its result, whose metrics the examples print. Programs
// pass beamx.RunWithMetrics (the runner chosen by Beam's --runner flag); tests pass a
// function around ptest.RunWithMetrics.
type Runner func(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error)

var verbose = flag.Bool("verbose", false, "show the runner's log lines")

// ErrDryRun is what RunWithMetrics returns when the runner only translated the pipeline and
// printed the job without running it (Dataflow's --dry_run): there is nothing to wait for and
// no result to show. Main reports it and exits with status 0.
var ErrDryRun = errors.New("dry run: the pipeline was translated and printed (at INFO; --verbose shows it), not run")

// RunWithMetrics runs p on the runner Beam's flags choose (beamx.RunWithMetrics) and returns
// ErrDryRun when that runner only printed the job (Dataflow's --dry_run).
func RunWithMetrics(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	pr, err := beamx.RunWithMetrics(ctx, p)
	if err == nil && pr == nil && dryRunFlagSet() {
		return nil, ErrDryRun
	}
	return pr, err
}

// dryRunFlagSet says whether Beam's Dataflow runner flag --dry_run is set.
func dryRunFlagSet() bool {
	f := flag.Lookup("dry_run")
	return f != nil && f.Value.String() == "true"
}

// Main is the body of every example's main function: it parses the flags, initialises Beam,
// keeps the runner's log lines quiet unless --verbose is given, runs run with a context that
// Ctrl-C cancels, and exits with status 1 and the error, prefixed by name, when run fails.
// A run that ends in ErrDryRun (the example's runner is RunWithMetrics) is reported on stderr
// and is a success.
func Main(name string, run func(ctx context.Context) error) {
	flag.Parse()
	beam.Init()
	if !*verbose {
		Quiet()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx)
	stop()
	if errors.Is(err, ErrDryRun) {
		fmt.Fprintln(os.Stderr, name+":", ErrDryRun)
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Quiet keeps the runner's informational log lines (prism's job progress, the SDK's INFO
// lines) off stderr, so that an example's own output stands out. Warnings and errors still
// show.
func Quiet() {
	log.LogLevel = "warn"
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// CloudTasks is the Cloud Tasks emulator an example or an integration test runs against: an
// external emulator, or an in-process cloudtaskstest server. Either way its user creates
// queues through the API and points the sink at Endpoint.
type CloudTasks struct {
	// Endpoint is the emulator's "host:port", for cloudtasksio.Config.EmulatorEndpoint.
	Endpoint string
	// Server is the in-process server, or nil when Endpoint names an external emulator.
	Server *cloudtaskstest.Server
}

// StartCloudTasks returns the external emulator at endpoint when it is not empty, and
// otherwise starts an in-process cloudtaskstest server with opts (which apply only then).
// Close stops what was started.
func StartCloudTasks(endpoint string, opts ...cloudtaskstest.Option) *CloudTasks {
	if endpoint != "" {
		return &CloudTasks{Endpoint: endpoint}
	}
	srv := cloudtaskstest.NewServer(opts...)
	return &CloudTasks{Endpoint: srv.Addr, Server: srv}
}

// Embedded reports whether the emulator runs in this process.
func (c *CloudTasks) Embedded() bool { return c.Server != nil }

// Close stops the in-process server, if one was started.
func (c *CloudTasks) Close() {
	if c.Server != nil {
		c.Server.Close()
	}
}

// NewClient returns a Cloud Tasks client connected to the emulator. Close it when done.
func (c *CloudTasks) NewClient(ctx context.Context) (*cloudtasks.Client, error) {
	return NewClient(ctx, c.Endpoint)
}

// NewClient returns a Cloud Tasks client for the emulator at endpoint. Close it when done.
func NewClient(ctx context.Context, endpoint string) (*cloudtasks.Client, error) {
	c, err := cloudtasks.NewClient(ctx, EmulatorOptions(endpoint)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the Cloud Tasks emulator at %s: %w", endpoint, err)
	}
	return c, nil
}

// EmulatorOptions are the client options of an emulator at endpoint ("host:port"): a
// plaintext connection without credentials. Never use them for a Google service: a token sent
// over plaintext could be read on the way.
func EmulatorOptions(endpoint string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(endpoint),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// CreateQueue creates queue q with the given rate limits (nil for the emulator's defaults) and
// returns it as the emulator reports it.
func CreateQueue(ctx context.Context, c *cloudtasks.Client, q cloudtasksio.Queue, limits *cloudtaskspb.RateLimits) (*cloudtaskspb.Queue, error) {
	created, err := createQueue(ctx, c, q, limits)
	if err != nil {
		return nil, fmt.Errorf("creating queue %s: %w", q.Path(), err)
	}
	return created, nil
}

func createQueue(ctx context.Context, c *cloudtasks.Client, q cloudtasksio.Queue, limits *cloudtaskspb.RateLimits) (*cloudtaskspb.Queue, error) {
	parent := "projects/" + q.Project + "/locations/" + q.Location
	return c.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{Parent: parent, Queue: &cloudtaskspb.Queue{Name: q.Path(), RateLimits: limits}})
}

// EnsureQueue creates queue unless it exists, and pauses it when paused is true. A paused
// queue keeps its tasks, so an example can list them after the pipeline instead of racing
// their dispatch.
func EnsureQueue(ctx context.Context, c *cloudtasks.Client, q cloudtasksio.Queue, paused bool) error {
	_, err := createQueue(ctx, c, q, nil)
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("creating queue %s: %w", q.Path(), err)
	}
	if paused {
		if _, err := c.PauseQueue(ctx, &cloudtaskspb.PauseQueueRequest{Name: q.Path()}); err != nil {
			return fmt.Errorf("pausing queue %s: %w", q.Path(), err)
		}
	}
	return nil
}

// PurgeQueue deletes every task of queue, so a rerun of an example starts empty. Names of the
// purged tasks stay taken for the queue's name retention, as in the service.
func PurgeQueue(ctx context.Context, c *cloudtasks.Client, q cloudtasksio.Queue) error {
	if _, err := c.PurgeQueue(ctx, &cloudtaskspb.PurgeQueueRequest{Name: q.Path()}); err != nil {
		return fmt.Errorf("purging queue %s: %w", q.Path(), err)
	}
	return nil
}

// ListTasks returns every task stored in queue, with bodies and headers (the FULL view).
func ListTasks(ctx context.Context, c *cloudtasks.Client, q cloudtasksio.Queue) ([]*cloudtaskspb.Task, error) {
	it := c.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: q.Path(), ResponseView: cloudtaskspb.Task_FULL})
	var out []*cloudtaskspb.Task
	for {
		t, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the tasks of queue %s: %w", q.Path(), err)
		}
		out = append(out, t)
	}
}

// Counters returns the pipeline's counters in namespace, summed over steps by name.
func Counters(pr beam.PipelineResult, namespace string) map[string]int64 {
	out := map[string]int64{}
	if pr == nil {
		return out
	}
	res := pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == namespace })
	for _, c := range res.Counters() {
		out[c.Name()] += c.Result()
	}
	return out
}

// Distributions returns the pipeline's distributions in namespace, merged over steps by name.
func Distributions(pr beam.PipelineResult, namespace string) map[string]metrics.DistributionValue {
	out := map[string]metrics.DistributionValue{}
	if pr == nil {
		return out
	}
	res := pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == namespace })
	for _, d := range res.Distributions() {
		v := d.Result()
		if v.Count == 0 {
			continue
		}
		if prev, ok := out[d.Name()]; ok {
			v = metrics.DistributionValue{Count: prev.Count + v.Count, Sum: prev.Sum + v.Sum, Min: min(prev.Min, v.Min), Max: max(prev.Max, v.Max)}
		}
		out[d.Name()] = v
	}
	return out
}
