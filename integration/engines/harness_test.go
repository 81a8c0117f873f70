package engines

// Shared pieces of the engine suites: which engine a test runs on and how a pipeline is
// submitted to it, the in-process Cloud Tasks server and loopback receiver the workers reach,
// and the generator that feeds the pipelines. Suites for other engines or sources (Kafka, an
// expansion service) reuse them.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
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
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink" // registers the "flink" runner
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism" // registers the "prism" runner
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	register.DoFn2x0[[]byte, func(int)](&shardsFn{})
	register.DoFn2x0[int, func(int)](&shardRangeFn{})
	register.Emitter1[int]()
	beam.RegisterType(reflect.TypeFor[order]())
	beam.RegisterType(reflect.TypeFor[namedOrder]())
	register.Function1x1(orderOf)
	register.Function1x1(namedOrderOf)
}

// flinkEndpointEnv names the variable holding the job endpoint ("host:port") of Beam's Flink
// job server. .ci/engines starts the job server and sets it.
const flinkEndpointEnv = "BEAM_FLINK_ENDPOINT"

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
		tb.Skipf("%s is not set: it holds %s; .ci/engines starts the service and sets it", name, holds)
	}
	return v
}

// prismEndpointEnv names the variable holding the job endpoint ("host:port") of a prism
// job service running as its own process (Beam's cmd/prism). .ci/engines starts one and sets
// it, so that the cases below also run through a job service outside the test process, the
// way Flink and Dataflow are reached, while Flink itself cannot be had (docs/runners.md).
const prismEndpointEnv = "BEAM_PRISM_ENDPOINT"

// engine is a Beam job service a pipeline is submitted to.
type engine struct {
	// Name is how messages and subtests refer to the engine.
	Name string
	// Runner is the Beam Go runner that submits the job: "flink", or "prism" for Beam's local
	// runner.
	Runner string
	// Endpoint is the job service "host:port"; empty for prism means its in-process service.
	Endpoint string
	// RetriesBundles says whether the engine runs a failed bundle's work again (Flink, with
	// the restart strategy .ci/engines configures) or fails the job (prism, DESIGN section 8).
	RetriesBundles bool
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

// prismJobService is the prism job service at endpoint.
func prismJobService(endpoint string) engine {
	return engine{Name: "prism-job-service", Runner: "prism", Endpoint: endpoint}
}

// prismJobServiceEngine returns the prism job service named by BEAM_PRISM_ENDPOINT, or skips tb.
func prismJobServiceEngine(tb testing.TB) engine {
	tb.Helper()
	return prismJobService(requireEnv(tb, prismEndpointEnv, "the job endpoint (host:port) of a prism job service"))
}

// jobServiceEngines returns every out-of-process job service the environment names: Flink
// (BEAM_FLINK_ENDPOINT) and a prism job service (BEAM_PRISM_ENDPOINT). With neither set it
// skips tb with one line naming both variables.
func jobServiceEngines(tb testing.TB) []engine {
	tb.Helper()
	var out []engine
	if ep := os.Getenv(flinkEndpointEnv); ep != "" {
		out = append(out, flinkJobServer(ep))
	}
	if ep := os.Getenv(prismEndpointEnv); ep != "" {
		out = append(out, prismJobService(ep))
	}
	if len(out) == 0 {
		tb.Skipf("neither %s nor %s is set: they hold the job endpoint (host:port) of a Beam Flink job server or of a prism job service; .ci/engines starts them and sets them",
			flinkEndpointEnv, prismEndpointEnv)
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

// run submits p to the engine with the LOOPBACK environment, so its Go workers run in this
// process, and waits until the job ends or jobTimeout passes.
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
	*jobopts.EnvironmentType = "LOOPBACK"
	pr, err := beam.Run(ctx, e.Runner, p)
	if e.Runner == "prism" && prismEndpoint == "" {
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
	q := cloudtasksio.Queue{Project: "engines", Location: "local", Name: "orders"}
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

	mu     sync.Mutex
	byID   map[string]int
	byTask map[string]int
	total  int
	bad    []string // bodies that were not an order
}

// newReceiver starts a receiver, closed when tb ends.
func newReceiver(tb testing.TB) *receiver {
	tb.Helper()
	r := &receiver{byID: map[string]int{}, byTask: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var o order
		if err == nil {
			err = json.Unmarshal(body, &o)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil || o.ID == "" {
			r.bad = append(r.bad, fmt.Sprintf("%.80q", body))
			http.Error(w, "not an order", http.StatusBadRequest)
			return
		}
		r.byID[o.ID]++
		r.byTask[req.Header.Get("X-CloudTasks-TaskName")]++
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

// emitted counts, per generator run id, the elements the generator has emitted. The workers
// run in this process (LOOPBACK), so a replay by the engine shows up here.
var emitted sync.Map // run id -> *atomic.Int64

// emittedBy returns how many elements the generator of run id has emitted so far.
func emittedBy(id string) int64 {
	if c, ok := emitted.Load(id); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

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

func (f *shardRangeFn) ProcessElement(shard int, emit func(int)) {
	c, _ := emitted.LoadOrStore(f.RunID, new(atomic.Int64))
	n := c.(*atomic.Int64)
	for seq := shard; seq < f.N; seq += f.Shards {
		n.Add(1)
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
