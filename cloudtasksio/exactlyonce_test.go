package cloudtasksio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// eoOrder is the element type of the exactly-once unit tests.
type eoOrder struct {
	ID   string `json:"id"`
	Note string `json:"note,omitempty"`
	Key  string `cloudtasks:"task-id"`
}

type eoPlainOrder struct {
	ID string `json:"id"`
}

// eoSpec compiles an exactly-once config for queue name q.
func eoSpec(t *testing.T, q string, elem any, staged StagedOptions) *sinkSpec {
	t.Helper()
	cfg := Config{Queue: Queue{Project: "p", Location: "l", Name: q}, Delivery: ExactlyOnce, Staged: &staged,
		HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, EmulatorEndpoint: "127.0.0.1:1"}
	spec, err := compile(cfg, typeOf(elem))
	require.NoError(t, err)
	spec.Writer.QueuePreflight = PreflightOff // nothing serves 127.0.0.1:1: the preflight tests turn it on with a server
	return spec
}

// metricsContext returns a context that records Beam metrics, and a reader for its counters.
func metricsContext() (context.Context, func() map[string]int64) {
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "transform")
	return ctx, func() map[string]int64 {
		out := map[string]int64{}
		_ = metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) { out[l.Name()] += v }}.ExtractFrom(metrics.GetStore(ctx))
		return out
	}
}

// fakeCreator answers CreateTask from a script, then succeeds; it records each call's time
// and deadline.
type fakeCreator struct {
	mu        sync.Mutex
	script    []error
	calls     []time.Time
	deadlines []time.Time
	created   map[string]bool
}

func (c *fakeCreator) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, time.Now())
	dl, _ := ctx.Deadline()
	c.deadlines = append(c.deadlines, dl)
	if len(c.script) > 0 {
		err := c.script[0]
		c.script = c.script[1:]
		if err != nil {
			return nil, err
		}
	}
	if c.created == nil {
		c.created = map[string]bool{}
	}
	if c.created[req.GetTask().GetName()] {
		return nil, status.Error(codes.AlreadyExists, "exists")
	}
	c.created[req.GetTask().GetName()] = true
	return req.GetTask(), nil
}

func (c *fakeCreator) callCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// stageAll stages elems with a fresh stage DoFn.
func stageAll(t *testing.T, spec *sinkSpec, elems ...any) []envelope {
	t.Helper()
	f := &stageFn{Spec: spec}
	f.Setup()
	var out []envelope
	for _, e := range elems {
		env, err := f.stage(e)
		require.NoError(t, err)
		require.NotNil(t, env)
		out = append(out, *env)
	}
	return out
}

// createAll runs one create bundle over envs and returns its error.
func createAll(ctx context.Context, f *stagedCreateFn, envs []envelope) error {
	if err := f.StartBundle(ctx, nil); err != nil {
		return err
	}
	for _, env := range envs {
		if err := f.ProcessElement(ctx, env, nil); err != nil {
			return err
		}
	}
	return f.FinishBundle(ctx, nil)
}

func TestStagedDeadlineIsOriginPlusTheCreationWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		for _, c := range []struct {
			staged StagedOptions
			window time.Duration
		}{
			{DefaultStagedOptions(), 54*time.Minute + 40*time.Second},
			{StagedOptions{NameRetention: 10 * time.Minute, RequestTimeout: time.Second}, 9*time.Minute + 59*time.Second},
			{StagedOptions{NameRetention: 2*time.Second + 1500*time.Microsecond, ClockSkewAllowance: time.Second, RequestTimeout: time.Second}, time.Millisecond},
		} {
			envs := stageAll(t, eoSpec(t, "q", eoOrder{}, c.staged), eoOrder{ID: "1", Key: "k1"})
			assert.Equal(t, start.UnixNano(), envs[0].Origin)
			assert.Equal(t, start.Add(c.window).UnixNano(), envs[0].Deadline, "%+v", c.staged)
		}
	})
}

func TestStagedOptionsAreValidatedAgainOnTheWorker(t *testing.T) {
	spec := eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())
	// What arrives on a worker is decoded JSON, not what TryWrite checked.
	spec.Staged.ClockSkewAllowance, spec.Staged.RequestTimeout = math.MaxInt64, math.MaxInt64
	for name, fn := range map[string]any{"stage": &stageFn{Spec: spec}, "create": &stagedCreateFn{Spec: spec}} {
		setup, ok := fn.(interface{ Setup() error })
		require.True(t, ok, "the %s DoFn's Setup must be able to refuse its options", name)
		err := setup.Setup()
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "StagedOptions.ClockSkewAllowance", name)
	}
}

func TestStageNamesEveryTask(t *testing.T) {
	spec := eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())
	envs := stageAll(t, spec, eoOrder{ID: "1", Key: "order-1"})
	task := new(cloudtaskspb.Task)
	require.NoError(t, proto.Unmarshal(envs[0].Task, task))
	assert.Equal(t, "projects/p/locations/l/queues/q/tasks/"+TaskID("order-1"), task.GetName())
	assert.Equal(t, `{"id":"1"}`, string(task.GetHttpRequest().GetBody()))

	plain := eoSpec(t, "q", eoPlainOrder{}, DefaultStagedOptions())
	envs = stageAll(t, plain, eoPlainOrder{ID: "1"}, eoPlainOrder{ID: "1"})
	names := map[string]bool{}
	for _, env := range envs {
		require.NoError(t, proto.Unmarshal(env.Task, task))
		id := strings.TrimPrefix(task.GetName(), "projects/p/locations/l/queues/q/tasks/")
		assert.Regexp(t, `^[0-9a-f]{32}$`, id, "a random 128-bit id")
		names[id] = true
	}
	assert.Len(t, names, 2, "two accepted copies of one element stay two tasks without a key")
}

func TestStageRejectsATaskOverTheSizeLimit(t *testing.T) {
	spec := eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())
	f := &stageFn{Spec: spec}
	f.Setup()
	_, err := f.stage(eoOrder{ID: "1", Key: "k", Note: strings.Repeat("n", 100_000)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the limit is 100000")
	assert.NotContains(t, err.Error(), "nnnn", "no payload in errors")
}

// expiredEnvelope stages one element whose deadline has already passed.
func expiredEnvelope(t *testing.T, spec *sinkSpec, key string) []envelope {
	envs := stageAll(t, spec, eoOrder{ID: key, Key: key})
	envs[0].Deadline = time.Now().Add(-time.Millisecond).UnixNano()
	return envs
}

func TestExpiredEnvelopePolicies(t *testing.T) {
	for _, c := range []struct {
		policy    ExpiredEnvelopePolicy
		counter   string
		sends     int
		created   int64
		wantError bool
	}{
		{ExpiredFail, MetricExpiredEnvelopesFailed, 0, 0, true},
		{ExpiredAssumeCreated, MetricExpiredEnvelopesAssumedCreated, 0, 0, false},
		{ExpiredCreateAnyway, MetricExpiredEnvelopesCreatedAnyway, 1, 1, false},
		{ExpiredDrop, MetricExpiredEnvelopesDropped, 0, 0, false},
	} {
		t.Run(c.counter, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				staged := DefaultStagedOptions()
				staged.VerifyQueueRetention = false
				staged.ExpiredEnvelopePolicy = c.policy
				spec := eoSpec(t, "q", eoOrder{}, staged)
				creator := &fakeCreator{}
				ctx, counters := metricsContext()
				f := newStagedCreateFnWith(spec, creator)
				f.Setup()
				err := createAll(ctx, f, expiredEnvelope(t, spec, "k"))
				if c.wantError {
					require.Error(t, err)
					assert.Contains(t, err.Error(), "creation deadline")
					assert.Contains(t, err.Error(), "projects/p/locations/l/queues/q")
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, c.sends, creator.callCount())
				got := counters()
				assert.Equal(t, int64(1), got[c.counter])
				assert.Equal(t, c.created, got[MetricRecordsSend])
			})
		})
	}
}

// An envelope staged in the create worker's future by more than ClockSkewAllowance comes from
// a clock the window does not allow for: its deadline lies later than it should by an unknown
// amount, so it goes to the expired-envelope policy instead of being sent. Within the
// allowance it is sent as usual.
func TestAnEnvelopeStagedTooFarInTheFutureIsTreatedAsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.ExpiredEnvelopePolicy = ExpiredAssumeCreated
		spec := eoSpec(t, "q", eoOrder{}, staged)
		ahead := func(key string, by time.Duration) []envelope {
			envs := stageAll(t, spec, eoOrder{ID: key, Key: key})
			envs[0].Origin += int64(by)
			envs[0].Deadline += int64(by)
			return envs
		}
		creator := &fakeCreator{}
		ctx, counters := metricsContext()
		f := newStagedCreateFnWith(spec, creator)
		f.Setup()
		require.NoError(t, createAll(ctx, f, ahead("far", 2*time.Hour)))
		assert.Zero(t, creator.callCount(), "not sent")
		assert.Equal(t, int64(1), counters()[MetricExpiredEnvelopesAssumedCreated])

		require.NoError(t, createAll(ctx, f, ahead("near", staged.ClockSkewAllowance-time.Second)))
		assert.Equal(t, 1, creator.callCount(), "within the allowance it is sent")
		assert.Equal(t, int64(1), counters()[MetricRecordsSend])

		// An allowance of 0 still tolerates the sub-second differences of ordinary clocks.
		zero := staged
		zero.ClockSkewAllowance = 0
		spec = eoSpec(t, "q", eoOrder{}, zero)
		f = newStagedCreateFnWith(spec, creator)
		f.Setup()
		require.NoError(t, createAll(ctx, f, ahead("skewed", 300*time.Millisecond)))
		assert.Equal(t, 2, creator.callCount(), "300ms ahead with an allowance of 0 is sent")
		require.NoError(t, createAll(ctx, f, ahead("far-zero", 2*time.Second)))
		assert.Equal(t, 2, creator.callCount(), "2s ahead with an allowance of 0 is not")
		assert.Equal(t, int64(2), counters()[MetricExpiredEnvelopesAssumedCreated])
	})
}

// A worker whose clock runs ahead staged every envelope of a bundle in the create worker's
// future: the bundle logs the first few and one summary, as LogAndDrop does, not a line per
// envelope, and the counters count every one.
func TestEnvelopesStagedInTheFutureLogAFewLinesPerBundleAndASummary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.ExpiredEnvelopePolicy = ExpiredAssumeCreated
		spec := eoSpec(t, "q", eoOrder{}, staged)
		const skewed = 500
		elems := make([]any, skewed)
		for i := range elems {
			elems[i] = eoOrder{ID: fmt.Sprint(i), Key: fmt.Sprint("k", i)}
		}
		envs := stageAll(t, spec, elems...)
		for i := range envs {
			envs[i].Origin += int64(2 * time.Hour)
			envs[i].Deadline += int64(2 * time.Hour)
		}
		logs := captureLogs(t)
		ctx, counters := metricsContext()
		f := newStagedCreateFnWith(spec, &fakeCreator{})
		require.NoError(t, f.Setup())
		for bundle := 1; bundle <= 2; bundle++ {
			logs.Reset()
			require.NoError(t, createAll(ctx, f, envs))
			lines := logLines(logs, "cloudtasksio: exactly-once:")
			require.Len(t, lines, maxLinesPerBundle+1, "bundle %d: the first few envelopes, then one summary line", bundle)
			for _, line := range lines[:maxLinesPerBundle] {
				assert.Contains(t, line, "in this worker's future")
			}
			summary := lines[maxLinesPerBundle]
			assert.Contains(t, summary, "level=WARN")
			assert.Contains(t, summary, fmt.Sprintf("%d more staged tasks", skewed-maxLinesPerBundle))
			assert.Contains(t, summary, fmt.Sprintf("%d in this bundle", skewed))
			assert.Contains(t, summary, "Staged.ClockSkewAllowance")
		}
		assert.Equal(t, int64(2*skewed), counters()[MetricExpiredEnvelopesAssumedCreated], "every envelope counted")
	})
}

func TestADeadlinePassingDuringRetriesIsCheckedBeforeTheResend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		spec := eoSpec(t, "q", eoOrder{}, staged)
		envs := stageAll(t, spec, eoOrder{ID: "1", Key: "k"})
		// The deadline falls inside the first backoff (100ms +-25%).
		envs[0].Deadline = time.Now().Add(50 * time.Millisecond).UnixNano()
		creator := &fakeCreator{script: []error{status.Error(codes.Unavailable, "down")}}
		ctx, counters := metricsContext()
		f := newStagedCreateFnWith(spec, creator)
		f.Setup()
		err := createAll(ctx, f, envs)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "creation deadline")
		assert.Equal(t, 1, creator.callCount(), "the retry was not sent after the deadline")
		assert.Equal(t, int64(1), counters()[MetricExpiredEnvelopesFailed])
		assert.Equal(t, int64(1), counters()[MetricErrorClass("UNAVAILABLE")])
	})
}

func TestCreateAnywayCountsAnEnvelopeOnceAcrossRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.ExpiredEnvelopePolicy = ExpiredCreateAnyway
		spec := eoSpec(t, "q", eoOrder{}, staged)
		creator := &fakeCreator{script: []error{status.Error(codes.Unavailable, "down"), status.Error(codes.Unavailable, "down")}}
		ctx, counters := metricsContext()
		f := newStagedCreateFnWith(spec, creator)
		f.Setup()
		require.NoError(t, createAll(ctx, f, expiredEnvelope(t, spec, "k")))
		assert.Equal(t, 3, creator.callCount())
		assert.Equal(t, int64(1), counters()[MetricExpiredEnvelopesCreatedAnyway])
		assert.Equal(t, int64(1), counters()[MetricRecordsSend])
	})
}

func TestEachCreateIsBoundedByTheRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.RequestTimeout = 7 * time.Second
		spec := eoSpec(t, "q", eoOrder{}, staged)
		creator := &fakeCreator{}
		f := newStagedCreateFnWith(spec, creator)
		f.Setup()
		start := time.Now()
		require.NoError(t, createAll(context.Background(), f, stageAll(t, spec, eoOrder{ID: "1", Key: "k"})))
		require.Len(t, creator.deadlines, 1)
		assert.Equal(t, start.Add(7*time.Second), creator.deadlines[0])
	})
}

// distributions reads the Beam distributions recorded in ctx as name -> {count, sum, min, max}.
func distributions(ctx context.Context) map[string][4]int64 {
	out := map[string][4]int64{}
	_ = metrics.Extractor{DistributionInt64: func(l metrics.Labels, count, sum, min, max int64) {
		out[l.Name()] = [4]int64{count, sum, min, max}
	}}.ExtractFrom(metrics.GetStore(ctx))
	return out
}

func TestStagedAgeAndRemainingBudgetAreMeasuredWhenTheCreateStepTakesAnEnvelope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		spec := eoSpec(t, "q", eoOrder{}, staged)
		envs := stageAll(t, spec, eoOrder{ID: "1", Key: "k1"}, eoOrder{ID: "2", Key: "k2"})
		time.Sleep(10 * time.Minute) // the envelopes wait in the shuffle

		ctx, _ := metricsContext()
		f := newStagedCreateFnWith(spec, &fakeCreator{})
		f.Setup()
		require.NoError(t, createAll(ctx, f, envs))
		got := distributions(ctx)
		const age = int64(10 * time.Minute / time.Millisecond)
		const remaining = int64((54*time.Minute + 40*time.Second - 10*time.Minute) / time.Millisecond)
		assert.Equal(t, [4]int64{2, 2 * age, age, age}, got[MetricStagedTaskAgeMillis])
		assert.Equal(t, [4]int64{2, 2 * remaining, remaining, remaining}, got[MetricStagedTaskRemainingMillis])
	})
}

// newStagedServer starts a storing-only server with queue q, remembering names for 2h.
func newStagedServer(t *testing.T, q string) *cloudtaskstest.Server {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	_, err := srv.CreateQueue("projects/p/locations/l/queues/" + q)
	require.NoError(t, err)
	srv.SetTombstoneTTL("projects/p/locations/l/queues/"+q, 2*time.Hour)
	return srv
}

func stagedSpecFor(t *testing.T, srv *cloudtaskstest.Server, q string, elem any) *sinkSpec {
	spec := eoSpec(t, q, elem, DefaultStagedOptions())
	spec.EmulatorEndpoint = srv.Addr
	spec.resolve()
	spec.Writer.RecoveryInitialBackoff, spec.Writer.RecoveryMaxBackoff = time.Millisecond, 5*time.Millisecond
	return spec
}

func plainOrders(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = eoPlainOrder{ID: fmt.Sprint(i)}
	}
	return out
}

func TestReplayingStagedEnvelopesCreatesEachTaskOnce(t *testing.T) {
	srv := newStagedServer(t, "replay")
	spec := stagedSpecFor(t, srv, "replay", eoPlainOrder{})
	envs := stageAll(t, spec, plainOrders(100)...)
	ctx, counters := metricsContext()

	// A first attempt that got through half the bundle, with lost responses on the way.
	srv.LoseResponses(5)
	first := &stagedCreateFn{Spec: spec}
	first.Setup()
	require.NoError(t, createAll(ctx, first, envs[:50]))
	require.Len(t, srv.Tasks("projects/p/locations/l/queues/replay"), 50)

	// The runner retries the whole bundle from the checkpointed envelopes, twice.
	for i := 0; i < 2; i++ {
		retry := &stagedCreateFn{Spec: spec}
		retry.Setup()
		require.NoError(t, createAll(ctx, retry, envs))
	}
	assert.Len(t, srv.Tasks("projects/p/locations/l/queues/replay"), 100)
	got := counters()
	assert.Equal(t, int64(250), got[MetricRecordsSend], "every envelope of every attempt counts as sent")
	assert.Equal(t, int64(5+50+100), got[MetricTasksDeduplicated], "lost responses, then the replays")
}

func TestStagedCreateAFailureFailsTheBundleWithoutPayload(t *testing.T) {
	srv := newStagedServer(t, "rejects")
	srv.SetRejectFunc(func(*cloudtaskspb.CreateTaskRequest) error { return errors.New("bad task") })
	spec := stagedSpecFor(t, srv, "rejects", eoOrder{})
	f := &stagedCreateFn{Spec: spec}
	f.Setup()
	err := createAll(context.Background(), f, stageAll(t, spec, eoOrder{ID: "1", Key: "k", Note: "secret-note"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "INVALID_ARGUMENT")
	assert.Contains(t, err.Error(), "projects/p/locations/l/queues/rejects")
	assert.Contains(t, err.Error(), "after 1 attempt(s)")
	assert.NotContains(t, err.Error(), "secret-note")
}

func TestStagedCreateVerifiesRetentionAgainstTheServer(t *testing.T) {
	srv := newStagedServer(t, "short")
	srv.SetTombstoneTTL("projects/p/locations/l/queues/short", 10*time.Minute)
	spec := stagedSpecFor(t, srv, "short", eoOrder{})
	f := &stagedCreateFn{Spec: spec}
	f.Setup()
	err := createAll(context.Background(), f, stageAll(t, spec, eoOrder{ID: "1", Key: "k"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "10m0s")
	assert.Empty(t, srv.Tasks("projects/p/locations/l/queues/short"), "nothing is created before the check passes")
}

func typeOf(v any) reflect.Type { return reflect.TypeOf(v) }

func TestStagedCreateFailsWithTheFirstFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		spec := eoSpec(t, "q", eoOrder{}, staged)
		envs := stageAll(t, spec, eoOrder{ID: "1", Key: "rejected"}, eoOrder{ID: "2", Key: "denied"})
		rejected := "projects/p/locations/l/queues/q/tasks/" + TaskID("rejected")
		// The rejection arrives first, the terminal PERMISSION_DENIED after it.
		creator := engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
			if req.GetTask().GetName() == rejected {
				time.Sleep(10 * time.Millisecond)
				return nil, status.Error(codes.InvalidArgument, "bad task")
			}
			time.Sleep(20 * time.Millisecond)
			return nil, status.Error(codes.PermissionDenied, "no permission")
		})
		f := newStagedCreateFnWith(spec, creator)
		f.Setup()
		err := createAll(context.Background(), f, envs)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "INVALID_ARGUMENT")
		assert.NotContains(t, err.Error(), "PERMISSION_DENIED")
	})
}

func TestMalformedEnvelopesFailTheBundleWhateverThePolicy(t *testing.T) {
	for _, policy := range []ExpiredEnvelopePolicy{ExpiredFail, ExpiredAssumeCreated, ExpiredCreateAnyway, ExpiredDrop} {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.ExpiredEnvelopePolicy = policy
		spec := eoSpec(t, "q", eoOrder{}, staged)
		other := eoSpec(t, "other", eoOrder{}, staged)
		for name, c := range map[string]struct {
			env  func() envelope
			want string
		}{
			"staged for another queue": {func() envelope { return stageAll(t, other, eoOrder{ID: "1", Key: "k"})[0] }, "projects/p/locations/l/queues/other"},
			"no deadline": {func() envelope {
				env := stageAll(t, spec, eoOrder{ID: "1", Key: "k"})[0]
				env.Deadline = 0
				return env
			}, "deadline"},
			"a task named for another queue": {func() envelope {
				env := stageAll(t, other, eoOrder{ID: "1", Key: "k"})[0]
				env.Queue = spec.Queue.Path()
				return env
			}, "task name"},
		} {
			t.Run(fmt.Sprint(policy, "/", name), func(t *testing.T) {
				creator := &fakeCreator{}
				ctx, counters := metricsContext()
				f := newStagedCreateFnWith(spec, creator)
				require.NoError(t, f.Setup())
				err := createAll(ctx, f, []envelope{c.env()})
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
				assert.Zero(t, creator.callCount(), "nothing is sent")
				got := counters()
				for _, expired := range []string{MetricExpiredEnvelopesFailed, MetricExpiredEnvelopesAssumedCreated, MetricExpiredEnvelopesCreatedAnyway, MetricExpiredEnvelopesDropped} {
					assert.Zero(t, got[expired], "a malformed envelope is not an expired one")
				}
			})
		}
	}
}

// An envelope whose queue string is corrupted (or not this sink's at all) may carry anything
// there, a megabyte of it: the error says enough to recognise it, and no more.
func TestACorruptedEnvelopesQueueIsCutInTheError(t *testing.T) {
	staged := DefaultStagedOptions()
	staged.VerifyQueueRetention = false
	spec := eoSpec(t, "q", eoOrder{}, staged)
	env := stageAll(t, spec, eoOrder{ID: "1", Key: "k"})[0]
	env.Queue = "projects/p/locations/l/queues/q\n" + strings.Repeat("x", 1<<20)
	creator := &fakeCreator{}
	ctx, _ := metricsContext()
	f := newStagedCreateFnWith(spec, creator)
	require.NoError(t, f.Setup())
	err := createAll(ctx, f, []envelope{env})
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 1024, "bounded")
	assert.Contains(t, err.Error(), `"projects/p/locations/l/queues/q\nxxx`, "quoted, its start kept")
	assert.Contains(t, err.Error(), boundedtext.Marker, "and marked as cut")
	assert.Contains(t, err.Error(), "this sink writes to projects/p/locations/l/queues/q;")
	assert.Zero(t, creator.callCount())
}

func TestExactlyOnceFailuresAreCountedOncePerEnvelope(t *testing.T) {
	const queue = "projects/p/locations/l/queues/q"
	for name, c := range map[string]struct {
		script []error
		envs   func(spec *sinkSpec) []envelope
	}{
		"rejected":          {script: []error{status.Error(codes.InvalidArgument, "bad task")}},
		"permission denied": {script: []error{status.Error(codes.PermissionDenied, "no permission")}},
		"budget exhausted":  {script: repeatErr(status.Error(codes.Unavailable, "down"), 8)},
		"expired":           {envs: func(spec *sinkSpec) []envelope { return expiredEnvelope(t, spec, "k") }},
		"undecodable": {envs: func(spec *sinkSpec) []envelope {
			env := stageAll(t, spec, eoOrder{ID: "1", Key: "k"})[0]
			env.Task = []byte{0xff, 0xff}
			return []envelope{env}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				staged := DefaultStagedOptions()
				staged.VerifyQueueRetention = false
				spec := eoSpec(t, "q", eoOrder{}, staged)
				spec.Writer.PerDestinationMetrics = true
				envs := stageAll(t, spec, eoOrder{ID: "1", Key: "k"})
				if c.envs != nil {
					envs = c.envs(spec)
				}
				ctx, counters := metricsContext()
				f := newStagedCreateFnWith(spec, &fakeCreator{script: c.script})
				require.NoError(t, f.Setup())
				require.Error(t, createAll(ctx, f, envs))
				got := counters()
				assert.Equal(t, int64(1), got[MetricRecordsSendErrors])
				assert.Equal(t, int64(1), got[MetricDestinationSendErrors(queue)])
				assert.Zero(t, got[MetricRecordsSend])
			})
		})
	}
}

func repeatErr(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

func init() { register.Function1x2(serializeOrSkip) }

// serializeOrSkip builds an HTTP task for an order, and skips the order with id "skip".
func serializeOrSkip(o eoPlainOrder) (*cloudtaskspb.Task, error) {
	if o.ID == "skip" {
		return nil, nil
	}
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://example.com/orders/" + o.ID}}}, nil
}

func TestExactlyOnceCountsTheElementsTheSerializerSkips(t *testing.T) {
	cfg := Config{Queue: Queue{Project: "p", Location: "l", Name: "q"}, Delivery: ExactlyOnce, Serializer: serializeOrSkip, EmulatorEndpoint: "127.0.0.1:1"}
	spec, err := compile(cfg, typeOf(eoPlainOrder{}))
	require.NoError(t, err)
	f := &stageFn{Spec: spec}
	require.NoError(t, f.Setup())
	ctx, counters := metricsContext()
	var staged []envelope
	for _, id := range []string{"1", "skip", "2", "skip", "skip"} {
		require.NoError(t, f.ProcessElement(ctx, eoPlainOrder{ID: id}, func(env envelope) { staged = append(staged, env) }))
	}
	assert.Len(t, staged, 2, "a skipped element stages nothing")
	assert.Equal(t, int64(3), counters()[MetricRecordsSkipped])
}

func TestWriterOptionsAreValidatedAgainOnTheWorker(t *testing.T) {
	spec := eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())
	spec.Writer.MaxInFlightTasks = -1 // the engine would panic on it
	err := (&writeFn{Spec: spec}).Setup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WriterOptions.MaxInFlightTasks")
	err = (&stagedCreateFn{Spec: spec}).Setup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WriterOptions.MaxInFlightTasks")
}
