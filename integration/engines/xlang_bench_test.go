package engines

// BenchmarkXlangPython compares, in one run and against the same in-process Cloud Tasks server
// with an added CreateTask latency, pipelines that write the same 5,000 orders as JSON tasks:
//
//   - python-sink-wN: a Python pipeline through the Go sink (beam_cloudtasks.WriteToCloudTasks,
//     the expansion service started from BEAM_XLANG_BINARY), on the DirectRunner with N workers
//     (--direct_num_workers=N --direct_running_mode=multi_threading), so N Go worker
//     processes, each with the sink's default single connection;
//   - python-dofn-w4: a Python pipeline whose DoFn calls the official Python client's
//     create_task for each element (google-cloud-tasks), what a Python user writes today, on
//     the DirectRunner with 4 workers;
//   - go-native: the Go sink in a Go pipeline on prism, in this process: one worker, one
//     connection, like python-sink-w1.
//
// It reports creates/s: orders per second of the pipeline's run, from its start to its end
// (pipeline construction and the expansion excluded). docs/performance.md has the command and
// the figures.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// xlangBenchOrders is how many orders each pipeline writes.
const xlangBenchOrders = 5000

// xlangBenchPipelines are the pipelines compared: mode "" is the Go pipeline.
var xlangBenchPipelines = []struct {
	name, mode string
	workers    int
}{
	{"python-sink-w1", "sink", 1},
	{"python-sink-w4", "sink", 4},
	{"python-dofn-w4", "dofn", 4},
	{"go-native", "", 1},
}

func BenchmarkXlangPython(b *testing.B) {
	python := requireEnv(b, pythonEnv, "the python of a virtual environment with apache-beam, google-cloud-tasks and beam_cloudtasks")
	binary := requireEnv(b, xlangBinaryEnv, "the path of the cloudtasks-expansion-service program")
	script, err := filepath.Abs("testdata/xlang/bench.py")
	if err != nil {
		b.Fatal(err)
	}
	for _, latency := range []time.Duration{20 * time.Millisecond, 200 * time.Millisecond} {
		for _, pl := range xlangBenchPipelines {
			b.Run(fmt.Sprintf("latency=%v/pipeline=%s", latency, pl.name), func(b *testing.B) {
				ct := newCloudTasks(b, cloudtaskstest.WithoutDispatch())
				ct.SetLatency(latency)
				var seconds float64
				runs := 0
				for b.Loop() {
					before := ct.Stats().TasksCreated
					if pl.mode == "" {
						cfg := ct.httpConfig("https://example.com/orders")
						p, s := beam.NewPipelineWithRoot()
						cloudtasksio.Write(s, cfg, beam.ParDo(s, orderOf, generate(s, fmt.Sprintf("%s/%d", b.Name(), runs), xlangBenchOrders, shards)))
						start := time.Now()
						prismEngine().mustRun(b, p)
						seconds += time.Since(start).Seconds()
					} else {
						seconds += runPythonBench(b, python, script, binary, ct.Addr, pl.mode, pl.workers)
					}
					if created := ct.Stats().TasksCreated - before; created != xlangBenchOrders {
						b.Fatalf("%s created %d tasks, want %d", pl.name, created, xlangBenchOrders)
					}
					runs++
				}
				b.ReportMetric(float64(runs*xlangBenchOrders)/seconds, "creates/s")
				b.ReportMetric(seconds/float64(runs), "s/run")
			})
		}
	}
}

// runPythonBench runs bench.py once and returns the seconds its pipeline ran.
func runPythonBench(b *testing.B, python, script, binary, emulator, mode string, workers int) float64 {
	b.Helper()
	args := []string{script, mode, "--n", fmt.Sprint(xlangBenchOrders), "--emulator", emulator}
	if mode == "sink" {
		args = append(args, "--binary", binary)
	}
	args = append(args, "--", "--runner=DirectRunner", fmt.Sprintf("--direct_num_workers=%d", workers), "--direct_running_mode=multi_threading")
	// The DoFn at 200 ms takes about 250 s for 5,000 creates on four workers.
	out, err := tryProcessWithin(b, 15*time.Minute, nil, python, args...)
	if err != nil {
		b.Fatalf("bench.py %s failed: %v\n%s", mode, err, tail(out, 30))
	}
	var res struct{ Seconds float64 }
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		b.Fatalf("bench.py %s printed no result: %v\n%s", mode, err, tail(out, 30))
	}
	return res.Seconds
}
