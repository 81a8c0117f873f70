//go:build unix

package engines

// BenchmarkWriteOnEngines measures cloudtasksio.Write on each engine at the latencies of the
// cloudtasksio benchmarks. docs/performance.md has the command that runs it together with the
// bare writer engine (cloudtasksio's BenchmarkEngineCreates) and the figures measured.
//
// It reports:
//   - creates/s: tasks created per second of wall time, job submission and start-up included;
//   - cpu-µs/create: user+system CPU of this process (the sink, the Go workers, which run here
//     under LOOPBACK, the Cloud Tasks server and, for prism, the runner) per created task. A
//     Flink job server is another process: its CPU is not in the figure.

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// benchLatencies are the added CreateTask latencies, with the elements per iteration sized
// like cloudtasksio's BenchmarkWrite (one to three seconds of creating on two cores).
var benchLatencies = []struct {
	latency  time.Duration
	elements int
}{{20 * time.Millisecond, 8000}, {200 * time.Millisecond, 1000}}

// processCPU is the user+system CPU time this process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkWriteOnEngines(b *testing.B) {
	engines := []func(b *testing.B) engine{
		func(*testing.B) engine { return prismEngine() },
		func(b *testing.B) engine { return prismJobServiceEngine(b) },
		func(b *testing.B) engine { return flinkEngine(b) },
	}
	for _, c := range benchLatencies {
		for i, pick := range engines {
			name := []string{"prism", "prism-job-service", "flink"}[i]
			b.Run(fmt.Sprintf("latency=%v/engine=%s", c.latency, name), func(b *testing.B) {
				e := pick(b)
				ct := newCloudTasks(b, cloudtaskstest.WithoutDispatch())
				ct.SetLatency(c.latency)
				cfg := ct.httpConfig("https://example.com/orders")
				var wall, cpu time.Duration
				runs := 0
				for b.Loop() {
					p, s := beam.NewPipelineWithRoot()
					runID := fmt.Sprintf("%s/%d", b.Name(), runs)
					cloudtasksio.Write(s, cfg, beam.ParDo(s, orderOf, generate(s, runID, c.elements, shards)))
					c0, t0 := processCPU(b), time.Now()
					e.mustRun(b, p)
					wall += time.Since(t0)
					cpu += processCPU(b) - c0
					runs++
				}
				creates := runs * c.elements
				if st := ct.Stats(); st.TasksCreated != creates {
					b.Fatalf("the server stored %d tasks, want %d", st.TasksCreated, creates)
				}
				b.ReportMetric(float64(creates)/wall.Seconds(), "creates/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(creates), "cpu-µs/create")
				b.ReportMetric(float64(ct.Stats().MaxCreateTaskInFlight), "max-in-flight")
			})
		}
	}
}
