package engines

// Where the sink's code runs. On an engine with EXTERNAL workers (BEAM_WORKER_POOL) the job's
// DoFns run in a process the worker pool started from the staged test binary, as on Dataflow
// or Flink: nothing this process built or set at construction reaches them except what the
// pipeline carries. These cases check that the workers are indeed elsewhere (their process id,
// and a package variable set only here) and that the sink needs nothing more: registered
// functions decoded on the worker, clients built there, the key file read there.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeFor[stampedOrder]())
	register.Function1x1(stampOrder)
	register.Function1x2(queueOfStamped)
	register.Function1x2(taskIDOfStamped)
}

// launcherMark is set by a test in this process just before it builds a pipeline, and by
// nothing else: a worker in another process sees it empty.
var launcherMark string

// workerStamp says where an order was made: the process id and what launcherMark held there.
type workerStamp struct {
	PID          int    `json:"pid"`
	LauncherMark string `json:"launcherMark"`
}

// stampedOrder is an order that carries, in its JSON body, the stamp of the worker that made it.
type stampedOrder struct {
	ID     string      `json:"id"`
	Seq    int         `json:"seq"`
	Worker workerStamp `json:"worker"`
}

// stampOrder makes order seq and stamps it with this process's id and launcherMark. It runs
// in the same stage as the sink's writer (nothing between them re-partitions), so in the same
// worker process.
func stampOrder(seq int) stampedOrder {
	return stampedOrder{ID: orderID(seq), Seq: seq, Worker: workerStamp{PID: os.Getpid(), LauncherMark: launcherMark}}
}

// queueOfStamped is the sink's QueueFn: every order goes to the cases' queue.
func queueOfStamped(stampedOrder) (cloudtasksio.Queue, error) {
	return cloudtasksio.NewQueue(enginesQueue.Project, enginesQueue.Location, enginesQueue.Name)
}

// taskIDOfStamped is the sink's TaskIDFn: the order id names the task.
func taskIDOfStamped(o stampedOrder) (string, error) { return o.ID, nil }

func TestEngineSinkRunsInTheWorkerProcess(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		const n = 2000
		ct := newCloudTasks(t)
		rcv := newReceiver(t)
		launcherMark = fmt.Sprintf("set by the launcher, pid %d", os.Getpid())
		t.Cleanup(func() { launcherMark = "" })

		// The queue and the task id come from registered functions, which the worker decodes from
		// the pipeline; the client is built in the writer's Setup, on the worker.
		cfg := cloudtasksio.Config{
			QueueFn:          queueOfStamped,
			TaskIDFn:         taskIDOfStamped,
			EmulatorEndpoint: ct.Addr,
			HTTP: &cloudtasksio.HTTPTarget{URL: rcv.URL + "/orders", Body: formats.JSON(),
				Headers: map[string]string{"Content-Type": "application/json"}},
		}
		p, s := beam.NewPipelineWithRoot()
		orders := beam.ParDo(s, stampOrder, generate(s, t.Name(), n, shards))
		cloudtasksio.Write(s, cfg, orders)
		pr := e.mustRun(t, p)

		ct.waitDrained(t)
		assertEachOnce(t, rcv, n)
		_, byTask, _, _ := rcv.counts()
		for seq := range n {
			if !assert.Equal(t, 1, byTask[cloudtasksio.TaskID(orderID(seq))], "order %d is delivered under the task id of its order id", seq) {
				break
			}
		}
		counters := sinkCounters(pr, cloudtasksio.MetricsNamespace)
		require.NotEmpty(t, counters, "the job service returned no cloudtasksio counters")
		assert.Equal(t, int64(n), counters[cloudtasksio.MetricRecordsSend])

		stamps := rcv.workerStamps()
		pids := map[int]int{}
		for st, c := range stamps {
			pids[st.PID] += c
		}
		t.Logf("on %s (%s workers): the launcher is pid %d; the orders were made and written by pid(s) %v (pid: orders)",
			e.Name, e.environment(), os.Getpid(), pids)
		require.NotEmpty(t, stamps, "no stamped order arrived")
		for st := range stamps {
			if e.separateWorkers() {
				assert.NotEqual(t, os.Getpid(), st.PID, "a worker ran in the launcher's process")
				assert.Positive(t, st.PID)
				assert.Empty(t, st.LauncherMark, "a worker saw a package variable that only the launcher set")
			} else {
				// The control: with LOOPBACK workers the same stamps show the launcher, so the check
				// above can tell the two apart.
				assert.Equal(t, os.Getpid(), st.PID, "a LOOPBACK worker runs in the launcher's process")
				assert.Equal(t, launcherMark, st.LauncherMark, "a LOOPBACK worker shares the launcher's memory")
			}
		}
	})
}

func TestEngineKeyFileIsReadOnTheWorker(t *testing.T) {
	onEngines(t, func(t *testing.T, e engine) {
		// The pipeline is built with the path of a key file that does not exist yet: building it
		// reads nothing. The file is written only afterwards, and holds user credentials, which
		// the sink refuses (it takes service-account keys only). So the job can only fail with
		// the sink's refusal if the worker read the file when it built its client, and the
		// refusal must name the setting and carry neither the path nor the file's secret.
		keyFile := filepath.Join(t.TempDir(), "key.json")
		const secret = "a-refresh-token-no-error-may-show"
		cfg := cloudtasksio.Config{Queue: enginesQueue, ServiceAccountKeyFile: keyFile,
			HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}}
		p, s := beam.NewPipelineWithRoot()
		cloudtasksio.Write(s, cfg, beam.ParDo(s, orderOf, generate(s, t.Name(), 10, 1)))

		require.NoError(t, os.WriteFile(keyFile, []byte(`{"type": "authorized_user", "client_id": "engines", "client_secret": "engines", "refresh_token": "`+secret+`"}`), 0o600))
		_, err := e.run(context.Background(), p)
		require.Error(t, err, "a job whose key file holds user credentials must fail on the worker")
		// The error holds the job's whole report (the worker's execution plan among it); show the
		// line that carries the sink's refusal.
		refusal := err.Error()
		for line := range strings.Lines(err.Error()) {
			if strings.Contains(line, "ServiceAccountKeyFile") {
				refusal = strings.TrimSpace(line)
				break
			}
		}
		t.Logf("on %s (%s workers) the job failed with: %.400s", e.Name, e.environment(), refusal)
		assert.Contains(t, err.Error(), "Config.ServiceAccountKeyFile")
		assert.Contains(t, err.Error(), "not a service-account key")
		assert.NotContains(t, err.Error(), secret)
		assert.NotContains(t, err.Error(), keyFile)
	})
}
