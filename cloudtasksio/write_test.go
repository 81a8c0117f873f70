package cloudtasksio_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// fastRetries keeps retry tests quick: the budgets are the defaults, the waits are short.
var fastRetries = cloudtasksio.WriterOptions{
	RecoveryInitialBackoff: time.Millisecond, RecoveryMaxBackoff: 5 * time.Millisecond,
	NotFoundRecoveryInitialBackoff: time.Millisecond, NotFoundRecoveryMaxBackoff: 5 * time.Millisecond,
}

// newServer starts a cloudtaskstest server that stores tasks without dispatching them, with
// queue q (and q-eu) created.
func newServer(t *testing.T) *cloudtaskstest.Server {
	t.Helper()
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	for _, q := range []string{"q", "q-eu"} {
		_, err := srv.CreateQueue("projects/p/locations/l/queues/" + q)
		require.NoError(t, err)
	}
	return srv
}

func orders(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = order{ID: fmt.Sprint(i), Amount: i + 1}
	}
	return out
}

func keyedOrders(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = keyedOrder{ID: fmt.Sprint(i), Key: fmt.Sprintf("order-%d", i)}
	}
	return out
}

// run writes elems with cfg on prism and returns the pipeline's metrics (nil on failure).
func run(t *testing.T, cfg cloudtasksio.Config, elems []any, check ...func(s beam.Scope, deadLetters beam.PCollection)) (counters map[string]int64, err error) {
	t.Helper()
	return runFrom(t, cfg, func(s beam.Scope) beam.PCollection { return beam.Create(s, elems...) }, check...)
}

// runFrom is run with the input built by source.
func runFrom(t *testing.T, cfg cloudtasksio.Config, source func(beam.Scope) beam.PCollection, check ...func(s beam.Scope, deadLetters beam.PCollection)) (counters map[string]int64, err error) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	deadLetters := cloudtasksio.Write(s, cfg, source(s))
	for _, c := range check {
		c(s, deadLetters)
	}
	return runPipeline(p)
}

// runPipeline runs p on the test runner and returns the sink's counters by name, summed over
// steps, and its gauges under the prefix "gauge:" (nil on failure).
func runPipeline(p *beam.Pipeline) (counters map[string]int64, err error) {
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		return nil, err
	}
	counters = map[string]int64{}
	results := pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == cloudtasksio.MetricsNamespace })
	for _, c := range results.Counters() {
		counters[c.Name()] += c.Result()
	}
	for _, g := range results.Gauges() {
		counters["gauge:"+g.Name()] = g.Result().Value // gauges land here under a prefix
	}
	return counters, nil
}

func httpConfig(srv *cloudtaskstest.Server) cloudtasksio.Config {
	return cloudtasksio.Config{
		Queue:            testQueue,
		HTTP:             &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Headers: map[string]string{"Content-Type": "application/json"}, Body: formats.JSON()},
		EmulatorEndpoint: srv.Addr,
		Writer:           fastRetries,
	}
}

func TestUnnamedElementsCreateOneTaskEachAndAgainOnReplay(t *testing.T) {
	srv := newServer(t)
	const n = 300
	counters, err := run(t, httpConfig(srv), orders(n))
	require.NoError(t, err)
	tasks := srv.Tasks(testQueue.Path())
	require.Len(t, tasks, n)
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])
	assert.Zero(t, counters[cloudtasksio.MetricTasksDeduplicated])

	req := tasks[0].GetHttpRequest()
	assert.Equal(t, "https://example.com/orders", req.GetUrl())
	assert.Equal(t, cloudtaskspb.HttpMethod_POST, req.GetHttpMethod())
	assert.Equal(t, "application/json", req.GetHeaders()["Content-Type"])
	assert.Regexp(t, `^\{"id":"\d+","amount":\d+\}$`, string(req.GetBody()))
	var bytes int64
	for _, task := range tasks {
		task.Name, task.CreateTime, task.ScheduleTime, task.View = "", nil, nil, 0
		bytes += int64(protoSize(task))
	}
	assert.Equal(t, bytes, counters[cloudtasksio.MetricBytesSend], "numBytesSend counts the wire bytes of the tasks as sent")

	_, err = run(t, httpConfig(srv), orders(n))
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 2*n, "a replay of unnamed tasks creates them again")
}

func TestNamedTasksAreCreatedOnceAcrossReplays(t *testing.T) {
	srv := newServer(t)
	const n = 200
	_, err := run(t, httpConfig(srv), keyedOrders(n))
	require.NoError(t, err)
	counters, err := run(t, httpConfig(srv), keyedOrders(n))
	require.NoError(t, err)

	tasks := srv.Tasks(testQueue.Path())
	require.Len(t, tasks, n)
	names := map[string]bool{}
	for _, task := range tasks {
		names[task.GetName()] = true
		assert.NotContains(t, string(task.GetHttpRequest().GetBody()), "order-", "the task-id field never reaches the body")
	}
	for i := 0; i < n; i++ {
		assert.True(t, names[testQueue.Path()+"/tasks/"+cloudtasksio.TaskID(fmt.Sprintf("order-%d", i))], i)
	}
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend], "a deduplicated task still counts as sent")
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricTasksDeduplicated])
	assert.Zero(t, counters[cloudtasksio.MetricRecordsSendErrors])
}

func TestOneKeyInTwoQueuesMakesTwoTasks(t *testing.T) {
	srv := newServer(t)
	cfg := cloudtasksio.Config{QueueFn: queueByRegion, Serializer: serializeOrder, TaskIDFn: keyOfOrder,
		EmulatorEndpoint: srv.Addr, Writer: cloudtasksio.WriterOptions{PerDestinationMetrics: true}}
	counters, err := run(t, cfg, []any{order{ID: "7", Amount: 1, Region: "us"}, order{ID: "7", Amount: 1, Region: "eu"}})
	require.NoError(t, err)
	us, eu := srv.Tasks("projects/p/locations/l/queues/q"), srv.Tasks("projects/p/locations/l/queues/q-eu")
	require.Len(t, us, 1)
	require.Len(t, eu, 1)
	assert.Equal(t, "projects/p/locations/l/queues/q/tasks/"+cloudtasksio.TaskID("order-7"), us[0].GetName())
	assert.Equal(t, "projects/p/locations/l/queues/q-eu/tasks/"+cloudtasksio.TaskID("order-7"), eu[0].GetName())
	assert.Equal(t, cloudtaskspb.HttpMethod_PUT, eu[0].GetHttpRequest().GetHttpMethod())
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricDestinationRecordsSend("projects/p/locations/l/queues/q")])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricDestinationRecordsSend("projects/p/locations/l/queues/q-eu")])
}

func TestAMissingQueueFailsAfterTheNotFoundBudget(t *testing.T) {
	srv := newServer(t)
	cfg := httpConfig(srv)
	cfg.Queue = cloudtasksio.Queue{Project: "p", Location: "l", Name: "missing"}
	_, err := run(t, cfg, orders(1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NOT_FOUND")
	assert.Contains(t, err.Error(), "projects/p/locations/l/queues/missing")
	assert.Equal(t, 3, srv.Stats().CreateTaskCalls, "the NOT_FOUND budget is 3 attempts, the first included")
}

func TestDeleteRemovesTheTasksWriteNamedFromTheSameKeys(t *testing.T) {
	srv := newServer(t)
	cfg := httpConfig(srv)
	cfg.TaskIDFn = keyOfOrder
	_, err := run(t, cfg, orders(10))
	require.NoError(t, err)
	require.Len(t, srv.Tasks(testQueue.Path()), 10)

	counters, left := runDelete(t, srv, cloudtasksio.DeleteConfig{TaskIDFn: keyOfOrder},
		order{ID: "1"}, order{ID: "3"}, order{ID: "3"}, order{ID: "nokey"}, order{ID: "42"})
	assert.Len(t, left, 8)
	for _, id := range []string{"1", "3"} {
		assert.False(t, left[testQueue.Path()+"/tasks/"+cloudtasksio.TaskID("order-"+id)], "order %s's task is deleted", id)
	}
	assert.True(t, left[testQueue.Path()+"/tasks/"+cloudtasksio.TaskID("order-2")])
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsDeleted])
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricTasksAlreadyGone], "order 3 again, and order 42 that was never written")
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])
}

func TestDeleteOfWritesElementsReadsTheirTaskIDField(t *testing.T) {
	srv := newServer(t)
	written := keyedOrders(5)
	_, err := run(t, httpConfig(srv), written)
	require.NoError(t, err)
	require.Len(t, srv.Tasks(testQueue.Path()), 5)

	counters, left := runDelete(t, srv, cloudtasksio.DeleteConfig{}, written[1], written[3], keyedOrder{ID: "no key"})
	assert.Len(t, left, 3)
	for _, key := range []string{"order-1", "order-3"} {
		assert.False(t, left[testQueue.Path()+"/tasks/"+cloudtasksio.TaskID(key)], "the task of %s is deleted", key)
	}
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsDeleted])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])
}

// runDelete deletes elems from the test queue on prism with cfg, under DeadLetter, checks that
// the one element without a key is its only dead letter (TASK_ID), and returns the pipeline's
// counters and the names of the tasks left in the queue.
func runDelete(t *testing.T, srv *cloudtaskstest.Server, cfg cloudtasksio.DeleteConfig, elems ...any) (counters map[string]int64, left map[string]bool) {
	t.Helper()
	cfg.Queue, cfg.OnFailure, cfg.EmulatorEndpoint, cfg.Writer = testQueue, cloudtasksio.DeadLetter, srv.Addr, fastRetries
	p, s := beam.NewPipelineWithRoot()
	deadLetters := cloudtasksio.Delete(s, cfg, beam.Create(s, elems...))
	passert.Equals(s, beam.ParDo(s, describeDeadLetter, deadLetters), "TASK_ID cloudtasks-delete projects/p/locations/l/queues/q <no task>")
	counters, err := runPipeline(p)
	require.NoError(t, err)
	left = map[string]bool{}
	for _, task := range srv.Tasks(testQueue.Path()) {
		left[task.GetName()] = true
	}
	return counters, left
}

func TestDeleteInAMissingQueueFailsThePipeline(t *testing.T) {
	srv := newServer(t)
	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Delete(s, cloudtasksio.DeleteConfig{Queue: cloudtasksio.Queue{Project: "p", Location: "l", Name: "missing"},
		OnFailure: cloudtasksio.LogAndDrop, EmulatorEndpoint: srv.Addr, Writer: fastRetries}, beam.Create(s, "order-1"))
	_, err := runPipeline(p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed with NOT_FOUND after 3 attempt(s)")
	assert.Contains(t, err.Error(), "projects/p/locations/l/queues/missing/tasks/"+cloudtasksio.TaskID("order-1"))
}

// rejectMarked makes the server answer INVALID_ARGUMENT for orders whose body carries id "x…".
func rejectMarked(srv *cloudtaskstest.Server) {
	srv.SetRejectFunc(func(req *cloudtaskspb.CreateTaskRequest) error {
		if strings.Contains(string(req.GetTask().GetHttpRequest().GetBody()), `"id":"x`) {
			return fmt.Errorf("rejected by test")
		}
		return nil
	})
}

func ordersWithRejects() []any {
	return []any{order{ID: "1", Amount: 1}, order{ID: "x2", Amount: 2}, order{ID: "3", Amount: 3}, order{ID: "x4", Amount: 4}}
}

func TestInvalidArgumentIsDeadLetteredWithAParseableTask(t *testing.T) {
	srv := newServer(t)
	rejectMarked(srv)
	cfg := httpConfig(srv)
	cfg.OnFailure = cloudtasksio.DeadLetter
	counters, err := run(t, cfg, ordersWithRejects(), func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, describeDeadLetter, dl),
			`INVALID_ARGUMENT cloudtasks projects/p/locations/l/queues/q {"id":"x2","amount":2}`,
			`INVALID_ARGUMENT cloudtasks projects/p/locations/l/queues/q {"id":"x4","amount":4}`)
	})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 2)
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSend])
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricErrorClass("INVALID_ARGUMENT")])
}

func TestInvalidArgumentIsCountedAndDroppedUnderLogAndDrop(t *testing.T) {
	srv := newServer(t)
	rejectMarked(srv)
	cfg := httpConfig(srv)
	cfg.OnFailure = cloudtasksio.LogAndDrop
	counters, err := run(t, cfg, ordersWithRejects(), func(s beam.Scope, dl beam.PCollection) { passert.Empty(s, dl) })
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 2)
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSendErrors])
}

func TestInvalidArgumentFailsTheBundleByDefault(t *testing.T) {
	srv := newServer(t)
	rejectMarked(srv)
	_, err := run(t, httpConfig(srv), ordersWithRejects())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "INVALID_ARGUMENT")
	assert.NotContains(t, err.Error(), `"amount"`, "errors never carry the payload")
}

func TestSerializerOutcomes(t *testing.T) {
	srv := newServer(t)
	cfg := cloudtasksio.Config{Queue: testQueue, Serializer: serializeOrder, TaskIDFn: keyOfOrder, EmulatorEndpoint: srv.Addr, OnFailure: cloudtasksio.DeadLetter}
	elems := []any{
		order{ID: "1", Amount: 1},     // created
		order{ID: "2", Amount: 0},     // skipped
		order{ID: "3", Amount: -1},    // serializer fails: SERIALIZATION, no payload
		order{ID: "nokey", Amount: 1}, // TaskIDFn fails: TASK_ID, with the unnamed task
	}
	counters, err := run(t, cfg, elems, func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, describeDeadLetter, dl),
			"SERIALIZATION cloudtasks projects/p/locations/l/queues/q <no task>",
			"TASK_ID cloudtasks projects/p/locations/l/queues/q nokey")
	})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 1)
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSkipped])
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSend])
}

func TestConfigurationFailuresFailTheBundleWhateverThePolicy(t *testing.T) {
	srv := newServer(t)
	for name, c := range map[string]struct {
		cfg  cloudtasksio.Config
		elem any
		want string
	}{
		"QueueFn error":              {cloudtasksio.Config{QueueFn: queueByRegion, Serializer: serializeOrder}, order{ID: "1", Amount: 1, Region: "bad"}, "QueueFn failed"},
		"QueueFn invalid queue":      {cloudtasksio.Config{QueueFn: queueByRegion, Serializer: serializeOrder}, order{ID: "1", Amount: 1, Region: "invalid"}, "QueueFn returned an invalid queue"},
		"QueueFn malformed location": {cloudtasksio.Config{QueueFn: queueByRegion, Serializer: serializeOrder}, order{ID: "1", Amount: 1, Region: "invalid-location"}, "Queue.Location"},
	} {
		t.Run(name, func(t *testing.T) {
			c.cfg.EmulatorEndpoint = srv.Addr
			c.cfg.OnFailure = cloudtasksio.LogAndDrop
			_, err := run(t, c.cfg, []any{c.elem})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestTransientFailuresAndLostResponsesStillCreateEveryNamedTaskOnce(t *testing.T) {
	srv := newServer(t)
	burst := make([]codes.Code, 0, 30)
	for i := 0; i < 10; i++ {
		burst = append(burst, codes.Unavailable, codes.ResourceExhausted, codes.OK)
	}
	srv.InjectErrors("CreateTask", burst...)
	srv.LoseResponses(5)
	const n = 100
	counters, err := run(t, httpConfig(srv), keyedOrders(n))
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), n)
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])
	assert.Equal(t, int64(5), counters[cloudtasksio.MetricTasksDeduplicated], "each lost response comes back ALREADY_EXISTS")
	assert.Equal(t, int64(15), counters[cloudtasksio.MetricErrorClass("UNAVAILABLE")], "10 injected + 5 lost")
	assert.Equal(t, int64(10), counters[cloudtasksio.MetricErrorClass("RESOURCE_EXHAUSTED")])
}

func TestTransientFailuresAndLostResponsesStillCreateEveryUnnamedTask(t *testing.T) {
	srv := newServer(t)
	srv.InjectErrors("CreateTask", codes.Unavailable, codes.DeadlineExceeded, codes.Unavailable)
	srv.LoseResponses(4)
	const n = 100
	counters, err := run(t, httpConfig(srv), orders(n))
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), n+4, "a lost response of an unnamed task duplicates it: at-least-once")
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])
}

func TestExhaustedTransientBudgetFailsTheBundle(t *testing.T) {
	srv := newServer(t)
	all := make([]codes.Code, 8)
	for i := range all {
		all[i] = codes.Unavailable
	}
	srv.InjectErrors("CreateTask", all...)
	cfg := httpConfig(srv)
	cfg.OnFailure = cloudtasksio.DeadLetter
	_, err := run(t, cfg, orders(1))
	require.Error(t, err, "an outage never reaches the dead letters")
	assert.Contains(t, err.Error(), "UNAVAILABLE")
	assert.Equal(t, 8, srv.Stats().CreateTaskCalls)
}

func TestDeclarativeMetadataShapesTheTask(t *testing.T) {
	srv := newServer(t)
	cfg := cloudtasksio.Config{Queue: testQueue, EmulatorEndpoint: srv.Addr, HTTP: &cloudtasksio.HTTPTarget{
		Method: "patch", Headers: map[string]string{"X-Trace": "fixed", "Accept": "application/json"}, Body: formats.JSON(),
		OIDC:             &cloudtasksio.OIDCToken{ServiceAccountEmail: "sa@p.iam.gserviceaccount.com", Audience: "https://example.com"},
		DispatchDeadline: time.Minute}}
	// Beam cannot put a struct with a map field in beam.Create, so a ParDo makes the element.
	_, err := runFrom(t, cfg, func(s beam.Scope) beam.PCollection { return beam.ParDo(s, routedFromID, beam.Create(s, "9")) })
	require.NoError(t, err)
	tasks := srv.Tasks(testQueue.Path())
	require.Len(t, tasks, 1)
	req := tasks[0].GetHttpRequest()
	assert.Equal(t, "https://example.com/orders/9", req.GetUrl())
	assert.Equal(t, cloudtaskspb.HttpMethod_PATCH, req.GetHttpMethod())
	assert.Equal(t, "abc", req.GetHeaders()["x-trace"])
	assert.NotContains(t, req.GetHeaders(), "X-Trace")
	assert.Equal(t, `{"id":"9"}`, string(req.GetBody()))
	assert.Equal(t, "sa@p.iam.gserviceaccount.com", req.GetOidcToken().GetServiceAccountEmail())
	assert.Equal(t, time.Minute, tasks[0].GetDispatchDeadline().AsDuration())
}

func TestAppEngineTargetWithRouting(t *testing.T) {
	srv := newServer(t)
	worker, cleared := "worker", ""
	cfg := cloudtasksio.Config{Queue: testQueue, EmulatorEndpoint: srv.Addr, AppEngine: &cloudtasksio.AppEngineTarget{
		RelativeURI: "/tasks/orders", Method: "PUT", Body: formats.JSON(), Routing: &cloudtasksio.AppEngineRouting{Service: "default", Version: "v2"}}}
	_, err := run(t, cfg, []any{appEngineOrder{ID: "1", Service: &worker}, appEngineOrder{ID: "2"}, appEngineOrder{ID: "3", Service: &cleared}})
	require.NoError(t, err)
	routing := map[string]string{}
	for _, task := range srv.Tasks(testQueue.Path()) {
		req := task.GetAppEngineHttpRequest()
		require.NotNil(t, req)
		assert.Equal(t, "/tasks/orders", req.GetRelativeUri())
		assert.Equal(t, cloudtaskspb.HttpMethod_PUT, req.GetHttpMethod())
		routing[string(req.GetBody())] = req.GetAppEngineRouting().GetService() + "/" + req.GetAppEngineRouting().GetVersion()
	}
	assert.Equal(t, map[string]string{`{"id":"1"}`: "worker/v2", `{"id":"2"}`: "default/v2", `{"id":"3"}`: "/v2"}, routing)
}

func TestANamedTaskFromTheSerializerFailsTheBundle(t *testing.T) {
	srv := newServer(t)
	cfg := cloudtasksio.Config{Queue: testQueue, Serializer: serializeNamed, EmulatorEndpoint: srv.Addr, OnFailure: cloudtasksio.DeadLetter}
	_, err := run(t, cfg, orders(1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "named task")
}

func TestExactlyOnceCreatesEveryElementsTask(t *testing.T) {
	srv := newServer(t)
	srv.SetTombstoneTTL(testQueue.Path(), 2*time.Hour)
	cfg := httpConfig(srv)
	cfg.Delivery = cloudtasksio.ExactlyOnce
	const n = 250
	counters, err := run(t, cfg, orders(n), func(s beam.Scope, dl beam.PCollection) { passert.Empty(s, dl) })
	require.NoError(t, err)
	tasks := srv.Tasks(testQueue.Path())
	require.Len(t, tasks, n)
	for _, task := range tasks {
		assert.Regexp(t, `/tasks/[0-9a-f]{32}$`, task.GetName(), "unkeyed tasks get random 128-bit ids")
	}
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])

	// With a task-id key, running the pipeline again creates nothing new.
	_, err = run(t, cfg, keyedOrders(n))
	require.NoError(t, err)
	counters, err = run(t, cfg, keyedOrders(n))
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 2*n)
	assert.Equal(t, int64(n), counters[cloudtasksio.MetricTasksDeduplicated])
}
