//go:build unix

package cloudtasksio_test

// Throughput benchmarks against the in-memory server. They run only with -bench; docs/performance.md
// has the commands, the model they test and the figures measured so far.
//
// Every benchmark reports:
//   - creates/s: tasks created per second of wall time, over all iterations;
//   - cpu-µs/create: user+system CPU of the whole process (getrusage) per created task. The server,
//     and for pipeline benchmarks prism and its worker, run in this process, so their CPU is
//     included: the figure is an upper bound on what the writer itself spends;
//   - max-in-flight: the most CreateTask calls the server was serving at once, the concurrency
//     actually reached;
//   - model-creates/s: what the concurrency/latency model predicts for the setting.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	register.DoFn2x0[[]byte, func(order)](&benchOrdersFn{})
	register.Emitter1[order]()
	register.DoFn2x1[context.Context, order, error](&naiveCreateFn{})
	register.Function1x0(benchIdleBundle)
	register.Function1x0(benchDiscardCreated)
	register.Function1x0(benchDiscardCount)
}

var (
	// benchCap is the sink's default WriterOptions.MaxInFlightTasks.
	benchCap = cloudtasksio.DefaultWriterOptions().MaxInFlightTasks
	// benchStreams is the server's concurrent-stream limit per connection, like the service's.
	benchStreams = int(cloudtaskstest.DefaultMaxConcurrentStreams)
)

// benchCase is one latency setting with the creates per iteration for each kind of benchmark,
// sized so that an iteration takes one to three seconds on a two-core machine. The direct counts
// are multiples of the concurrency reached (100 or 800), so the last round trip is a full one.
type benchCase struct {
	latency time.Duration
	direct  map[int]int // pool size -> creates per iteration, for the engine and the raw loop
	naive   int         // elements per iteration for the synchronous DoFn
	write   int         // elements per iteration for cloudtasksio.Write
}

var benchCases = []benchCase{
	{latency: 20 * time.Millisecond, direct: map[int]int{1: 8000, 8: 12000}, naive: 50, write: 8000},
	{latency: 200 * time.Millisecond, direct: map[int]int{1: 1000, 8: 6400}, naive: 10, write: 1000},
}

var benchPools = []int{1, 8}

func (c benchCase) name() string { return fmt.Sprintf("latency=%v", c.latency) }

// modelRate is the concurrency/latency model: at most min(cap, streams*pool) creates are in
// flight, each takes the latency.
func modelRate(cap, pool int, latency time.Duration) float64 {
	return float64(min(cap, benchStreams*pool)) / latency.Seconds()
}

// newBenchServer starts a non-dispatching server with the benchmark queue and the given
// latency on every CreateTask.
func newBenchServer(b *testing.B, latency time.Duration) *cloudtaskstest.Server {
	b.Helper()
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	b.Cleanup(func() { srv.Close() })
	if _, err := srv.CreateQueue(testQueue.Path()); err != nil {
		b.Fatal(err)
	}
	// Exactly-once verifies that the queue remembers task names for at least an hour.
	srv.SetTombstoneTTL(testQueue.Path(), 2*time.Hour)
	srv.SetLatency(latency)
	return srv
}

// newBenchClient dials srv with a pool of the given number of connections and the extra
// options.
func newBenchClient(b *testing.B, srv *cloudtaskstest.Server, pool int, extra ...option.ClientOption) *cloudtasks.Client {
	b.Helper()
	opts := append(srv.ClientOptions(), extra...)
	if pool > 1 {
		opts = append(opts, option.WithGRPCConnectionPool(pool))
	}
	client, err := cloudtasks.NewClient(context.Background(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	return client
}

// benchRequest is the create request of the direct benchmarks: the task the sink builds for an
// order with the JSON body format.
func benchRequest(b *testing.B) *cloudtaskspb.CreateTaskRequest {
	body, err := json.Marshal(order{ID: "12345", Amount: 42})
	if err != nil {
		b.Fatal(err)
	}
	return &cloudtaskspb.CreateTaskRequest{Parent: testQueue.Path(), Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url:        "https://example.com/orders",
			HttpMethod: cloudtaskspb.HttpMethod_POST,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       body,
		}},
	}}
}

// cpuTime is the user+system CPU time this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs op, which must create perOp tasks at srv, in b.Loop and reports the metrics
// described at the top of this file. It fails the benchmark when the server did not store
// exactly the tasks expected.
func measure(b *testing.B, srv *cloudtaskstest.Server, perOp int, model float64, op func(b *testing.B)) {
	b.Helper()
	srv.ResetStats()
	var wall, cpu time.Duration
	ops := 0
	for b.Loop() {
		c0, t0 := cpuTime(b), time.Now()
		op(b)
		wall += time.Since(t0)
		cpu += cpuTime(b) - c0
		ops++
	}
	creates := ops * perOp
	st := srv.Stats()
	if st.TasksCreated != creates || st.CreateTaskCalls != creates {
		b.Fatalf("the server stored %d tasks from %d calls, want %d of each", st.TasksCreated, st.CreateTaskCalls, creates)
	}
	b.ReportMetric(float64(creates)/wall.Seconds(), "creates/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(creates), "cpu-µs/create")
	b.ReportMetric(float64(st.MaxCreateTaskInFlight), "max-in-flight")
	b.ReportMetric(model, "model-creates/s")
}

// BenchmarkEngineCreates drives the writer engine directly, at the sink's default cap, through
// a real client. Pool 8 needs a connection pool on an emulator endpoint, which the sink
// refuses, hence the engine without the DoFn around it. telemetry=off dials the client with
// option.WithTelemetryDisabled, as ClientOptions.Telemetry TelemetryOff does, so the two
// measure what the client library's OpenTelemetry instrumentation costs per create.
func BenchmarkEngineCreates(b *testing.B) {
	for _, c := range benchCases {
		for _, pool := range benchPools {
			for _, telemetry := range []string{"on", "off"} {
				b.Run(fmt.Sprintf("%s/pool=%d/telemetry=%s", c.name(), pool, telemetry), func(b *testing.B) {
					benchEngine(b, c, pool, telemetry == "off", false)
				})
			}
			// The sink's default: telemetry off, adaptive concurrency on, its state shared by the
			// iterations as by the bundles of a worker process (the first one starts it).
			b.Run(fmt.Sprintf("%s/pool=%d/telemetry=off/adaptive=on", c.name(), pool), func(b *testing.B) {
				benchEngine(b, c, pool, true, true)
			})
		}
	}
}

// defaultEngineOptions are the engine options the sink derives from its default WriterOptions,
// without adaptive concurrency.
func defaultEngineOptions() engine.Options {
	d := cloudtasksio.DefaultWriterOptions()
	return engine.Options{
		MaxInFlight: d.MaxInFlightTasks,
		Transient:   engine.Budget{Initial: d.RecoveryInitialBackoff, Max: d.RecoveryMaxBackoff, MaxAttempts: d.RecoveryMaxAttempts},
		NotFound:    engine.Budget{Initial: d.NotFoundRecoveryInitialBackoff, Max: d.NotFoundRecoveryMaxBackoff, MaxAttempts: d.NotFoundRecoveryMaxAttempts},
	}
}

// benchEngine is one case of BenchmarkEngineCreates.
func benchEngine(b *testing.B, c benchCase, pool int, telemetryOff, adaptive bool) {
	srv := newBenchServer(b, c.latency)
	var extra []option.ClientOption
	if telemetryOff {
		extra = append(extra, option.WithTelemetryDisabled())
	}
	client := newBenchClient(b, srv, pool, extra...)
	creator := engine.CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		return client.CreateTask(ctx, req)
	})
	opts := defaultEngineOptions()
	if adaptive {
		opts.Adaptive = engine.NewAdaptive()
	}
	create := benchRequest(b)
	n := c.direct[pool]
	ctx := context.Background()
	measure(b, srv, n, modelRate(benchCap, pool, c.latency), func(b *testing.B) {
		e := engine.New[struct{}](creator, opts, nil)
		reqs := make([]engine.Request[struct{}], n)
		for i := range reqs {
			reqs[i].Create = create
			if err := e.Submit(ctx, &reqs[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkRawClientCreates is the baseline for the engine: the same client and request, at
// most benchCap calls outstanding, one goroutine per call, no retries and no bookkeeping.
func BenchmarkRawClientCreates(b *testing.B) {
	for _, c := range benchCases {
		for _, pool := range benchPools {
			b.Run(fmt.Sprintf("%s/pool=%d", c.name(), pool), func(b *testing.B) {
				srv := newBenchServer(b, c.latency)
				client := newBenchClient(b, srv, pool)
				create := benchRequest(b)
				n := c.direct[pool]
				ctx := context.Background()
				measure(b, srv, n, modelRate(benchCap, pool, c.latency), func(b *testing.B) {
					sem := make(chan struct{}, benchCap)
					var wg sync.WaitGroup
					var failed atomic.Pointer[error]
					for range n {
						sem <- struct{}{}
						wg.Go(func() {
							defer func() { <-sem }()
							if _, err := client.CreateTask(ctx, create); err != nil {
								failed.CompareAndSwap(nil, &err)
							}
						})
					}
					wg.Wait()
					if err := failed.Load(); err != nil {
						b.Fatal(*err)
					}
				})
			})
		}
	}
}

// benchOrdersFn emits N orders from an impulse, so the input costs nothing to ship and the
// writer downstream is fused with it into one bundle.
type benchOrdersFn struct{ N int }

func (f *benchOrdersFn) ProcessElement(_ []byte, emit func(order)) {
	for i := range f.N {
		emit(order{ID: fmt.Sprint(i), Amount: i + 1})
	}
}

// naiveCreateFn is the DoFn a first attempt would write: it builds the task the sink would and
// calls CreateTask synchronously for each element, so one create is outstanding at a time.
type naiveCreateFn struct {
	Endpoint string
	Queue    string

	client *cloudtasks.Client
}

var (
	naiveClientsMu sync.Mutex
	naiveClients   = map[string]*cloudtasks.Client{}
)

func (f *naiveCreateFn) Setup(ctx context.Context) error {
	naiveClientsMu.Lock()
	defer naiveClientsMu.Unlock()
	if c, ok := naiveClients[f.Endpoint]; ok {
		f.client = c
		return nil
	}
	c, err := cloudtasks.NewClient(context.Background(), option.WithEndpoint(f.Endpoint), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		return err
	}
	naiveClients[f.Endpoint] = c
	f.client = c
	return nil
}

func (f *naiveCreateFn) ProcessElement(ctx context.Context, o order) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = f.client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: f.Queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url:        "https://example.com/orders",
			HttpMethod: cloudtaskspb.HttpMethod_POST,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       body,
		}},
	}})
	return err
}

// runBenchPipeline runs, on prism, n generated orders into the writer that write adds.
func runBenchPipeline(b *testing.B, n int, write func(s beam.Scope, col beam.PCollection)) {
	p, s := beam.NewPipelineWithRoot()
	write(s, beam.ParDo(s, &benchOrdersFn{N: n}, beam.Impulse(s)))
	if err := ptest.Run(p); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkNaiveDoFn is the synchronous DoFn on prism: one create per latency.
func BenchmarkNaiveDoFn(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name(), func(b *testing.B) {
			srv := newBenchServer(b, c.latency)
			fn := &naiveCreateFn{Endpoint: srv.Addr, Queue: testQueue.Path()}
			measure(b, srv, c.naive, 1/c.latency.Seconds(), func(b *testing.B) {
				runBenchPipeline(b, c.naive, func(s beam.Scope, col beam.PCollection) { beam.ParDo0(s, fn, col) })
			})
		})
	}
}

// BenchmarkWrite is cloudtasksio.Write on prism with its defaults (one connection, since the
// emulator endpoint forbids a pool), in both delivery modes on the same input. The figures
// include the prism job's own start-up and, for exactly-once, the Reshuffle.
func BenchmarkWrite(b *testing.B) {
	for _, c := range benchCases {
		for _, d := range benchDeliveries {
			b.Run(fmt.Sprintf("%s/delivery=%s", c.name(), d.name), func(b *testing.B) {
				srv := newBenchServer(b, c.latency)
				cfg := benchWriteConfig(srv, d.delivery)
				measure(b, srv, c.write, modelRate(benchCap, 1, c.latency), func(b *testing.B) {
					runBenchPipeline(b, c.write, func(s beam.Scope, col beam.PCollection) { cloudtasksio.Write(s, cfg, col) })
				})
			})
		}
	}
}

// benchDeliveries are the delivery guarantees the Write benchmarks run under, by sub-benchmark
// name.
var benchDeliveries = []struct {
	name     string
	delivery cloudtasksio.DeliveryGuarantee
}{{"at-least-once", cloudtasksio.AtLeastOnce}, {"exactly-once", cloudtasksio.ExactlyOnce}}

// benchWriteConfig is the Config of the Write benchmarks: JSON orders into testQueue at srv.
func benchWriteConfig(srv *cloudtaskstest.Server, delivery cloudtasksio.DeliveryGuarantee) cloudtasksio.Config {
	return cloudtasksio.Config{
		Queue: testQueue,
		HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders",
			Headers: map[string]string{"Content-Type": "application/json"}, Body: formats.JSON()},
		Delivery:         delivery,
		EmulatorEndpoint: srv.Addr,
	}
}

// BenchmarkWriteWithResult measures what the created-task output costs, in the same run as the
// plain Write it is compared with: output=none is cloudtasksio.Write; output=created is
// WriteWithResult with its created tasks taken by a step fused with the writer (their cost
// without a shuffle); output=counted counts them with stats.CountElms, the Wait.on pattern,
// which sends them through a combine.
func BenchmarkWriteWithResult(b *testing.B) {
	for _, c := range benchCases {
		for _, d := range benchDeliveries {
			for _, output := range []string{"none", "created", "counted"} {
				b.Run(fmt.Sprintf("%s/delivery=%s/output=%s", c.name(), d.name, output), func(b *testing.B) {
					srv := newBenchServer(b, c.latency)
					cfg := benchWriteConfig(srv, d.delivery)
					measure(b, srv, c.write, modelRate(benchCap, 1, c.latency), func(b *testing.B) {
						runBenchPipeline(b, c.write, func(s beam.Scope, col beam.PCollection) {
							switch output {
							case "none":
								cloudtasksio.Write(s, cfg, col)
							case "created":
								beam.ParDo0(s, benchDiscardCreated, cloudtasksio.WriteWithResult(s, cfg, col).Created)
							case "counted":
								beam.ParDo0(s, benchDiscardCount, stats.CountElms(s, cloudtasksio.WriteWithResult(s, cfg, col).Created))
							}
						})
					})
				})
			}
		}
	}
}

// benchDiscardCreated and benchDiscardCount take the created-task output and do nothing.
func benchDiscardCreated(cloudtasksio.CreatedTask) {}
func benchDiscardCount(int)                        {}

// benchIdleBundle stands for a bundle that waits on I/O for one second.
func benchIdleBundle(_ []byte) { time.Sleep(time.Second) }

// BenchmarkPrismIdleBundle measures what prism itself costs around a pipeline benchmark: a job
// whose only bundle sleeps for one second. bundle-overhead-s is the wall time beyond that
// second (job start-up and tear-down) and cpu-s the process CPU spent, nearly all of it by
// prism (its progress loop polls while a bundle runs).
func BenchmarkPrismIdleBundle(b *testing.B) {
	var wall, cpu time.Duration
	ops := 0
	for b.Loop() {
		c0, t0 := cpuTime(b), time.Now()
		p, s := beam.NewPipelineWithRoot()
		beam.ParDo0(s, benchIdleBundle, beam.Impulse(s))
		if err := ptest.Run(p); err != nil {
			b.Fatal(err)
		}
		wall += time.Since(t0)
		cpu += cpuTime(b) - c0
		ops++
	}
	b.ReportMetric((wall/time.Duration(ops) - time.Second).Seconds(), "bundle-overhead-s")
	b.ReportMetric((cpu / time.Duration(ops)).Seconds(), "cpu-s")
}
