//go:build unix

package cloudtasksio

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// BenchmarkWriteFnCreatedOutput drives the at-least-once write DoFn itself, without a runner,
// through bundles of 8,000 elements against the in-memory server at 20 ms: output=none is
// Write's DoFn, output=created WriteWithResult's, whose created tasks go to an emitter that
// keeps nothing. The pipeline benchmark (BenchmarkWriteWithResult, bench_test.go) measures the
// same on prism, whose own polling while a bundle runs takes most of the process's CPU there;
// here the CPU per create is the DoFn's, the client's and the server's only. It reports
// creates/s and cpu-µs/create as the other benchmarks do; named=true names every task from a
// key, which the created tasks then carry.
func BenchmarkWriteFnCreatedOutput(b *testing.B) {
	const perBundle = 8000
	for _, named := range []bool{false, true} {
		for _, output := range []string{"none", "created"} {
			b.Run(fmt.Sprintf("latency=20ms/named=%v/output=%s", named, output), func(b *testing.B) {
				srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
				b.Cleanup(func() { srv.Close() })
				if _, err := srv.CreateQueue(bundleQueue); err != nil {
					b.Fatal(err)
				}
				srv.SetLatency(20 * time.Millisecond)
				q, err := ParseQueue(bundleQueue)
				if err != nil {
					b.Fatal(err)
				}
				var elemType any = urlOrder{}
				if named {
					elemType = resultOrder{}
				}
				spec, err := compile(Config{Queue: q, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
					EmulatorEndpoint: srv.Addr}, typeOf(elemType))
				if err != nil {
					b.Fatal(err)
				}
				f := &writeResultFn{writeFn{Spec: spec}}
				if err := f.Setup(); err != nil {
					b.Fatal(err)
				}
				var kept int
				created := func(beam.EventTime, CreatedTask) { kept++ }
				ctx := context.Background()
				bundle := 0
				var wall, cpu time.Duration
				for b.Loop() {
					bundle++
					c0, t0 := benchCPU(b), time.Now()
					if output == "created" {
						err = f.StartBundle(ctx, discardDeadLetters, created)
					} else {
						err = f.writeFn.StartBundle(ctx, discardDeadLetters)
					}
					if err != nil {
						b.Fatal(err)
					}
					for i := range perBundle {
						var e any = urlOrder{ID: fmt.Sprint(i)}
						if named {
							e = resultOrder{ID: fmt.Sprint(i), Key: fmt.Sprintf("b%d-%d", bundle, i)}
						}
						if output == "created" {
							err = f.ProcessElement(ctx, 0, e, discardDeadLetters, created)
						} else {
							err = f.writeFn.ProcessElement(ctx, 0, e, discardDeadLetters)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					if output == "created" {
						err = f.FinishBundle(ctx, discardDeadLetters, created)
					} else {
						err = f.writeFn.FinishBundle(ctx, discardDeadLetters)
					}
					if err != nil {
						b.Fatal(err)
					}
					wall += time.Since(t0)
					cpu += benchCPU(b) - c0
				}
				creates := bundle * perBundle
				if st := srv.Stats(); st.TasksCreated != creates {
					b.Fatalf("the server stored %d tasks, want %d", st.TasksCreated, creates)
				}
				if output == "created" && kept != creates {
					b.Fatalf("%d created tasks emitted, want %d", kept, creates)
				}
				b.ReportMetric(float64(creates)/wall.Seconds(), "creates/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(creates), "cpu-µs/create")
			})
		}
	}
}

// benchCPU is the user+system CPU time this process has used so far.
func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
