package engines

// Shared pieces of the engine suites: which engine a test runs on and how a pipeline is
// submitted to it, the in-process Cloud Tasks server and loopback receiver the workers reach,
// and the generator that feeds the pipelines. Suites for other engines or sources (Kafka, an
// expansion service) reuse them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"     // registers the "flink" runner
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"     // registers the "prism" runner
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal" // registers the "universal" runner
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	register.DoFn2x0[[]byte, func(int)](&shardsFn{})
	register.DoFn3x0[context.Context, int, func(int)](&shardRangeFn{})
	register.Emitter1[int]()
	beam.RegisterType(reflect.TypeFor[order]())
	beam.RegisterType(reflect.TypeFor[namedOrder]())
	register.Function1x1(orderOf)
	register.Function1x1(namedOrderOf)
}

// The variables naming the engines; .ci/engines starts each service and sets its variable.
const (
	// flinkEndpointEnv holds the job endpoint ("host:port") of Beam's Flink job server. CI
	// cannot obtain one (docs/runners.md); a user who has the jar can run the suites on it.
	flinkEndpointEnv = "BEAM_FLINK_ENDPOINT"
	// prismEndpointEnv holds the job endpoint of a prism job service running as its own
	// process (Beam's cmd/prism).
	prismEndpointEnv = "BEAM_PRISM_ENDPOINT"
	// workerPoolEnv holds the address of the worker pool of integration/engines/workerpool.
	// With it the cases also run on the prism job service with EXTERNAL workers: the pool
	// starts each job's Go worker from the staged test binary, in a process of its own.
	workerPoolEnv = "BEAM_WORKER_POOL"
	// pythonEndpointEnv holds the job endpoint of the Python SDK's local job service
	// (apache_beam.runners.portability.local_job_service_main), a second implementation of
	// Beam's portable job API.
	pythonEndpointEnv = "BEAM_PYTHON_JOB_ENDPOINT"
)

// jobTimeout bounds one pipeline run on an engine, restarts included, so that a stuck job
// fails its test instead of hanging the suite.
const jobTimeout = 4 * time.Minute

// deliveryTimeout bounds the wait for the queue to hand every task to the receiver. The
// in-process server dispatches at most 500 tasks per second (the service's queue maximum).
const deliveryTimeout = 2 * time.Minute

// requireEnv returns the value of the environment variable name, or skips tb with one line
// that names the variable and what it must hold.
func requireEnv(tb testing.TB, name, holds string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		tb.Skipf("NOT RUN: %s is not set: it holds %s; .ci/engines starts the service and sets it", name, holds)
	}
	return v
}

// The environment types of the engines: where a job's Go workers run.
const (
	// loopback runs the workers inside this test process, where the in-process servers and
	// the generator's bookkeeping are.
	loopback = "LOOPBACK"
	// external has the worker pool of BEAM_WORKER_POOL start each worker as a process of its
	// own from this test binary, staged as the job's worker binary: nothing of this process's
	// memory reaches it, as on Dataflow or Flink.
	external = "EXTERNAL"
)

// engine is a Beam job service a pipeline is submitted to, and where its workers run.
type engine struct {
	// Name is how messages and subtests refer to the engine.
	Name string
	// Runner is the Beam Go runner that submits the job: "flink", "prism" for Beam's local
	// runner, or "universal" for any other portable job service.
	Runner string
	// Endpoint is the job service "host:port"; empty for prism means its in-process service.
	Endpoint string
	// Environment is loopback (the default when empty) or external.
	Environment string
	// WorkerPool is the worker pool's "host:port" when Environment is external.
	WorkerPool string
	// RetriesBundles says whether the engine runs a failed bundle's work again (Flink, with
	// the restart strategy .ci/engines configures) or fails the job (prism and the Python job
	// service, DESIGN section 8).
	RetriesBundles bool
}

// separateWorkers says whether the engine's workers run outside this process.
func (e engine) separateWorkers() bool { return e.Environment == external }

// environment is the environment type the job is submitted with.
func (e engine) environment() string {
	if e.Environment == "" {
		return loopback
	}
	return e.Environment
}

// flinkJobServer is Beam's Flink job server at endpoint.
func flinkJobServer(endpoint string) engine {
	return engine{Name: "flink", Runner: "flink", Endpoint: endpoint, RetriesBundles: true}
}

// flinkEngine returns the Flink job server named by BEAM_FLINK_ENDPOINT, or skips tb.
func flinkEngine(tb testing.TB) engine {
	tb.Helper()
	return flinkJobServer(requireEnv(tb, flinkEndpointEnv, "the job endpoint (host:port) of a Beam Flink job server"))
}

// prismJobService is the prism job service at endpoint, with LOOPBACK workers.
func prismJobService(endpoint string) engine {
	return engine{Name: "prism-job-service", Runner: "prism", Endpoint: endpoint}
}

// prismJobServiceExternal is the prism job service at endpoint with its workers started by the
// worker pool at pool.
func prismJobServiceExternal(endpoint, pool string) engine {
	return engine{Name: "prism-job-service-external-workers", Runner: "prism", Endpoint: endpoint, Environment: external, WorkerPool: pool}
}

// pythonJobService is the Python SDK's local job service at endpoint, with LOOPBACK workers.
func pythonJobService(endpoint string) engine {
	return engine{Name: "python-job-service", Runner: "universal", Endpoint: endpoint}
}

// prismJobServiceEngine returns the prism job service named by BEAM_PRISM_ENDPOINT, or skips tb.
func prismJobServiceEngine(tb testing.TB) engine {
	tb.Helper()
	return prismJobService(requireEnv(tb, prismEndpointEnv, "the job endpoint (host:port) of a prism job service"))
}

// jobServiceEngines returns every out-of-process job service the environment names: Flink
// (BEAM_FLINK_ENDPOINT), a prism job service (BEAM_PRISM_ENDPOINT) with LOOPBACK workers and,
// when BEAM_WORKER_POOL is set too, with EXTERNAL ones, and the Python SDK's job service
// (BEAM_PYTHON_JOB_ENDPOINT). With none set it skips tb with one line naming the variables.
func jobServiceEngines(tb testing.TB) []engine {
	tb.Helper()
	var out []engine
	if ep := os.Getenv(flinkEndpointEnv); ep != "" {
		out = append(out, flinkJobServer(ep))
	}
	if ep := os.Getenv(prismEndpointEnv); ep != "" {
		out = append(out, prismJobService(ep))
		if pool := os.Getenv(workerPoolEnv); pool != "" {
			out = append(out, prismJobServiceExternal(ep, pool))
		}
	}
	if ep := os.Getenv(pythonEndpointEnv); ep != "" {
		out = append(out, pythonJobService(ep))
	}
	if len(out) == 0 {
		tb.Skipf("NOT RUN: none of %s, %s (with %s), %s is set: they hold the job endpoint (host:port) of a Beam Flink job server, a prism job service (and a worker pool), the Python SDK's job service; .ci/engines starts them and sets them",
			flinkEndpointEnv, prismEndpointEnv, workerPoolEnv, pythonEndpointEnv)
	}
	return out
}

// onEngines runs body once per job service of jobServiceEngines, each as a subtest named
// after the engine.
func onEngines(t *testing.T, body func(t *testing.T, e engine)) {
	t.Helper()
	for _, e := range jobServiceEngines(t) {
		t.Run(e.Name, func(t *testing.T) { body(t, e) })
	}
}

// prismEngine is Beam's prism runner in this process, the engine of the other suites.
func prismEngine() engine { return engine{Name: "prism", Runner: "prism"} }

var (
	// runMu serializes runs: the job options are process-wide flags.
	runMu sync.Mutex
	// prismEndpoint is the in-process prism job service once the first prism run started it.
	prismEndpoint string
)

// run submits p to the engine and waits until the job ends or jobTimeout passes. With
// LOOPBACK workers the job's DoFns run in this process; with EXTERNAL ones the job stages this
// test binary as its worker binary (--worker_binary), which the worker pool runs in worker
// mode (ptest.Main hands it to Beam's harness).
func (e engine) run(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	runMu.Lock()
	defer runMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, jobTimeout)
	defer cancel()
	endpoint := e.Endpoint
	if e.Runner == "prism" && endpoint == "" {
		endpoint = prismEndpoint
	}
	*jobopts.Endpoint = endpoint
	*jobopts.EnvironmentType = e.environment()
	*jobopts.EnvironmentConfig = ""
	*jobopts.WorkerBinary = ""
	if e.separateWorkers() {
		bin, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this test binary, the worker binary of the job on %s: %w", e.Name, err)
		}
		*jobopts.EnvironmentConfig = e.WorkerPool
		*jobopts.WorkerBinary = bin
	}
	pr, err := beam.Run(ctx, e.Runner, p)
	if e.Runner == "prism" && prismEndpoint == "" && e.Endpoint == "" {
		prismEndpoint = *jobopts.Endpoint
	}
	if err != nil {
		return pr, fmt.Errorf("the job on %s failed: %w", e.Name, err)
	}
	return pr, nil
}

// mustRun is run for a test that expects the job to succeed.
func (e engine) mustRun(tb testing.TB, p *beam.Pipeline) beam.PipelineResult {
	tb.Helper()
	pr, err := e.run(context.Background(), p)
	if err != nil {
		tb.Fatal(err)
	}
	return pr
}

// runReadingNoMetrics is mustRun for a case that reads no metrics from the job: a job that
// completed but whose metrics the job service failed to report passes, with a NOTE in the log.
// The Python SDK's job service 2.77.0 is such a service for jobs of many bundles: its
// GetJobMetrics fails with "maximum recursion depth exceeded" once the job is DONE.
func (e engine) runReadingNoMetrics(tb testing.TB, p *beam.Pipeline) {
	tb.Helper()
	_, err := e.run(context.Background(), p)
	if err != nil && metricsOnlyFailure(err) {
		tb.Logf("NOTE: the job on %s completed, but the job service could not report its metrics: %v", e.Name, err)
		return
	}
	require.NoError(tb, err)
}

// metricsOnlyFailure says whether err is the universal runner's report of a job that ended
// well but whose metrics could not be read ("failed to get metrics" and no job failure in its
// chain: a job that failed too is reported as "failed to get metrics ... caused by: job X
// failed").
func metricsOnlyFailure(err error) bool {
	inner := errors.Unwrap(err) // run's "the job on E failed: %w"
	if inner == nil {
		return false
	}
	msg := inner.Error()
	return strings.HasPrefix(msg, "failed to get metrics") && !jobFailedRE.MatchString(msg)
}

// jobFailedRE matches the universal runner's report of a failed job.
var jobFailedRE = regexp.MustCompile(`job \S+ failed`)

// sinkCounters returns the job's committed-or-attempted counters of namespace ns, summed by
// name over steps. It returns an empty map when the job service reported no metrics.
func sinkCounters(pr beam.PipelineResult, ns string) map[string]int64 {
	out := map[string]int64{}
	if pr == nil {
		return out
	}
	for _, c := range pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == ns }).Counters() {
		out[c.Name()] += c.Result()
	}
	return out
}

// --- Cloud Tasks and the receiver --------------------------------------------------------

// enginesQueue is the queue every case's server holds.
var enginesQueue = cloudtasksio.Queue{Project: "engines", Location: "local", Name: "orders"}

// cloudTasks is an in-process cloudtaskstest server with one running queue whose names are
// retained for two hours (the sink's exactly-once mode checks at least one).
type cloudTasks struct {
	*cloudtaskstest.Server
	Queue cloudtasksio.Queue
}

// newCloudTasks starts the server, closed when tb ends.
func newCloudTasks(tb testing.TB, opts ...cloudtaskstest.Option) *cloudTasks {
	tb.Helper()
	srv := cloudtaskstest.NewServer(opts...)
	tb.Cleanup(func() { srv.Close() })
	q := enginesQueue
	if _, err := srv.CreateQueue(q.Path()); err != nil {
		tb.Fatal(err)
	}
	srv.SetTombstoneTTL(q.Path(), 2*time.Hour)
	return &cloudTasks{Server: srv, Queue: q}
}

// httpConfig is the sink configuration of the cases: the server's queue, tasks that POST the
// element as a JSON body to url.
func (c *cloudTasks) httpConfig(url string) cloudtasksio.Config {
	return cloudtasksio.Config{
		Queue:            c.Queue,
		EmulatorEndpoint: c.Addr,
		HTTP: &cloudtasksio.HTTPTarget{URL: url, Body: formats.JSON(),
			Headers: map[string]string{"Content-Type": "application/json"}},
	}
}

// waitDrained waits until the server has dispatched every due task (cloudtaskstest's
// Server.Wait) and checks that the queue holds no task: every task created has been
// delivered (a task leaves the queue only after its target answered 2xx).
func (c *cloudTasks) waitDrained(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deliveryTimeout)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		tb.Fatalf("after %v the server is still dispatching, the queue holds %d tasks (server stats %+v): %v",
			deliveryTimeout, len(c.Tasks(c.Queue.Path())), c.Stats(), err)
	}
	if n := len(c.Tasks(c.Queue.Path())); n > 0 {
		tb.Fatalf("the queue still holds %d tasks, waiting for a retry (server stats %+v)", n, c.Stats())
	}
}

// receiver is a loopback HTTP target that counts the orders it receives, by order id and by
// the task name Cloud Tasks sends along.
type receiver struct {
	// URL is the receiver's base URL, "http://127.0.0.1:port".
	URL string

	mu      sync.Mutex
	byID    map[string]int
	byTask  map[string]int
	workers map[workerStamp]int // the worker stamps of stamped orders, see separation_test.go
	total   int
	bad     []string // whole bodies that were not an order
	// broken counts requests whose body could not be read to its end (the connection broke
	// under the request): the sender saw no answer and sends the task again, so they are
	// neither an order nor a bad body. The checks of each order once still see a loss.
	broken int
}

// newReceiver starts a receiver, closed when tb ends.
func newReceiver(tb testing.TB) *receiver {
	tb.Helper()
	r := &receiver{byID: map[string]int{}, byTask: map[string]int{}, workers: map[workerStamp]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.broken++
			tb.Logf("the receiver could not read a request's body (%v); the sender retries it", err)
			http.Error(w, "body not read", http.StatusInternalServerError)
			return
		}
		var o struct {
			order
			Worker *workerStamp `json:"worker"`
		}
		if err := json.Unmarshal(body, &o); err != nil || o.ID == "" {
			r.bad = append(r.bad, fmt.Sprintf("%.80q", body))
			http.Error(w, "not an order", http.StatusBadRequest)
			return
		}
		r.byID[o.ID]++
		r.byTask[req.Header.Get("X-CloudTasks-TaskName")]++
		if o.Worker != nil {
			r.workers[*o.Worker]++
		}
		r.total++
	}))
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// counts returns copies of the per-id and per-task counts, the total and the bad bodies.
func (r *receiver) counts() (byID, byTask map[string]int, total int, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byID, byTask = map[string]int{}, map[string]int{}
	for k, v := range r.byID {
		byID[k] = v
	}
	for k, v := range r.byTask {
		byTask[k] = v
	}
	return byID, byTask, r.total, append([]string(nil), r.bad...)
}

// workerStamps returns how many orders carried each worker stamp.
func (r *receiver) workerStamps() map[workerStamp]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[workerStamp]int{}
	for k, v := range r.workers {
		out[k] = v
	}
	return out
}

// newPubSubTopic starts a pstest server, closed when tb ends, holding the topic.
func newPubSubTopic(tb testing.TB, topic string) *pstest.Server {
	tb.Helper()
	ps := pstest.NewServer()
	tb.Cleanup(func() { ps.Close() })
	ctx := context.Background()
	admin, err := pubsub.NewClient(ctx, "engines", option.WithEndpoint(ps.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
		tb.Fatal(err)
	}
	return ps
}

// --- Input -------------------------------------------------------------------------------

// order is the element of the cases: an id and its sequence number, the JSON body.
type order struct {
	ID  string `json:"id"`
	Seq int    `json:"seq"`
}

// namedOrder is an order whose task is named after its id.
type namedOrder struct {
	ID  string `json:"id"`
	Seq int    `json:"seq"`
	Key string `cloudtasks:"task-id"`
}

// orderID is the id of the order with sequence number seq.
func orderID(seq int) string { return fmt.Sprintf("order-%06d", seq) }

func orderOf(seq int) order { return order{ID: orderID(seq), Seq: seq} }

func namedOrderOf(seq int) namedOrder {
	return namedOrder{ID: orderID(seq), Seq: seq, Key: orderID(seq)}
}

// emitted counts, per generator run id, the elements the generator has emitted in this
// process. With LOOPBACK workers a replay by the engine shows up here; EXTERNAL workers count
// in their own memory, so cases read the job's generatedCounter instead.
var emitted sync.Map // run id -> *atomic.Int64

// emittedBy returns how many elements the generator of run id has emitted so far in this
// process.
func emittedBy(id string) int64 {
	if c, ok := emitted.Load(id); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// enginesNamespace is the metrics namespace of the suites' own DoFns.
const enginesNamespace = "engines"

// generatedCounter counts the sequence numbers the generator emitted, wherever its workers run.
var generatedCounter = beam.NewCounter(enginesNamespace, "generated")

// shardsFn emits the shard numbers 0..Shards-1 from an impulse.
type shardsFn struct{ Shards int }

func (f *shardsFn) ProcessElement(_ []byte, emit func(int)) {
	for i := range f.Shards {
		emit(i)
	}
}

// shardRangeFn emits the sequence numbers of one shard: every n in [0, N) with
// n % Shards == shard.
type shardRangeFn struct {
	RunID  string
	N      int
	Shards int
}

func (f *shardRangeFn) ProcessElement(ctx context.Context, shard int, emit func(int)) {
	c, _ := emitted.LoadOrStore(f.RunID, new(atomic.Int64))
	n := c.(*atomic.Int64)
	for seq := shard; seq < f.N; seq += f.Shards {
		n.Add(1)
		generatedCounter.Inc(ctx, 1)
		emit(seq)
	}
}

// generate returns the sequence numbers [0, n) as a PCollection<int>, made on the workers:
// an impulse becomes shards, a Reshuffle spreads the shards over the engine's workers, and
// each shard is expanded there. The writer downstream therefore gets the bundles the engine
// cuts from its shards, not one Create. runID names the run for emittedBy.
func generate(s beam.Scope, runID string, n, shards int) beam.PCollection {
	s = s.Scope("engines.generate")
	seeds := beam.ParDo(s, &shardsFn{Shards: shards}, beam.Impulse(s))
	seeds = beam.Reshuffle(s, seeds)
	return beam.ParDo(s, &shardRangeFn{RunID: runID, N: n, Shards: shards}, seeds)
}
