//go:build unix

package cloudtasksio_test

// The quota benchmark: the writer engine against a queue with a create quota, with adaptive
// concurrency off and on. docs/performance.md ("Under a create quota") has the command, the
// figures and the chart drawn from this benchmark's series.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/perfchart"
)

// QuotaSeriesEnv names the file BenchmarkQuotaAdaptive writes its per-second series to, as
// perfchart CSV: created/s and rejected/s, one series per case. Unset: no file.
const quotaSeriesEnv = "CLOUDTASKSIO_QUOTA_SERIES"

// The workload: what a worker process of a pipeline replaying a backlog into one queue does.
const (
	quotaPerSecond   = 300
	quotaTasks       = 20_000
	quotaBundle      = 1_000 // elements per bundle
	quotaParallel    = 2     // bundles running at once in the worker process
	quotaLatency     = 20 * time.Millisecond
	quotaMaxReplays  = 20               // attempts of one bundle before the run gives up on it
	quotaRunDeadline = 10 * time.Minute // a run still unfinished then stops and reports what it did
)

// quotaCase is one sub-benchmark.
type quotaCase struct {
	adaptive  bool
	retryInfo bool
}

func (c quotaCase) name() string {
	return fmt.Sprintf("adaptive=%s/retryinfo=%s", onOff(c.adaptive), onOff(c.retryInfo))
}

// series is the case's name in the chart.
func (c quotaCase) series() string {
	s := "adaptive " + onOff(c.adaptive)
	if c.retryInfo {
		s += ", RetryInfo"
	}
	return s
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// BenchmarkQuotaAdaptive runs 20,000 named tasks into a queue whose quota is 300 creates/s
// (the bucket holds 300, so a quiet queue takes one second's worth at once), with 20 ms added
// to every create, rejected or not. The writer engine runs as the sink runs it on a worker:
// the default WriterOptions, bundles of 1,000 elements, two bundles at a time sharing the
// worker's client (and, with adaptive concurrency, its per-queue state). A bundle that fails
// is run again, as Dataflow retries a failed bundle; its tasks are named, so the replay's
// creates of tasks that exist come back ALREADY_EXISTS and count as created.
//
// Reported: bundles-failed (failed bundle attempts), creates/s (tasks stored per second of
// wall time), %-of-quota, rejected/task (RESOURCE_EXHAUSTED answers per task stored), and
// cpu-µs/create. With CLOUDTASKSIO_QUOTA_SERIES=<file> it also writes the per-second series
// of every case it ran to that file, for tools/perfchart.
func BenchmarkQuotaAdaptive(b *testing.B) {
	var panels []perfchart.Panel
	for _, c := range []quotaCase{{false, false}, {true, false}, {false, true}, {true, true}} {
		var created, rejected []perfchart.Point
		ran := b.Run(c.name(), func(b *testing.B) {
			created, rejected = benchQuota(b, c)
		})
		if !ran || len(created) == 0 {
			continue
		}
		if len(panels) == 0 {
			panels = []perfchart.Panel{{Title: "created/s"}, {Title: "rejected/s"}}
		}
		panels[0].Series = append(panels[0].Series, perfchart.Series{Name: c.series(), Points: created})
		panels[1].Series = append(panels[1].Series, perfchart.Series{Name: c.series(), Points: rejected})
	}
	path := os.Getenv(quotaSeriesEnv)
	if path == "" || len(panels) == 0 {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("%s: %v", quotaSeriesEnv, err)
	}
	defer f.Close()
	if err := perfchart.WriteCSV(f, panels); err != nil {
		b.Fatalf("%s: %v", quotaSeriesEnv, err)
	}
	b.Logf("wrote the series to %s", path)
}

// quotaTimeline counts, per second since start, the creates the server stored and the ones
// its quota rejected.
type quotaTimeline struct {
	mu                sync.Mutex
	start             time.Time
	created, rejected []int
}

func (tl *quotaTimeline) observe(c cloudtaskstest.Call) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	sec := int(c.End.Sub(tl.start) / time.Second)
	if sec < 0 {
		return
	}
	for len(tl.created) <= sec {
		tl.created = append(tl.created, 0)
		tl.rejected = append(tl.rejected, 0)
	}
	switch status.Code(c.Err) {
	case codes.OK:
		tl.created[sec]++
	case codes.ResourceExhausted:
		tl.rejected[sec]++
	}
}

// points returns the series, each second's count at the second's midpoint.
func (tl *quotaTimeline) points() (created, rejected []perfchart.Point) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for i := range tl.created {
		x := float64(i) + 0.5
		created = append(created, perfchart.Point{X: x, Y: float64(tl.created[i])})
		rejected = append(rejected, perfchart.Point{X: x, Y: float64(tl.rejected[i])})
	}
	return created, rejected
}

// benchQuota is one case of BenchmarkQuotaAdaptive; it returns the last iteration's series.
func benchQuota(b *testing.B, c quotaCase) (created, rejected []perfchart.Point) {
	base := defaultEngineOptions()
	template := benchRequest(b)
	var wall, cpu time.Duration
	var stored, rejections, bundlesFailed, unfinished int
	for i := 0; b.Loop(); i++ {
		srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch(),
			cloudtaskstest.WithCreateQuota(testQueue.Path(), cloudtaskstest.CreateQuota{PerSecond: quotaPerSecond, RetryInfo: c.retryInfo}))
		if _, err := srv.CreateQueue(testQueue.Path()); err != nil {
			b.Fatal(err)
		}
		srv.SetLatency(quotaLatency)
		// The sink's default client: telemetry off.
		client := newBenchClient(b, srv, 1, option.WithTelemetryDisabled())
		creator := engine.CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
			return client.CreateTask(ctx, req)
		})
		opts := base
		if c.adaptive {
			opts.Adaptive = engine.NewAdaptive() // the worker's state, shared by its bundles
		}
		// Named tasks, as a pipeline that replays bundles should use.
		reqs := make([]*cloudtaskspb.CreateTaskRequest, quotaTasks)
		for j := range reqs {
			r := proto.Clone(template).(*cloudtaskspb.CreateTaskRequest)
			r.Task.Name = fmt.Sprintf("%s/tasks/run%d-task%d", testQueue.Path(), i, j)
			reqs[j] = r
		}
		tl := &quotaTimeline{start: time.Now()}
		stop := srv.Observe("CreateTask", tl.observe)

		c0, t0 := cpuTime(b), time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), t0.Add(quotaRunDeadline))
		bundles := make(chan []*cloudtaskspb.CreateTaskRequest, quotaTasks/quotaBundle)
		for j := 0; j < quotaTasks; j += quotaBundle {
			bundles <- reqs[j:min(j+quotaBundle, quotaTasks)]
		}
		close(bundles)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range quotaParallel {
			wg.Go(func() {
				for bundle := range bundles {
					failures := runQuotaBundle(ctx, creator, opts, bundle)
					mu.Lock()
					bundlesFailed += failures
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		cancel()
		wall += time.Since(t0)
		cpu += cpuTime(b) - c0
		stop()

		st := srv.Stats()
		stored += st.TasksCreated
		rejections += st.QuotaRejections
		unfinished += quotaTasks - st.TasksCreated
		created, rejected = tl.points()
		client.Close()
		srv.Close()
	}
	if unfinished > 0 {
		b.Logf("%d tasks were not created: a bundle failed %d times, or the run passed %v", unfinished, quotaMaxReplays, quotaRunDeadline)
	}
	rate := float64(stored) / wall.Seconds()
	b.ReportMetric(float64(bundlesFailed)/float64(b.N), "bundles-failed")
	b.ReportMetric(rate, "creates/s")
	b.ReportMetric(100*rate/quotaPerSecond, "%-of-quota")
	b.ReportMetric(float64(rejections)/float64(max(stored, 1)), "rejected/task")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(stored, 1)), "cpu-µs/create")
	b.ReportMetric(float64(unfinished)/float64(b.N), "unfinished-tasks")
	return created, rejected
}

// runQuotaBundle runs one bundle through a fresh engine, again while it fails, up to
// quotaMaxReplays times or until ctx ends, and returns how many times it failed.
func runQuotaBundle(ctx context.Context, creator engine.Creator, opts engine.Options, bundle []*cloudtaskspb.CreateTaskRequest) (failures int) {
	for range quotaMaxReplays {
		if ctx.Err() != nil {
			return failures
		}
		e := engine.New[struct{}](creator, opts, nil)
		err := func() error {
			for _, req := range bundle {
				if err := e.Submit(ctx, &engine.Request[struct{}]{Create: req}); err != nil {
					return err
				}
			}
			return e.Flush(ctx)
		}()
		if err == nil {
			return failures
		}
		e.Fail(err)
		if ctx.Err() != nil {
			return failures // the run's deadline, not a failure of the bundle
		}
		failures++
		_ = e.Flush(context.Background())
	}
	return failures
}
