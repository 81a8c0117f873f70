package engines

// The sink on job services outside the test process: each case runs one pipeline on every
// engine jobServiceEngines names (a prism job service at BEAM_PRISM_ENDPOINT with LOOPBACK
// workers and, with BEAM_WORKER_POOL, with EXTERNAL ones; the Python SDK's job service at
// BEAM_PYTHON_JOB_ENDPOINT; Beam's Flink job server at BEAM_FLINK_ENDPOINT), as a subtest named
// after the engine, and asserts what the in-process Cloud Tasks server stored and what the
// loopback receiver was sent.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

func init() {
	register.Function1x1(tickOrder)
}

// shards is how many pieces the generator splits its input into: enough for both of the
// embedded cluster's task slots to get several.
const shards = 8

// assertEachOnce checks that the receiver got every order [0, n) exactly once and nothing
// else.
func assertEachOnce(t *testing.T, rcv *receiver, n int) {
	t.Helper()
	byID, _, total, bad := rcv.counts()
	require.Empty(t, bad, "the receiver got bodies that are not orders")
	var missing, repeated []string
	for seq := range n {
		switch c := byID[orderID(seq)]; {
		case c == 0:
			missing = append(missing, orderID(seq))
		case c > 1:
			repeated = append(repeated, fmt.Sprintf("%s x%d", orderID(seq), c))
		}
	}
	assert.Empty(t, missing, "orders never delivered")
	assert.Empty(t, repeated, "orders delivered more than once")
	assert.Equal(t, n, total, "deliveries")
}

func TestEngineAtLeastOnceDeliversEveryOrderOnce(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n = 10000 // ten times the writer's default cap on tasks in flight; 20 s of the queue's 500 dispatches/s
		ct := newCloudTasks(t)
		rcv := newReceiver(t)
		p, s := beam.NewPipelineWithRoot()
		orders := beam.ParDo(s, orderOf, generate(s, t.Name(), n, shards))
		cloudtasksio.Write(s, ct.httpConfig(rcv.URL+"/orders"), orders)

		pr := e.mustRun(t, p)

		st := ct.Stats()
		assert.Equal(t, n, st.TasksCreated, "tasks stored")
		assert.Equal(t, n, st.CreateTaskCalls, "one create call per order: nothing failed, nothing was retried")
		ct.waitDrained(t)
		assertEachOnce(t, rcv, n)

		assert.Equal(t, int64(n), sinkCounters(pr, enginesNamespace)["generated"], "the generator ran once: no bundle was replayed")
		counters := sinkCounters(pr, cloudtasksio.MetricsNamespace)
		require.NotEmpty(t, counters, "the job service returned no cloudtasksio counters")
		assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])
		assert.Positive(t, counters[cloudtasksio.MetricBytesSend])
		assert.Zero(t, counters[cloudtasksio.MetricRecordsSendErrors])
	})
}

func TestEngineNamedTasksUnderTransientFaultsAreCreatedOncePerKey(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n, lost = 5000, 100
		ct := newCloudTasks(t)
		rcv := newReceiver(t)
		// Every 50th create call answers a retryable code, and the responses of the first 100
		// successful creates are lost after the task was stored.
		var script []codes.Code
		transient := []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted}
		for i := range 60 {
			for range 49 {
				script = append(script, codes.OK)
			}
			script = append(script, transient[i%len(transient)])
		}
		ct.InjectErrors("CreateTask", script...)
		ct.LoseResponses(lost)

		p, s := beam.NewPipelineWithRoot()
		orders := beam.ParDo(s, namedOrderOf, generate(s, t.Name(), n, shards))
		cloudtasksio.Write(s, ct.httpConfig(rcv.URL+"/orders"), orders)
		pr := e.mustRun(t, p)

		st := ct.Stats()
		assert.Equal(t, n, st.TasksCreated, "one task per key")
		assert.Equal(t, 60, st.InjectedErrors, "every scripted fault was met")
		assert.Equal(t, lost, st.LostResponses)
		assert.Equal(t, lost, st.AlreadyExists, "each create whose response was lost came back ALREADY_EXISTS on its retry")
		ct.waitDrained(t)
		assertEachOnce(t, rcv, n)
		_, byTask, _, _ := rcv.counts()
		for seq := range n {
			if !assert.Equal(t, 1, byTask[cloudtasksio.TaskID(orderID(seq))], "order %d is delivered under its TaskID", seq) {
				break
			}
		}

		counters := sinkCounters(pr, cloudtasksio.MetricsNamespace)
		require.NotEmpty(t, counters, "the job service returned no cloudtasksio counters")
		assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])
		assert.Equal(t, int64(lost), counters[cloudtasksio.MetricTasksDeduplicated])
		assert.Equal(t, int64(20+lost), counters[cloudtasksio.MetricErrorClass("UNAVAILABLE")], "scripted and lost-response UNAVAILABLE answers")
	})
}

// replayRun is what a run through a PERMISSION_DENIED window left behind.
type replayRun struct {
	ct       *cloudTasks
	rcv      *receiver
	stats    cloudtaskstest.Stats // the server's, once the job ended
	replayed int                  // orders the generator emitted beyond the n of the input
}

// runThroughDeniedWindow writes n orders, made by toElem (orderOf or namedOrderOf), to a
// server that serves 1,500 creates and then answers PERMISSION_DENIED three times. The bundle
// that meets one fails (PERMISSION_DENIED is terminal for the sink), and Flink's restart
// strategy (.ci/engines configures fixed-delay restarts) runs the failed work again; the job
// must then succeed.
func runThroughDeniedWindow(t *testing.T, e engine, n int, toElem any) replayRun {
	t.Helper()
	const ok, denied = 1500, 3
	if !e.RetriesBundles {
		t.Skipf("NOT RUN on %s: it never runs a failed bundle again (it fails the job), and this case needs a runner that does, such as Flink with a restart strategy", e.Name)
	}
	r := replayRun{ct: newCloudTasks(t), rcv: newReceiver(t)}
	script := make([]codes.Code, 0, ok+denied)
	for range ok {
		script = append(script, codes.OK)
	}
	for range denied {
		script = append(script, codes.PermissionDenied)
	}
	r.ct.InjectErrors("CreateTask", script...)

	p, s := beam.NewPipelineWithRoot()
	elems := beam.ParDo(s, toElem, generate(s, t.Name(), n, shards))
	cloudtasksio.Write(s, r.ct.httpConfig(r.rcv.URL+"/orders"), elems)
	e.mustRun(t, p)

	r.stats = r.ct.Stats()
	r.replayed = int(emittedBy(t.Name())) - n
	t.Logf("the generator emitted %d orders for %d (%d replayed); server: %+v", int(emittedBy(t.Name())), n, r.replayed, r.stats)
	assert.Equal(t, denied, r.stats.InjectedErrors, "the whole PERMISSION_DENIED window was met")
	assert.Positive(t, r.replayed, "Flink re-ran the failed work")
	r.ct.waitDrained(t)
	return r
}

func TestEngineFailedBundleIsReplayedAndEveryNamedKeyIsCreatedOnce(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n = 5000
		r := runThroughDeniedWindow(t, e, n, namedOrderOf)
		st := r.stats
		assert.Equal(t, n, st.TasksCreated, "every key was stored once, attempts and replays together")
		assert.Equal(t, st.CreateTaskCalls-st.InjectedErrors-n, st.AlreadyExists,
			"every other create call was a replayed key that the queue already held")
		assertEachOnce(t, r.rcv, n)
	})
}

func TestEngineFailedBundleIsReplayedAndUnnamedOrdersArriveAtLeastOnce(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n = 5000
		r := runThroughDeniedWindow(t, e, n, orderOf)
		byID, _, total, bad := r.rcv.counts()
		require.Empty(t, bad)
		for seq := range n {
			if !assert.Positive(t, byID[orderID(seq)], "order %d delivered at least once", seq) {
				break
			}
		}
		// An unnamed task cannot be recognised on replay: every order whose create succeeded in
		// a failed attempt and that the restart emitted again was created a second time. So the
		// duplicates are exactly the stored tasks beyond one per order, and they come only from
		// the replayed orders.
		duplicates := total - n
		t.Logf("%d orders, %d replayed by the restart, %d extra deliveries", n, r.replayed, duplicates)
		assert.Equal(t, r.stats.TasksCreated, total, "every stored task was delivered once")
		assert.Equal(t, r.stats.TasksCreated-n, duplicates)
		assert.LessOrEqual(t, duplicates, r.replayed, "only a replayed order can be duplicated")
	})
}

func TestEngineNamedOrdersOfAFailedJobRunAgainAreCreatedOnce(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		// The replay a runner without bundle retries leaves to its user: the first job meets a
		// PERMISSION_DENIED window after 1,500 creates and fails (an engine that retries bundles
		// may get through a window of three instead), and the same input is then written again
		// by a second job. Named tasks make the second job create only what the first did not.
		// A runner that fails the job at the first failed bundle meets one: how many creates
		// reach a longer window before the job stops depends on how many it has in flight then
		// (adaptive concurrency's slow start may still be growing at a loopback round trip), and
		// what it leaves of the window would fail the second job.
		const n, ok = 5000, 1500
		denied := 3
		if !e.RetriesBundles {
			denied = 1
		}
		ct := newCloudTasks(t)
		rcv := newReceiver(t)
		script := make([]codes.Code, 0, ok+denied)
		for range ok {
			script = append(script, codes.OK)
		}
		for range denied {
			script = append(script, codes.PermissionDenied)
		}
		ct.InjectErrors("CreateTask", script...)
		build := func(run string) *beam.Pipeline {
			p, s := beam.NewPipelineWithRoot()
			orders := beam.ParDo(s, namedOrderOf, generate(s, t.Name()+"/"+run, n, shards))
			cloudtasksio.Write(s, ct.httpConfig(rcv.URL+"/orders"), orders)
			return p
		}

		_, err := e.run(context.Background(), build("first"))
		if e.RetriesBundles {
			require.NoError(t, err, "%s re-runs the failed bundles", e.Name)
		} else {
			require.Error(t, err, "%s fails the job at the first failed bundle", e.Name)
			assert.Contains(t, err.Error(), "PERMISSION_DENIED")
		}
		first := ct.Stats()
		t.Logf("the first job stored %d of %d tasks: %.300v", first.TasksCreated, n, err)
		require.Equal(t, denied, first.InjectedErrors, "the whole PERMISSION_DENIED window was met")

		pr := e.mustRun(t, build("again"))
		second := ct.Stats()
		assert.Equal(t, n, second.TasksCreated, "every key is stored once over both jobs")
		counters := sinkCounters(pr, cloudtasksio.MetricsNamespace)
		require.NotEmpty(t, counters, "the job service returned no cloudtasksio counters")
		assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend], "the second job accepted every order")
		// A create the first job still had in flight when it failed may land after this point,
		// so the tasks it stored are a lower bound of what the second one found there.
		assert.GreaterOrEqual(t, counters[cloudtasksio.MetricTasksDeduplicated], int64(first.TasksCreated),
			"every task the first job stored came back ALREADY_EXISTS in the second")
		ct.waitDrained(t)
		assertEachOnce(t, rcv, n)
	})
}

func TestEngineExactlyOnceCreatesEveryOrderOnce(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n = 5000
		ct := newCloudTasks(t)
		rcv := newReceiver(t)
		cfg := ct.httpConfig(rcv.URL + "/orders")
		cfg.Delivery = cloudtasksio.ExactlyOnce

		p, s := beam.NewPipelineWithRoot()
		orders := beam.ParDo(s, orderOf, generate(s, t.Name(), n, shards))
		cloudtasksio.Write(s, cfg, orders)
		pr := e.mustRun(t, p)

		st := ct.Stats()
		assert.Equal(t, n, st.TasksCreated, "stage, Reshuffle, create: one task per order")
		assert.Equal(t, n, st.CreateTaskCalls)
		ct.waitDrained(t)
		assertEachOnce(t, rcv, n)
		counters := sinkCounters(pr, cloudtasksio.MetricsNamespace)
		require.NotEmpty(t, counters, "the job service returned no cloudtasksio counters")
		assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])
	})
}

// rejectEvery10th is a reject hook that refuses the task of every order whose sequence
// number is a multiple of 10, as the service refuses an invalid task.
func rejectEvery10th(req *cloudtaskspb.CreateTaskRequest) error {
	var o order
	if err := json.Unmarshal(req.GetTask().GetHttpRequest().GetBody(), &o); err != nil {
		return err
	}
	if o.Seq%10 == 0 {
		return errors.New("this order is refused by the test")
	}
	return nil
}

func TestEngineDeadLettersArePublishedOnceEach(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n = 2000
		const topic = "projects/engines/topics/dead-letters"
		ct := newCloudTasks(t)
		ct.SetRejectFunc(rejectEvery10th)
		rcv := newReceiver(t)
		ps := newPubSubTopic(t, topic)

		cfg := ct.httpConfig(rcv.URL + "/orders")
		cfg.OnFailure = cloudtasksio.DeadLetter
		p, s := beam.NewPipelineWithRoot()
		orders := beam.ParDo(s, orderOf, generate(s, t.Name(), n, shards))
		failed := cloudtasksio.Write(s, cfg, orders)
		pub := pubsubdl.DefaultPubSubConfig(topic)
		pub.EmulatorEndpoint = ps.Addr
		pubsubdl.ToPubSub(s, pub, failed)
		pr := e.mustRun(t, p)

		rejected := map[int]int{}
		for _, m := range ps.Messages() {
			a := m.Attributes
			assert.Equal(t, cloudtasksio.Connector, a[pubsubdl.AttrConnector])
			assert.Equal(t, ct.Queue.Path(), a[pubsubdl.AttrDestination])
			assert.Equal(t, cloudtasksio.CodeInvalidArgument, a[pubsubdl.AttrCode])
			assert.Contains(t, a[pubsubdl.AttrError], "this order is refused by the test")
			fe, _, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.Data, Attributes: a})
			require.NoError(t, err)
			task, err := cloudtasksio.FailedTask(fe)
			require.NoError(t, err, "the message carries the whole task")
			var o order
			require.NoError(t, json.Unmarshal(task.GetHttpRequest().GetBody(), &o))
			rejected[o.Seq]++
		}
		assert.Len(t, rejected, n/10, "one dead letter per refused order")
		for seq, c := range rejected {
			assert.Zero(t, seq%10, "order %d was not refused", seq)
			assert.Equal(t, 1, c, "order %d published once", seq)
		}
		assert.Equal(t, n-n/10, ct.Stats().TasksCreated, "every other order was created")
		ct.waitDrained(t)
		byID, _, total, _ := rcv.counts()
		assert.Equal(t, n-n/10, total)
		assert.Len(t, byID, n-n/10)

		counters := sinkCounters(pr, cloudtasksio.MetricsNamespace)
		require.NotEmpty(t, counters, "the job service returned no cloudtasksio counters")
		assert.Equal(t, int64(n/10), counters[cloudtasksio.MetricRecordsSendErrors])
		assert.Equal(t, int64(n/10), sinkCounters(pr, "deadletter")["messagesPublished"])
	})
}

// tickOrder turns tick i of a periodic sequence into order i.
func tickOrder(i int64) order { return orderOf(int(i)) }

func TestEngineStreamingCreatesTasksWhileInputArrives(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		// The ticks start lead after the pipeline is built, time enough to submit the job and
		// start its workers (an EXTERNAL worker is staged and started anew, seconds on a busy
		// machine), so that the ticks do arrive one by one and not in a burst of overdue ones.
		const ticks, interval, lead = 60, 100 * time.Millisecond, 10 * time.Second
		ct := newCloudTasks(t)
		var firstCreate atomic.Int64
		stop := ct.Observe("CreateTask", func(c cloudtaskstest.Call) {
			if c.Err == nil {
				firstCreate.CompareAndSwap(0, c.End.UnixNano())
			}
		})
		defer stop()
		rcv := newReceiver(t)

		// An unbounded source: one tick every interval for ticks intervals from start, emitted by
		// a splittable DoFn that checkpoints itself between ticks. Tick i is not emitted before
		// start + i*interval, so a task created before the last tick was due was created while
		// input was still arriving, wherever the workers run.
		p, s := beam.NewPipelineWithRoot()
		start := time.Now().Add(lead)
		def := periodic.NewSequenceDefinition(start, start.Add(ticks*interval), interval)
		orders := beam.ParDo(s, tickOrder, periodic.Sequence(s, beam.Create(s, def)))
		cloudtasksio.Write(s, ct.httpConfig(rcv.URL+"/orders"), orders)
		// This case reads no metrics: where the job service cannot report them, the outcome is
		// judged by what the server stored and what the receiver got.
		e.runReadingNoMetrics(t, p)

		require.NotZero(t, firstCreate.Load(), "no task was created")
		first := time.Unix(0, firstCreate.Load())
		lastDue := start.Add((ticks - 1) * interval)
		t.Logf("first create %v before the last tick was due", lastDue.Sub(first))
		assert.True(t, first.Before(lastDue), "the first task was created (%v) before the last tick was due (%v)", first, lastDue)
		assert.Equal(t, ticks, ct.Stats().TasksCreated)
		ct.waitDrained(t)
		assertEachOnce(t, rcv, ticks)
	})
}
