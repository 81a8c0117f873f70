//go:build unix

package cloudtasksio_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// The workload of BenchmarkWriteRefusals.
const (
	refusalsElements = 3000
	refusalsLatency  = 5 * time.Millisecond
)

// BenchmarkWriteRefusals is cloudtasksio.Write on prism, 3,000 elements into a queue whose
// creates take 5 ms, while the server refuses creates whatever their rate: none, 2%, 5% or
// 10% of them at random (cloudtaskstest.RefuseAtRandom, a seed per iteration), or the first
// 40 in a row (RefuseBurst). Each case runs with adaptive concurrency off, then on (the
// default). It reports creates/s (tasks created per second of the prism jobs' wall time,
// start-up included) and rejected/task (refusals per task created), and fails unless every
// job succeeded with exactly its tasks. docs/performance.md ("Sporadic refusals and a
// burst") has the command and the figures.
func BenchmarkWriteRefusals(b *testing.B) {
	for _, c := range []struct {
		name   string
		refuse func(seed uint64) cloudtaskstest.Reactor // nil: none
	}{
		{"refuse=0%", nil},
		{"refuse=2%", func(seed uint64) cloudtaskstest.Reactor { return cloudtaskstest.RefuseAtRandom(0.02, seed) }},
		{"refuse=5%", func(seed uint64) cloudtaskstest.Reactor { return cloudtaskstest.RefuseAtRandom(0.05, seed) }},
		{"refuse=10%", func(seed uint64) cloudtaskstest.Reactor { return cloudtaskstest.RefuseAtRandom(0.10, seed) }},
		{"burst=40", func(uint64) cloudtaskstest.Reactor { return cloudtaskstest.RefuseBurst(40, 0) }},
	} {
		for _, adaptive := range []cloudtasksio.AdaptiveConcurrency{cloudtasksio.AdaptiveConcurrencyOff, cloudtasksio.AdaptiveConcurrencyOn} {
			b.Run(fmt.Sprintf("%s/adaptive=%s", c.name, onOff(adaptive == cloudtasksio.AdaptiveConcurrencyOn)), func(b *testing.B) {
				var wall time.Duration
				var created, refused int
				for i := 0; b.Loop(); i++ {
					srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
					if _, err := srv.CreateQueue(testQueue.Path()); err != nil {
						b.Fatal(err)
					}
					srv.SetLatency(refusalsLatency)
					if c.refuse != nil {
						srv.AddReactor("CreateTask", c.refuse(uint64(i)))
					}
					cfg := cloudtasksio.Config{
						Queue: testQueue,
						HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders",
							Headers: map[string]string{"Content-Type": "application/json"}, Body: formats.JSON()},
						Writer:           cloudtasksio.WriterOptions{AdaptiveConcurrency: adaptive},
						EmulatorEndpoint: srv.Addr,
					}
					t0 := time.Now()
					runBenchPipeline(b, refusalsElements, func(s beam.Scope, col beam.PCollection) { cloudtasksio.Write(s, cfg, col) })
					wall += time.Since(t0)
					st := srv.Stats()
					srv.Close()
					if st.TasksCreated != refusalsElements {
						b.Fatalf("the server stored %d tasks, want %d", st.TasksCreated, refusalsElements)
					}
					created += st.TasksCreated
					refused += st.InjectedErrors
				}
				b.ReportMetric(float64(created)/wall.Seconds(), "creates/s")
				b.ReportMetric(float64(refused)/float64(max(created, 1)), "rejected/task")
			})
		}
	}
}
