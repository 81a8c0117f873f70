package cloudtasksio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// urlOrder is the element type of the bundle tests: an element whose url is not a URL fails to
// build, which under FailBundle fails the bundle at once.
type urlOrder struct {
	ID  string `json:"id"`
	URL string `cloudtasks:"url"`
}

const bundleQueue = "projects/p/locations/l/queues/bundles"

// newBundleServer starts a storing-only server with the queue of the bundle tests.
// waitStats waits, for at most 10 seconds, until cond holds for srv's
// counters (cloudtaskstest.Server.WaitUntil: re-checked on every change, not
// polled).
func waitStats(t *testing.T, srv *cloudtaskstest.Server, cond func(cloudtaskstest.Stats) bool, msgAndArgs ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.WaitUntil(ctx, cond), msgAndArgs...)
}

func newBundleServer(t *testing.T) *cloudtaskstest.Server {
	t.Helper()
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	_, err := srv.CreateQueue(bundleQueue)
	require.NoError(t, err)
	return srv
}

// rejectID makes srv answer INVALID_ARGUMENT for the task of the element with the given id.
func rejectID(srv *cloudtaskstest.Server, id string) {
	marker := []byte(fmt.Sprintf(`"id":%q`, id))
	srv.SetRejectFunc(func(req *cloudtaskspb.CreateTaskRequest) error {
		if bytes.Contains(req.GetTask().GetHttpRequest().GetBody(), marker) {
			return errors.New("the task is malformed")
		}
		return nil
	})
}

// newBundleWriteFn returns a set-up write DoFn sending to srv under policy, with cap tasks in
// flight.
func newBundleWriteFn(t *testing.T, srv *cloudtaskstest.Server, policy FailurePolicy, cap int, w WriterOptions) *writeFn {
	t.Helper()
	w.MaxInFlightTasks = cap
	q, err := ParseQueue(bundleQueue)
	require.NoError(t, err)
	cfg := Config{Queue: q, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		OnFailure: policy, Writer: w, EmulatorEndpoint: srv.Addr}
	spec, err := compile(cfg, typeOf(urlOrder{}))
	require.NoError(t, err)
	f := &writeFn{Spec: spec}
	require.NoError(t, f.Setup())
	return f
}

func discardDeadLetters(beam.EventTime, deadletter.FailedElement) {}

func TestARejectionUnderFailBundleStopsTheHeldElement(t *testing.T) {
	srv := newBundleServer(t)
	rejectID(srv, "bad")
	f := newBundleWriteFn(t, srv, FailBundle, 1, WriterOptions{})
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: "bad"}, discardDeadLetters))
	// At the cap, the next element waits for the rejection, which fails the bundle: it must
	// not be sent.
	err := f.ProcessElement(ctx, 0, urlOrder{ID: "held"}, discardDeadLetters)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "FailBundle")
	require.Error(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Equal(t, 1, srv.Stats().CreateTaskCalls, "only the rejected task reached the server")
	assert.Empty(t, srv.Tasks(bundleQueue))
}

func TestARejectionUnderFailBundleAbandonsParkedRetries(t *testing.T) {
	srv := newBundleServer(t)
	rejectID(srv, "bad")
	srv.LoseResponses(1) // the good task is stored, but its answer is UNAVAILABLE: it parks
	f := newBundleWriteFn(t, srv, FailBundle, 10, WriterOptions{RecoveryInitialBackoff: 50 * time.Millisecond, RecoveryMaxBackoff: 50 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: "good"}, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: "bad"}, discardDeadLetters))
	err := f.FinishBundle(ctx, discardDeadLetters)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "FailBundle")
	assert.LessOrEqual(t, srv.Stats().CreateTaskCalls, 2, "the parked retry is not re-sent once the bundle has failed")
}

func TestAFailedBundleCancelsItsCreatesAtTheServer(t *testing.T) {
	srv := newBundleServer(t)
	srv.SetLatency(time.Minute) // a create holds its slot at the server until cancelled
	const cap = 8
	// Adaptive concurrency's slow start lets one create to a new queue go out at once; the
	// others are held until the engine is called again (slow start lets more through as time
	// passes while no answer comes back), which this test does not do before the bundle fails.
	const inFlight = 1
	f := newBundleWriteFn(t, srv, FailBundle, cap, WriterOptions{})
	ctx := context.Background()
	for bundle := 1; bundle <= 3; bundle++ {
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		for i := range cap {
			require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: fmt.Sprint(bundle, "-", i)}, discardDeadLetters))
		}
		waitStats(t, srv, func(st cloudtaskstest.Stats) bool { return st.CreateTaskInFlight == inFlight },
			"bundle %d's creates reach the server", bundle)
		// An element that cannot be built fails the bundle under FailBundle, at once.
		err := f.ProcessElement(ctx, 0, urlOrder{ID: "broken", URL: "not a url"}, discardDeadLetters)
		require.Error(t, err)
		// The runner replays the failed bundle's elements; its creates must not keep their
		// slots at the server. (Cancellation reaches the server asynchronously.)
		waitStats(t, srv, func(st cloudtaskstest.Stats) bool { return st.CreateTaskInFlight == 0 },
			"bundle %d failed, but its creates are still in flight at the server", bundle)
	}
	st := srv.Stats()
	assert.Equal(t, inFlight, st.MaxCreateTaskInFlight, "no bundle's creates outlived it")
	assert.Empty(t, srv.Tasks(bundleQueue))
}

func TestARejectionInExactlyOnceModeStopsTheHeldEnvelope(t *testing.T) {
	srv := newStagedServer(t, "held")
	rejectID(srv, "bad")
	spec := stagedSpecFor(t, srv, "held", eoPlainOrder{})
	spec.Writer.MaxInFlightTasks = 1
	spec.Staged.VerifyQueueRetention = false
	envs := stageAll(t, spec, eoPlainOrder{ID: "bad"}, eoPlainOrder{ID: "held"})
	f := &stagedCreateFn{Spec: spec}
	f.Setup()
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, nil))
	require.NoError(t, f.ProcessElement(ctx, envs[0], nil))
	err := f.ProcessElement(ctx, envs[1], nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "INVALID_ARGUMENT")
	require.Error(t, f.FinishBundle(ctx, nil))
	assert.Equal(t, 1, srv.Stats().CreateTaskCalls, "the envelope held at the cap is not sent")
}

// captureLogs sends what the package logs into a buffer for the rest of the test. The package
// logs through Beam's log package, which writes to slog's default logger until a pipeline
// runs in the process: the worker harness of an in-process runner (prism, in the pipeline
// tests) then installs its own logger, which sends lines to the runner, and never puts the
// old one back. So captureLogs installs Beam's slog logger again before pointing slog's
// default logger at the buffer; Beam's log package cannot say which logger it had, so that
// one stays after the test, as at the process's start.
func captureLogs(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	saved := slog.Default()
	beamlog.SetLogger(&beamlog.Structural{})
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(saved) })
	return &buf
}

func logLines(buf *bytes.Buffer, containing string) []string {
	var out []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, containing) {
			out = append(out, line)
		}
	}
	return out
}

func TestLogAndDropBoundsItsLogLinesPerBundleAndKeepsTheCountersExact(t *testing.T) {
	srv := newBundleServer(t)
	logs := captureLogs(t)
	f := newBundleWriteFn(t, srv, LogAndDrop, 10, WriterOptions{})
	ctx, counters := metricsContext()
	const dropped = 1000
	for bundle := 1; bundle <= 2; bundle++ {
		logs.Reset()
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		for i := range dropped {
			require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: fmt.Sprint(i), URL: "not a url secret-token"}, discardDeadLetters))
		}
		require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))

		lines := logLines(logs, "cloudtasksio: dropped")
		require.Equal(t, maxLinesPerBundle+1, len(lines), "bundle %d: the first few drops, then one summary line", bundle)
		for _, line := range lines[:maxLinesPerBundle] {
			assert.Contains(t, line, "level=WARN")
			assert.Contains(t, line, bundleQueue)
			assert.Contains(t, line, "INVALID_ARGUMENT")
		}
		summary := lines[maxLinesPerBundle]
		assert.Contains(t, summary, "level=WARN")
		assert.Contains(t, summary, fmt.Sprintf("%d more", dropped-maxLinesPerBundle))
		assert.Contains(t, summary, fmt.Sprintf("%d in this bundle", dropped))
		assert.Contains(t, summary, "numRecordsSendErrors")
		assert.NotContains(t, logs.String(), "secret-token", "no element value in the log")
		assert.Equal(t, int64(bundle*dropped), counters()[MetricRecordsSendErrors], "every drop is counted")
	}
}

func TestLogAndDropWritesNoSummaryWhenEveryDropWasLogged(t *testing.T) {
	srv := newBundleServer(t)
	logs := captureLogs(t)
	f := newBundleWriteFn(t, srv, LogAndDrop, 10, WriterOptions{})
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	for i := range 3 {
		require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: fmt.Sprint(i), URL: "not a url"}, discardDeadLetters))
	}
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Equal(t, 3, len(logLines(logs, "cloudtasksio: dropped")))
}

// gaugeReader returns the latest value of each gauge recorded in ctx.
func gaugeReader(ctx context.Context) map[string]int64 {
	out := map[string]int64{}
	_ = metrics.Extractor{GaugeInt64: func(l metrics.Labels, v int64, _ time.Time) { out[l.Name()] = v }}.ExtractFrom(metrics.GetStore(ctx))
	return out
}

func TestTheCapBoundsCreatesAtTheServer(t *testing.T) {
	srv := newBundleServer(t)
	srv.SetLatency(100 * time.Millisecond)
	srv.InjectErrors("CreateTask", codes.Unavailable, codes.Unavailable, codes.Unavailable) // three of the first wave park
	const cap, n = 5, 30
	f := newBundleWriteFn(t, srv, FailBundle, cap, WriterOptions{RecoveryInitialBackoff: 50 * time.Millisecond, RecoveryMaxBackoff: 50 * time.Millisecond})
	ctx, _ := metricsContext()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	var maxInFlight, maxParked, maxHeld int64
	for i := range n {
		require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: fmt.Sprint(i)}, discardDeadLetters))
		g := gaugeReader(ctx)
		maxInFlight = max(maxInFlight, g[MetricInFlightTasks])
		maxParked = max(maxParked, g[MetricParkedTasks])
		maxHeld = max(maxHeld, g[MetricInFlightTasks]+g[MetricParkedTasks])
	}
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))

	st := srv.Stats()
	assert.Equal(t, cap, st.MaxCreateTaskInFlight, "the server saw creates overlap up to the cap, never beyond")
	assert.Equal(t, n+3, st.CreateTaskCalls, "every element once, the three parked ones twice")
	assert.Len(t, srv.Tasks(bundleQueue), n)
	assert.Equal(t, int64(cap), maxInFlight, "the inFlightTasks gauge reported the creates in flight")
	assert.Positive(t, maxParked, "the parkedTasks gauge reported the parked retries")
	assert.LessOrEqual(t, maxHeld, int64(cap), "in flight plus parked never exceeded the cap")
	g := gaugeReader(ctx)
	assert.Zero(t, g[MetricInFlightTasks], "after the flush")
	assert.Zero(t, g[MetricParkedTasks], "after the flush")
}
