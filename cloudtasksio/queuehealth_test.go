package cloudtasksio

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

const (
	healthQueueA = "projects/p/locations/l/queues/health-a"
	healthQueueB = "projects/p/locations/l/queues/health-b"
)

// queueScript is what a scriptedHealthReader answers for one queue.
type queueScript struct {
	state     cloudtaskspb.Queue_State
	err       error         // of every read
	betaErr   error         // of the v2beta3 read only
	tasks     int64         // stats: tasks_count
	oldestAge time.Duration // stats: the oldest task arrived this long before the read
	target    *cloudtaskspb.HttpTarget
}

// scriptedHealthReader answers queue health reads from a script per queue (RUNNING without
// one) and counts them.
type scriptedHealthReader struct {
	mu      sync.Mutex
	delay   time.Duration // how long each read takes
	scripts map[string]queueScript
	reads   map[string]int // per queue, both API versions counted as one read
}

func newScriptedHealthReader(delay time.Duration) *scriptedHealthReader {
	return &scriptedHealthReader{delay: delay, scripts: map[string]queueScript{}, reads: map[string]int{}}
}

func (r *scriptedHealthReader) set(queue string, s queueScript) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts[queue] = s
}

func (r *scriptedHealthReader) count(queue string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads[queue]
}

func (r *scriptedHealthReader) readHealth(_ context.Context, queue string, beta bool) (*cloudtaskspb.Queue, *betapb.QueueStats, error) {
	time.Sleep(r.delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.scripts[queue]
	if beta && s.betaErr != nil {
		return nil, nil, s.betaErr
	}
	r.reads[queue]++
	if s.err != nil {
		return nil, nil, s.err
	}
	state := s.state
	if state == cloudtaskspb.Queue_STATE_UNSPECIFIED {
		state = cloudtaskspb.Queue_RUNNING
	}
	q := &cloudtaskspb.Queue{Name: queue, State: state, HttpTarget: s.target}
	if !beta {
		return q, nil, nil
	}
	stats := &betapb.QueueStats{TasksCount: s.tasks}
	if s.tasks > 0 {
		stats.OldestEstimatedArrivalTime = timestamppb.New(time.Now().Add(-s.oldestAge))
	}
	return q, stats, nil
}

// healthInstance is one DoFn instance's preflight and queue health, driven as createBase
// drives them; the instances of a test share the caches of one worker process.
type healthInstance struct {
	preflight *queuePreflighter
	health    *queueHealthWatch
}

// healthProcess is one worker process: its reader and its caches.
type healthProcess struct {
	reader     *scriptedHealthReader
	healths    *gcpconn.Cache[healthKey, *queueHealth]
	preflights *gcpconn.Cache[preflightKey, *preflightResult]
}

func newHealthProcess(delay time.Duration) *healthProcess {
	return &healthProcess{reader: newScriptedHealthReader(delay),
		healths:    &gcpconn.Cache[healthKey, *queueHealth]{IdleTTL: queueStateIdleTTL, MaxEntries: maxQueueStates},
		preflights: &gcpconn.Cache[preflightKey, *preflightResult]{}}
}

func (p *healthProcess) instance(w WriterOptions) *healthInstance {
	in := &healthInstance{preflight: newQueuePreflighter(w.QueuePreflight, clientSpec{}), health: newQueueHealthWatch(w, clientSpec{})}
	p.wire(in.preflight, in.health)
	return in
}

// wire makes preflight and health read through the process's reader and caches.
func (p *healthProcess) wire(preflight *queuePreflighter, health *queueHealthWatch) {
	health.reader, health.cache = p.reader, p.healths
	preflight.reader, preflight.cache = health.preflightReader(), p.preflights
}

// bundle writes one task to each queue, as createBase.submit and finish do, and returns the
// bundle's failure.
func (in *healthInstance) bundle(ctx context.Context, queues ...string) error {
	in.preflight.startBundle()
	in.health.startBundle()
	for _, q := range queues {
		req := httpCreate("https://example.com/orders")
		req.Parent = q
		err := in.preflight.check(ctx, req)
		if err == nil {
			err = in.health.check(ctx, req)
		}
		if err != nil {
			in.health.endBundle(ctx)
			return err
		}
	}
	in.preflight.finishBundle(ctx)
	in.health.endBundle(ctx)
	return nil
}

// every runs bundles of each instance to queues every step from now until end, waiting for
// the reads they start to end after each round, and returns the times at which a bundle
// failed, counted from the start of the run.
func every(t *testing.T, ctx context.Context, step, end time.Duration, instances []*healthInstance, at func(time.Duration), queues ...string) []time.Duration {
	t.Helper()
	var failed []time.Duration
	start := time.Now()
	for d := time.Duration(0); d < end; d += step {
		time.Sleep(time.Until(start.Add(d)))
		if at != nil {
			at(d)
		}
		for _, in := range instances {
			if err := in.bundle(ctx, queues...); err != nil {
				failed = append(failed, d)
			}
		}
		synctest.Wait()
	}
	return failed
}

func TestQueueHealthReadsEachQueueOncePerIntervalForEveryInstanceOfTheProcess(t *testing.T) {
	for _, mode := range []QueuePreflight{PreflightWarn, PreflightFail, PreflightOff} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newHealthProcess(0)
				w := WriterOptions{QueuePreflight: mode, QueueHealthInterval: time.Minute}
				instances := []*healthInstance{p.instance(w), p.instance(w), p.instance(w), p.instance(w)}
				ctx, counters := metricsContext()
				// Four instances write to both queues every 5 seconds for 10 minutes.
				every(t, ctx, 5*time.Second, 10*time.Minute, instances, nil, healthQueueA, healthQueueB)
				// Reads at 0 (the preflight's, or the first health read), 1m, ..., 9m.
				assert.Equal(t, 10, p.reader.count(healthQueueA))
				assert.Equal(t, 10, p.reader.count(healthQueueB))
				assert.Equal(t, int64(20), counters()[MetricQueueHealthReads], "each read counted once in the process")
				assert.Zero(t, counters()[MetricQueueHealthReadErrors])
			})
		})
	}
}

func TestQueueHealthOffReadsNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		assert.Nil(t, newQueueHealthWatch(WriterOptions{}, clientSpec{}))
		var off *queueHealthWatch // what setup keeps with QueueHealthInterval 0: every call a no-op
		assert.Nil(t, off.preflightReader())
		off.startBundle()
		require.NoError(t, off.check(t.Context(), httpCreate("https://example.com/")))
		off.endBundle(t.Context())

		r := &scriptedQueueReader{}
		var cache gcpconn.Cache[preflightKey, *preflightResult]
		pre := scriptedPreflighter(PreflightWarn, r, &cache)
		for range 10 {
			pre.startBundle()
			require.NoError(t, pre.check(t.Context(), httpCreate("https://example.com/")))
			time.Sleep(time.Minute)
		}
		assert.Equal(t, 1, r.count(), "without queue health, the preflight's read is the only one")
	})
}

func TestAQueuePausedMidJobIsReportedOnceByTheNextReadUnderPreflightWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHealthProcess(time.Second)
		w := WriterOptions{QueuePreflight: PreflightWarn, QueueHealthInterval: time.Minute}
		instances := []*healthInstance{p.instance(w), p.instance(w)}
		logs := captureSyncLogs(t)
		ctx, counters := metricsContext()
		// Reads start at 0, 60s, 120s, ... and take a second each.
		failed := every(t, ctx, 10*time.Second, 5*time.Minute, instances, func(d time.Duration) {
			switch d {
			case 90 * time.Second:
				p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_PAUSED})
			case 150 * time.Second:
				p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_RUNNING})
			case 210 * time.Second:
				p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_PAUSED})
			}
		}, healthQueueA)
		assert.Empty(t, failed, "under PreflightWarn the tasks are created anyway")
		warned := logs.lines("level=WARN msg=\"cloudtasksio: queue health: queue")
		require.Len(t, warned, 2, "once when the 120s read found it paused, once when the 240s read did again")
		assert.Contains(t, warned[0], "queue health: queue "+healthQueueA+" is PAUSED")
		assert.Contains(t, warned[0], "WriterOptions.QueueHealthInterval")
		fixed := logs.lines("no longer finds")
		require.Len(t, fixed, 1, "the 180s read found it running again")
		assert.Contains(t, fixed[0], "level=INFO")
		assert.Equal(t, int64(2), counters()[MetricQueuePreflightPaused], "one per change the process saw, not per instance")
		assert.Empty(t, logs.lines("secret"), "no payload or token of a task in the log")
	})
}

func TestAQueuePausedMidJobFailsTheBundlesUnderPreflightFailUntilARereadFindsItFixed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHealthProcess(time.Second)
		w := WriterOptions{QueuePreflight: PreflightFail, QueueHealthInterval: time.Minute}
		in := p.instance(w)
		ctx, counters := metricsContext()
		failed := every(t, ctx, 10*time.Second, 5*time.Minute, []*healthInstance{in}, func(d time.Duration) {
			switch d {
			case 90 * time.Second:
				p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_PAUSED})
			case 150 * time.Second:
				p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_RUNNING})
			}
		}, healthQueueA)
		// The read that starts at 120s ends at 121s; the one that finds it running again
		// starts at 180s, so the bundle of 180s still fails.
		var want []time.Duration
		for d := 130 * time.Second; d <= 180*time.Second; d += 10 * time.Second {
			want = append(want, d)
		}
		assert.Equal(t, want, failed)
		assert.Equal(t, int64(len(want)), counters()[MetricQueuePreflightPaused], "counted per failed bundle, as the preflight does")

		p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_DISABLED})
		time.Sleep(time.Minute)
		require.NoError(t, in.bundle(ctx, healthQueueA), "starts the read")
		time.Sleep(time.Second)
		synctest.Wait()
		err := in.bundle(ctx, healthQueueA)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "queue "+healthQueueA+" is DISABLED")
		assert.Contains(t, err.Error(), "sink.queue-health.interval")
		assert.Contains(t, err.Error(), "PreflightFail")
		assert.NotContains(t, err.Error(), "secret")
	})
}

// A DoFn's setup wires the queue health into its bundles: a writeFn whose queue is paused
// mid-job fails its bundles under PreflightFail once a re-read has found it.
func TestAWriteFnUnderPreflightFailFailsItsBundlesOnceARereadFindsItsQueuePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spec, err := compile(Config{Queue: Queue{Project: "p", Location: "l", Name: "health-a"},
			HTTP:             &HTTPTarget{URL: "https://example.com/orders"},
			Writer:           WriterOptions{QueuePreflight: PreflightFail, QueueHealthInterval: time.Minute},
			EmulatorEndpoint: ownSetting("health-writefn") + ".invalid:1"}, typeOf(urlOrder{}))
		require.NoError(t, err)
		f := &writeFn{Spec: spec}
		require.NoError(t, f.Setup())
		require.NotNil(t, f.health, "QueueHealthInterval set: the DoFn has a queue health")
		p := newHealthProcess(time.Second)
		p.wire(f.preflight, f.health)
		created := 0
		creator := engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
			created++
			return req.GetTask(), nil
		})
		ctx, _ := metricsContext()
		bundle := func(id string) error {
			f.start(creator, engineOptions(f.Spec.Writer), f)
			f.emit = discardDeadLetters
			if err := f.ProcessElement(ctx, 0, urlOrder{ID: id}, discardDeadLetters); err != nil {
				return err
			}
			return f.FinishBundle(ctx, discardDeadLetters)
		}

		require.NoError(t, bundle("first"))
		p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_PAUSED})
		time.Sleep(time.Minute)
		require.NoError(t, bundle("starts the read"))
		time.Sleep(time.Second)
		synctest.Wait()
		err = bundle("after the read")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is PAUSED")
		assert.Equal(t, 2, created, "no task of the failed bundle was created")
		assert.Equal(t, 2, p.reader.count(healthQueueA))
	})
}

func TestQueueHealthGaugesComeFromTheQueueStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHealthProcess(time.Second)
		p.reader.set(healthQueueA, queueScript{tasks: 42, oldestAge: 90 * time.Second})
		p.reader.set(healthQueueB, queueScript{state: cloudtaskspb.Queue_PAUSED, tasks: 7, oldestAge: 5 * time.Minute})
		in := p.instance(WriterOptions{QueuePreflight: PreflightWarn, QueueHealthInterval: time.Minute, PerDestinationMetrics: true})
		ctx, _ := metricsContext()
		require.NoError(t, in.bundle(ctx, healthQueueA, healthQueueB))
		assert.NotContains(t, gaugeReader(ctx), MetricQueueState, "set once a read has ended")
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, in.bundle(ctx, healthQueueA, healthQueueB))
		g := gaugeReader(ctx)
		assert.Equal(t, int64(cloudtaskspb.Queue_PAUSED), g[MetricQueueState], "the worst state among the bundle's queues")
		assert.Equal(t, int64(42), g[MetricQueueTasks], "the largest backlog")
		assert.Equal(t, int64(300), g[MetricQueueOldestTaskAgeSeconds], "the oldest task's lateness, in seconds")
		assert.Equal(t, int64(cloudtaskspb.Queue_RUNNING), g[MetricDestinationQueueState(healthQueueA)])
		assert.Equal(t, int64(42), g[MetricDestinationQueueTasks(healthQueueA)])
		assert.Equal(t, int64(90), g[MetricDestinationQueueOldestTaskAgeSeconds(healthQueueA)])
		assert.Equal(t, int64(cloudtaskspb.Queue_PAUSED), g[MetricDestinationQueueState(healthQueueB)])
		assert.Equal(t, int64(7), g[MetricDestinationQueueTasks(healthQueueB)])
		assert.Equal(t, int64(300), g[MetricDestinationQueueOldestTaskAgeSeconds(healthQueueB)])

		// The backlog drains: the next read's figures replace the last.
		p.reader.set(healthQueueA, queueScript{})
		p.reader.set(healthQueueB, queueScript{})
		time.Sleep(time.Minute)
		require.NoError(t, in.bundle(ctx, healthQueueA, healthQueueB))
		time.Sleep(time.Second)
		synctest.Wait()
		require.NoError(t, in.bundle(ctx, healthQueueA, healthQueueB))
		g = gaugeReader(ctx)
		assert.Equal(t, int64(cloudtaskspb.Queue_RUNNING), g[MetricQueueState])
		assert.Zero(t, g[MetricQueueTasks])
		assert.Zero(t, g[MetricQueueOldestTaskAgeSeconds])
	})
}

func TestQueueHealthReadsTheV2APIWithoutStatsWhenTheServerRefusesV2Beta3(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHealthProcess(0)
		p.reader.set(healthQueueA, queueScript{state: cloudtaskspb.Queue_PAUSED, tasks: 5, betaErr: status.Error(codes.Unimplemented, "no v2beta3")})
		in := p.instance(WriterOptions{QueuePreflight: PreflightOff, QueueHealthInterval: time.Minute})
		ctx, counters := metricsContext()
		require.NoError(t, in.bundle(ctx, healthQueueA))
		synctest.Wait()
		require.NoError(t, in.bundle(ctx, healthQueueA))
		g := gaugeReader(ctx)
		assert.Equal(t, int64(cloudtaskspb.Queue_PAUSED), g[MetricQueueState])
		assert.NotContains(t, g, MetricQueueTasks, "the v2 API has no stats")
		assert.NotContains(t, g, MetricQueueOldestTaskAgeSeconds)
		assert.Equal(t, int64(1), counters()[MetricQueueHealthReads])
		assert.Zero(t, counters()[MetricQueueHealthReadErrors], "the fallback is not a failed read")
	})
}

func TestQueueHealthCountsFailedReadsAndLogsThemOnceUntilOneSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHealthProcess(0)
		in := p.instance(WriterOptions{QueuePreflight: PreflightOff, QueueHealthInterval: time.Minute})
		logs := captureSyncLogs(t)
		ctx, counters := metricsContext()
		every(t, ctx, 10*time.Second, 2*time.Minute, []*healthInstance{in}, nil, healthQueueA) // reads at 0, 60s: fine
		p.reader.set(healthQueueA, queueScript{err: status.Error(codes.Internal, "secret detail")})
		every(t, ctx, 10*time.Second, 3*time.Minute, []*healthInstance{in}, nil, healthQueueA) // reads at 0, 60s, 120s: fail
		require.NoError(t, in.bundle(ctx, healthQueueA))

		assert.Equal(t, 5, p.reader.count(healthQueueA), "a failed read is tried again one interval later")
		assert.Equal(t, int64(5), counters()[MetricQueueHealthReads])
		assert.Equal(t, int64(3), counters()[MetricQueueHealthReadErrors])
		assert.Zero(t, gaugeReader(ctx)[MetricQueueState], "0 while the latest read failed")
		lines := logs.lines("queue health: reading queue")
		require.Len(t, lines, 1, "one line for failures in a row")
		assert.Contains(t, lines[0], "failed with INTERNAL")
		assert.NotContains(t, lines[0], "secret")

		p.reader.set(healthQueueA, queueScript{err: status.Error(codes.PermissionDenied, "denied")})
		every(t, ctx, 10*time.Second, 5*time.Minute, []*healthInstance{in}, nil, healthQueueA)
		assert.Equal(t, 6, p.reader.count(healthQueueA), "PERMISSION_DENIED: not read again")
		assert.Len(t, logs.lines("not reading queue"), 1)
	})
}

func TestQueueHealthReadsStopWhenTheQueueIsNoLongerWrittenTo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newHealthProcess(0)
		in := p.instance(WriterOptions{QueuePreflight: PreflightWarn, QueueHealthInterval: time.Minute})
		ctx, _ := metricsContext()
		every(t, ctx, 10*time.Second, 3*time.Minute, []*healthInstance{in}, nil, healthQueueA, healthQueueB)
		require.Equal(t, 3, p.reader.count(healthQueueB))
		every(t, ctx, 10*time.Second, 15*time.Minute, []*healthInstance{in}, nil, healthQueueA)
		assert.Equal(t, 3, p.reader.count(healthQueueB), "nothing writes to it: nothing reads it")
		assert.Equal(t, 18, p.reader.count(healthQueueA))
		assert.Equal(t, 1, p.healths.Len(), "the idle queue's entry was dropped after queueStateIdleTTL")
	})
}

// The process's cache of queue health never holds more than maxQueueStates queues, however
// many a QueueFn writes to.
func TestQueueHealthOfTheProcessIsBoundedToMaxQueueStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newQueueHealthWatch(WriterOptions{QueuePreflight: PreflightOff, QueueHealthInterval: time.Minute},
			clientSpec{EmulatorEndpoint: ownSetting("health-bound") + ".invalid:1"})
		w.reader = newScriptedHealthReader(0)
		ctx, _ := metricsContext()
		for i := range maxQueueStates + 10 {
			w.startBundle()
			req := httpCreate("https://example.com/")
			req.Parent = fmt.Sprintf("projects/p/locations/l/queues/bound-%d", i)
			require.NoError(t, w.check(ctx, req))
			w.endBundle(ctx)
			if i%1000 == 0 {
				synctest.Wait()
			}
		}
		synctest.Wait()
		assert.LessOrEqual(t, queueHealths.Len(), maxQueueStates)
	})
}

// The read through the shared clients asks the v2beta3 API for the stats and finds the same
// state and overrides as the preflight's v2 read.
func TestTheAPIHealthReaderReadsStatsAndOverridesFromTheTestServer(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	spec := clientSpec{EmulatorEndpoint: srv.Addr}
	v2, err := sharedClient(t.Context(), spec)
	require.NoError(t, err)
	_, err = v2.CreateQueue(t.Context(), &cloudtaskspb.CreateQueueRequest{Parent: "projects/p/locations/l",
		Queue: &cloudtaskspb.Queue{Name: healthQueueA, HttpTarget: alwaysOverride(), AppEngineRoutingOverride: workerRouting}})
	require.NoError(t, err)
	before := time.Now()
	for i := range 3 {
		_, err := v2.CreateTask(t.Context(), httpCreateIn(healthQueueA, i))
		require.NoError(t, err)
	}
	require.NoError(t, srv.PauseQueue(healthQueueA))

	q, stats, err := apiHealthReader{spec: spec}.readHealth(t.Context(), healthQueueA, true)
	require.NoError(t, err)
	require.NotNil(t, stats)
	assert.Equal(t, int64(3), stats.GetTasksCount())
	assert.False(t, stats.GetOldestEstimatedArrivalTime().AsTime().Before(before.Truncate(time.Microsecond)))
	want, err := v2QueueReader{spec: spec}.readQueue(t.Context(), healthQueueA)
	require.NoError(t, err)
	for _, sets := range []taskSets{{url: true}, {routing: true}} {
		assert.Equal(t, findings(want, sets), findings(q, sets), "the findings of a v2beta3 read are the v2 read's")
		assert.Len(t, findings(q, sets), 2, "PAUSED, and the override")
	}

	q, stats, err = apiHealthReader{spec: spec}.readHealth(t.Context(), healthQueueA, false)
	require.NoError(t, err)
	assert.Nil(t, stats, "the v2 read has no stats")
	assert.Equal(t, cloudtaskspb.Queue_PAUSED, q.GetState())
}

func httpCreateIn(queue string, i int) *cloudtaskspb.CreateTaskRequest {
	req := httpCreate(fmt.Sprintf("https://example.com/orders/%d", i))
	req.Parent = queue
	return req
}

// The option key sets the interval; a value outside 10s..24h is refused, naming the key or
// the field.
func TestTheQueueHealthOptionKey(t *testing.T) {
	opts := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
	for v, want := range map[string]time.Duration{"5 min": 5 * time.Minute, "10s": 10 * time.Second, "24h": 24 * time.Hour, "0": 0} {
		opts["sink.queue-health.interval"] = v
		cfg, err := ConfigFromOptions(opts)
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.Writer.QueueHealthInterval, v)
	}
	opts["sink.queue-health.interval"] = "5s"
	_, err := ConfigFromOptions(opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `option "sink.queue-health.interval": sink.queue-health.interval is 5s; it must be 0 (off) or from 10s to 24h`)
	for _, bad := range []time.Duration{5 * time.Second, 25 * time.Hour, -time.Minute} {
		_, err := WriterOptions{QueueHealthInterval: bad}.resolve()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "QueueHealthInterval is "+bad.String()+"; it must be 0 (off) or from 10s to 24h")
	}
}

// The exactly-once create step has the same lifecycle as the at-least-once DoFn: with an
// interval it has a queue health, and its preflight reads through it.
func TestTheExactlyOnceCreateStepReadsItsQueuesAgain(t *testing.T) {
	spec := eoSpec(t, "q", eoOrder{}, DefaultStagedOptions())
	spec.Writer.QueuePreflight = PreflightWarn
	spec.Writer.QueueHealthInterval = time.Minute
	f := newStagedCreateFnWith(spec, engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		return req.GetTask(), nil
	}))
	require.NoError(t, f.setupWorker())
	require.NotNil(t, f.health)
	assert.Equal(t, time.Minute, f.health.interval)
	assert.IsType(t, preflightHealthReader{}, f.preflight.reader)
}

// A DoFn set up as on a worker, with nothing wired by a test, starts the preflight's first read
// of a queue on a goroutine of its own (PreflightWarn does not wait), and that read goes
// through the queue health while the bundle goes on to the health's check: the two must not
// race on the watch. Run with -race.
func TestThePreflightsReadThroughQueueHealthDoesNotRaceTheBundle(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	spec := clientSpec{EmulatorEndpoint: srv.Addr}
	v2, err := sharedClient(t.Context(), spec)
	require.NoError(t, err)
	_, err = v2.CreateQueue(t.Context(), &cloudtaskspb.CreateQueueRequest{Parent: "projects/p/locations/l",
		Queue: &cloudtaskspb.Queue{Name: healthQueueA}})
	require.NoError(t, err)
	w, err := WriterOptions{QueueHealthInterval: time.Minute}.resolve()
	require.NoError(t, err)

	var b createBase[*pendingTask]
	b.setup(&sinkSpec{Config: Config{Writer: w}, client: spec})
	b.preflight.startBundle()
	b.health.startBundle()
	req := httpCreateIn(healthQueueA, 0)
	require.NoError(t, b.preflight.check(t.Context(), req))
	require.NoError(t, b.health.check(t.Context(), req))
	for _, r := range b.preflight.pending {
		_, err := r.result(t.Context())
		require.NoError(t, err)
	}

	h := b.health.entry(healthQueueA)
	g, reads, failures := h.report()
	assert.Equal(t, int64(1), reads, "the preflight's read is the queue's first health read")
	assert.Zero(t, failures)
	assert.Equal(t, int64(cloudtaskspb.Queue_RUNNING), g.state)
}
