package cloudtasksio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

const preflightQueue = "projects/p/locations/l/queues/preflight"

// preflightServer is an in-memory server with preflightQueue, a client to reconfigure the
// queue as an operator would, and a count of the GetQueue calls it answered.
type preflightServer struct {
	*cloudtaskstest.Server
	admin    *cloudtasks.Client
	getQueue atomic.Int64
}

func newPreflightServer(t *testing.T) *preflightServer {
	t.Helper()
	srv := &preflightServer{Server: freshAddrServer(t)}
	_, err := srv.CreateQueue(preflightQueue)
	require.NoError(t, err)
	srv.admin, err = cloudtasks.NewClient(context.Background(), srv.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { srv.admin.Close() })
	srv.Observe("GetQueue", func(cloudtaskstest.Call) { srv.getQueue.Add(1) })
	return srv
}

// preflightAddrs holds the address of every test server newPreflightServer started in this
// process. The process-wide caches key a queue's reads by the client setting, the server's
// address included, for minutes: a server that got the port of an earlier test's server
// would find that test's reads of the same queue cached, and a test counting reads would see
// none (a flake of TestConcurrentDoFnInstancesReadAQueueOnce in a whole package run).
var preflightAddrs sync.Map

// freshAddrServer starts a test server on an address no earlier preflight test used.
func freshAddrServer(t *testing.T) *cloudtaskstest.Server {
	t.Helper()
	var taken []*cloudtaskstest.Server // kept open until a fresh port is found, so it is not handed out again
	defer func() {
		for _, s := range taken {
			s.Close()
		}
	}()
	for range 100 {
		srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
		if _, used := preflightAddrs.LoadOrStore(srv.Addr, true); !used {
			t.Cleanup(func() { srv.Close() })
			return srv
		}
		taken = append(taken, srv)
	}
	t.Fatal("no fresh port in 100 tries")
	return nil
}

// update sets the queue fields that paths name to those of q.
func (s *preflightServer) update(t *testing.T, q *cloudtaskspb.Queue, paths ...string) {
	t.Helper()
	q.Name = preflightQueue
	_, err := s.admin.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{Queue: q, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
	require.NoError(t, err)
}

// preflighter returns a preflighter of a fresh DoFn instance reading from s.
func (s *preflightServer) preflighter(mode QueuePreflight) *queuePreflighter {
	return newQueuePreflighter(mode, clientSpec{EmulatorEndpoint: s.Addr})
}

func httpCreate(url string) *cloudtaskspb.CreateTaskRequest {
	return &cloudtaskspb.CreateTaskRequest{Parent: preflightQueue, Task: &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{
		HttpRequest: &cloudtaskspb.HttpRequest{Url: url, Body: []byte(`{"card":"secret-payload"}`), Headers: map[string]string{"Authorization": "Bearer secret-token"}}}}}
}

func appEngineCreate(routing *cloudtaskspb.AppEngineRouting) *cloudtaskspb.CreateTaskRequest {
	return &cloudtaskspb.CreateTaskRequest{Parent: preflightQueue, Task: &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{
		AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{RelativeUri: "/work", Body: []byte("secret-payload"), AppEngineRouting: routing}}}}
}

var workerRouting = &cloudtaskspb.AppEngineRouting{Service: "worker"}

func alwaysOverride() *cloudtaskspb.HttpTarget {
	return &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{
		Host: proto.String("elsewhere.example.com"), PathOverride: &cloudtaskspb.PathOverride{Path: "/routed"},
		UriOverrideEnforceMode: cloudtaskspb.UriOverride_ALWAYS}}
}

func TestQueuePreflightWarnsOncePerProcessAndFinding(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(t *testing.T, s *preflightServer)
		req    *cloudtaskspb.CreateTaskRequest
		metric string
		says   []string
	}{
		{"paused", func(t *testing.T, s *preflightServer) { require.NoError(t, s.PauseQueue(preflightQueue)) },
			httpCreate("https://example.com/"), MetricQueuePreflightPaused, []string{"is PAUSED", "pile up undelivered"}},
		{"disabled", func(t *testing.T, s *preflightServer) { require.NoError(t, s.DisableQueue(preflightQueue)) },
			httpCreate("https://example.com/"), MetricQueuePreflightDisabled, []string{"is DISABLED", "pile up undelivered"}},
		{"uri override always", func(t *testing.T, s *preflightServer) {
			s.update(t, &cloudtaskspb.Queue{HttpTarget: alwaysOverride()}, "http_target")
		},
			httpCreate("https://example.com/"), MetricQueuePreflightURIOverride, []string{"uriOverride in enforce mode ALWAYS", "replaces the host, path of the URL", "tasks go to host elsewhere.example.com"}},
		{"uri override with unspecified mode, which means ALWAYS", func(t *testing.T, s *preflightServer) {
			s.update(t, &cloudtaskspb.Queue{HttpTarget: &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{Port: proto.Int64(8443)}}}, "http_target")
		}, httpCreate("https://example.com/"), MetricQueuePreflightURIOverride, []string{"replaces the port of the URL"}},
		{"routing override", func(t *testing.T, s *preflightServer) {
			s.update(t, &cloudtaskspb.Queue{AppEngineRoutingOverride: &cloudtaskspb.AppEngineRouting{Service: "billing", Version: "v3"}}, "app_engine_routing_override")
		}, appEngineCreate(workerRouting), MetricQueuePreflightRoutingOverride, []string{"appEngineRoutingOverride (service=billing version=v3)", "replacing the routing the sink sets"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newPreflightServer(t)
			c.setup(t, s)
			logs := captureLogs(t)
			ctx, counters := metricsContext()
			// Two DoFn instances, two bundles each: one read, one line, one count.
			for range 2 {
				p := s.preflighter(PreflightWarn)
				for range 2 {
					p.startBundle()
					for range 3 {
						require.NoError(t, p.check(ctx, c.req), "warnings do not fail the bundle")
					}
					readsEnd(p)
					p.finishBundle(ctx)
				}
			}
			assert.Equal(t, int64(1), s.getQueue.Load(), "the queue is read once per process")
			lines := logLines(logs, "cloudtasksio: queue preflight")
			require.Len(t, lines, 1, "one line per finding")
			assert.Contains(t, lines[0], "level=WARN")
			assert.Contains(t, lines[0], preflightQueue)
			assert.Contains(t, lines[0], "PreflightFail")
			for _, want := range c.says {
				assert.Contains(t, lines[0], want)
			}
			assert.NotContains(t, logs.String(), "secret", "no payload or header reaches the log")
			assert.Equal(t, map[string]int64{c.metric: 1}, counters())
		})
	}
}

func TestQueuePreflightStaysQuietWhenNothingReplacesWhatTheSinkSets(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, s *preflightServer)
		req   *cloudtaskspb.CreateTaskRequest
	}{
		{"running queue without overrides", func(*testing.T, *preflightServer) {}, httpCreate("https://example.com/")},
		{"uri override IF_NOT_EXISTS: the task's URL has every part", func(t *testing.T, s *preflightServer) {
			ht := alwaysOverride()
			ht.UriOverride.UriOverrideEnforceMode = cloudtaskspb.UriOverride_IF_NOT_EXISTS
			s.update(t, &cloudtaskspb.Queue{HttpTarget: ht}, "http_target")
		}, httpCreate("https://example.com/")},
		{"uri override on App Engine tasks", func(t *testing.T, s *preflightServer) {
			s.update(t, &cloudtaskspb.Queue{HttpTarget: alwaysOverride()}, "http_target")
		}, appEngineCreate(workerRouting)},
		{"routing override on an App Engine task without routing", func(t *testing.T, s *preflightServer) {
			s.update(t, &cloudtaskspb.Queue{AppEngineRoutingOverride: &cloudtaskspb.AppEngineRouting{Service: "billing"}}, "app_engine_routing_override")
		}, appEngineCreate(nil)},
		{"routing override on HTTP tasks", func(t *testing.T, s *preflightServer) {
			s.update(t, &cloudtaskspb.Queue{AppEngineRoutingOverride: &cloudtaskspb.AppEngineRouting{Service: "billing"}}, "app_engine_routing_override")
		}, httpCreate("https://example.com/")},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newPreflightServer(t)
			c.setup(t, s)
			logs := captureLogs(t)
			ctx, counters := metricsContext()
			for _, mode := range []QueuePreflight{PreflightWarn, PreflightFail} {
				p := s.preflighter(mode)
				require.NoError(t, p.check(ctx, c.req))
				readsEnd(p)
				p.finishBundle(ctx)
			}
			assert.Equal(t, int64(2), s.getQueue.Load(), "the queue was read, once per mode")
			assert.Empty(t, logLines(logs, "cloudtasksio: queue preflight"))
			assert.Empty(t, counters())
		})
	}
}

func TestQueuePreflightSkipsQueuesItMayNotRead(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		says string
	}{
		{codes.PermissionDenied, "grant cloudtasks.queues.get"},
		{codes.Unimplemented, "does not implement GetQueue"},
	} {
		t.Run(c.code.String(), func(t *testing.T) {
			s := newPreflightServer(t)
			require.NoError(t, s.PauseQueue(preflightQueue)) // not seen: the read is refused
			s.InjectErrors("GetQueue", c.code)
			logs := captureLogs(t)
			ctx, counters := metricsContext()
			for _, mode := range []QueuePreflight{PreflightWarn, PreflightFail} {
				// The first instance is refused; the second knows it and does not ask.
				for range 2 {
					p := s.preflighter(mode)
					p.startBundle()
					require.NoError(t, p.check(ctx, httpCreate("https://example.com/")), "a refused read does not fail the bundle, even under PreflightFail")
					readsEnd(p)
					p.finishBundle(ctx)
				}
				s.InjectErrors("GetQueue", c.code) // for the next mode
			}
			assert.Equal(t, int64(2), s.getQueue.Load(), "one read per mode, not tried again")
			lines := logLines(logs, "cloudtasksio: queue preflight")
			require.Len(t, lines, 2, "one line per mode")
			for _, line := range lines {
				assert.Contains(t, line, "level=INFO")
				assert.Contains(t, line, "not checking queue "+preflightQueue)
				assert.Contains(t, line, c.says)
				assert.NotContains(t, line, "injected", "the status message is not quoted")
			}
			assert.Equal(t, map[string]int64{MetricQueuePreflightSkipped: 2}, counters())
		})
	}
}

// scriptedQueueReader answers queue reads with what the test set last, as an operator's
// changes and a flaky service would.
type scriptedQueueReader struct {
	mu    sync.Mutex
	state cloudtaskspb.Queue_State
	err   error
	reads int
	delay time.Duration // how long each read takes
}

func (r *scriptedQueueReader) set(state cloudtaskspb.Queue_State, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.err = state, err
}

func (r *scriptedQueueReader) readQueue(_ context.Context, queue string) (*cloudtaskspb.Queue, error) {
	time.Sleep(r.delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	if r.err != nil {
		return nil, r.err
	}
	return &cloudtaskspb.Queue{Name: queue, State: r.state}, nil
}

func (r *scriptedQueueReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reads
}

// scriptedPreflighter returns a preflighter of a fresh DoFn instance reading through r, with a
// process state of its own in c.
func scriptedPreflighter(mode QueuePreflight, r queueReader, c *gcpconn.Cache[preflightKey, *preflightResult]) *queuePreflighter {
	p := newQueuePreflighter(mode, clientSpec{})
	p.reader, p.cache = r, c
	return p
}

func TestQueuePreflightRemembersAFailedReadForFailureTTLThenReadsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cache gcpconn.Cache[preflightKey, *preflightResult]
		r := &scriptedQueueReader{}
		r.set(cloudtaskspb.Queue_PAUSED, status.Error(codes.Internal, "secret detail"))
		logs := captureLogs(t)
		ctx, counters := metricsContext()
		// Bundles of several instances meet the failure: each goes on without the check,
		// and nobody reads the queue again until FailureTTL has passed.
		for bundle := range 3 {
			for range 4 {
				p := scriptedPreflighter(PreflightFail, r, &cache)
				p.startBundle()
				require.NoError(t, p.check(ctx, httpCreate("https://example.com/")), "a failed read skips the check, bundle %d", bundle)
			}
			time.Sleep(gcpconn.FailureTTL / 3)
		}
		assert.Equal(t, 1, r.count(), "one read for every bundle of the process during FailureTTL")
		lines := logLines(logs, "cloudtasksio: queue preflight")
		require.Len(t, lines, 1, "one line per failed read")
		assert.Contains(t, lines[0], "level=WARN")
		assert.Contains(t, lines[0], "failed with INTERNAL")
		assert.Contains(t, lines[0], "not checking it for 30s, then the next bundle tries again")
		assert.NotContains(t, lines[0], "secret detail")

		// After FailureTTL the next bundle reads the queue again, and finds it paused.
		r.set(cloudtaskspb.Queue_PAUSED, nil)
		p := scriptedPreflighter(PreflightFail, r, &cache)
		p.startBundle()
		err := p.check(ctx, httpCreate("https://example.com/"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is PAUSED")
		assert.Equal(t, 2, r.count())
		assert.Equal(t, map[string]int64{MetricQueuePreflightSkipped: 1, MetricQueuePreflightPaused: 1}, counters())
	})
}

func TestQueuePreflightFailRemembersAMisconfiguredQueueForFailureTTLAndPassesOnceItIsFixed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var cache gcpconn.Cache[preflightKey, *preflightResult]
		r := &scriptedQueueReader{}
		r.set(cloudtaskspb.Queue_PAUSED, nil)
		ctx, counters := metricsContext()
		p := scriptedPreflighter(PreflightFail, r, &cache)
		bundle := func() error {
			p.startBundle()
			return p.check(ctx, httpCreate("https://example.com/"))
		}
		for range 5 { // the runner retries the failed bundle at once
			require.Error(t, bundle())
		}
		assert.Equal(t, 1, r.count(), "the retried bundles fail at once, without a read each")
		assert.Equal(t, int64(5), counters()[MetricQueuePreflightPaused], "counted per failed bundle")

		r.set(cloudtaskspb.Queue_RUNNING, nil) // the operator resumes the queue
		require.Error(t, bundle(), "within FailureTTL the process does not know yet")
		time.Sleep(gcpconn.FailureTTL)
		require.NoError(t, bundle(), "after FailureTTL it reads the queue again and goes on")
		for range 3 {
			time.Sleep(time.Minute)
			require.NoError(t, bundle())
		}
		assert.Equal(t, 2, r.count(), "a passed check is kept")
	})
}

func TestQueuePreflightSaysOnceThatAMissingQueueDoesNotExist(t *testing.T) {
	s := newPreflightServer(t)
	const missing = "projects/p/locations/l/queues/not-yet-created"
	req := httpCreate("https://example.com/")
	req.Parent = missing
	logs := captureLogs(t)
	ctx, counters := metricsContext()
	p := s.preflighter(PreflightFail)
	for range 3 {
		p.startBundle()
		require.NoError(t, p.check(ctx, req), "a missing queue is the creates' failure to report, not the preflight's")
	}
	assert.Equal(t, int64(1), s.getQueue.Load(), "the failed read is remembered for gcpconn.FailureTTL, then read again (TestQueuePreflightRemembersAFailedReadForFailureTTLThenReadsAgain)")
	lines := logLines(logs, "cloudtasksio: queue preflight")
	require.Len(t, lines, 1, "said once per read, not once per bundle")
	assert.Contains(t, lines[0], "level=WARN")
	assert.Contains(t, lines[0], "queue "+missing+" does not exist (NOT_FOUND), or is still being created")
	assert.Contains(t, lines[0], "reads it again in 30s")
	assert.NotContains(t, lines[0], "not checking it")
	assert.Equal(t, map[string]int64{MetricQueuePreflightSkipped: 1}, counters())
}

func TestQueuePreflightReadRidesOutAnUnavailableAnswer(t *testing.T) {
	s := newPreflightServer(t)
	require.NoError(t, s.PauseQueue(preflightQueue))
	s.InjectErrors("GetQueue", codes.Unavailable)
	ctx, counters := metricsContext()
	err := s.preflighter(PreflightFail).check(ctx, httpCreate("https://example.com/"))
	require.Error(t, err, "the client retried the read, which found the queue paused")
	assert.Equal(t, int64(2), s.getQueue.Load())
	assert.Equal(t, map[string]int64{MetricQueuePreflightPaused: 1}, counters())
}

func TestQueuePreflightFailNamesTheQueueAndEveryReason(t *testing.T) {
	s := newPreflightServer(t)
	require.NoError(t, s.PauseQueue(preflightQueue))
	s.update(t, &cloudtaskspb.Queue{HttpTarget: alwaysOverride()}, "http_target")
	logs := captureLogs(t)
	ctx, counters := metricsContext()
	p := s.preflighter(PreflightFail)
	for bundle := 1; bundle <= 2; bundle++ {
		p.startBundle()
		err := p.check(ctx, httpCreate("https://example.com/"))
		require.Error(t, err, "bundle %d", bundle)
		for _, want := range []string{preflightQueue, "is PAUSED", "uriOverride in enforce mode ALWAYS", "WriterOptions.QueuePreflight is PreflightFail", "sink.queue-preflight"} {
			assert.Contains(t, err.Error(), want)
		}
		assert.NotContains(t, err.Error(), "secret")
	}
	assert.Equal(t, int64(1), s.getQueue.Load(), "the finding is remembered for gcpconn.FailureTTL (read again after it: TestQueuePreflightFailRemembersAMisconfiguredQueueForFailureTTLAndPassesOnceItIsFixed)")
	assert.Empty(t, logLines(logs, "cloudtasksio: queue preflight"), "the error is the report")
	assert.Equal(t, map[string]int64{MetricQueuePreflightPaused: 2, MetricQueuePreflightURIOverride: 2}, counters(), "counted per failed bundle")
}

func TestQueuePreflightOffReadsNothing(t *testing.T) {
	s := newPreflightServer(t)
	require.NoError(t, s.PauseQueue(preflightQueue))
	ctx, counters := metricsContext()
	require.NoError(t, s.preflighter(PreflightOff).check(ctx, httpCreate("https://example.com/")))
	assert.Zero(t, s.getQueue.Load())
	assert.Empty(t, counters())
}

func TestQueuePreflightKeepsEachQueueApart(t *testing.T) {
	s := newPreflightServer(t)
	const other = "projects/p/locations/l/queues/other"
	_, err := s.CreateQueue(other)
	require.NoError(t, err)
	require.NoError(t, s.PauseQueue(other))
	ctx, counters := metricsContext()
	p := s.preflighter(PreflightWarn)
	p.startBundle()
	for range 2 {
		require.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
		req := httpCreate("https://example.com/")
		req.Parent = other
		require.NoError(t, p.check(ctx, req))
	}
	readsEnd(p)
	p.finishBundle(ctx)
	assert.Equal(t, int64(2), s.getQueue.Load(), "one read per queue")
	assert.Equal(t, map[string]int64{MetricQueuePreflightPaused: 1}, counters(), "only the paused queue is reported")
}

func TestQueuePreflightValues(t *testing.T) {
	assert.Equal(t, "PreflightWarn", QueuePreflight(0).String(), "the zero value warns")
	assert.Equal(t, "PreflightFail", PreflightFail.String())
	assert.Equal(t, "PreflightOff", PreflightOff.String())
	assert.Equal(t, "QueuePreflight(7)", QueuePreflight(7).String())
	_, err := WriterOptions{QueuePreflight: 7}.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WriterOptions.QueuePreflight")
	assert.True(t, strings.Contains(err.Error(), "QueuePreflight(7)"))
}

func TestConcurrentDoFnInstancesReadAQueueOnce(t *testing.T) {
	s := newPreflightServer(t)
	require.NoError(t, s.PauseQueue(preflightQueue))
	logs := captureLogs(t)
	ctx, counters := metricsContext()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := s.preflighter(PreflightWarn)
			p.startBundle()
			assert.NoError(t, p.check(ctx, httpCreate("https://example.com/")))
			readsEnd(p)
			p.finishBundle(ctx)
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(1), s.getQueue.Load(), "the others waited for the first read")
	assert.Len(t, logLines(logs, "is PAUSED"), 1)
	assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused])
}

func TestQueuePreflightOptionKey(t *testing.T) {
	opts := func(v string) map[string]string {
		return map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/", "sink.queue-preflight": v}
	}
	for v, want := range map[string]QueuePreflight{"warn": PreflightWarn, "fail": PreflightFail, "OFF": PreflightOff} {
		cfg, err := ConfigFromOptions(opts(v))
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.Writer.QueuePreflight, v)
	}
	cfg, err := ConfigFromOptions(map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"})
	require.NoError(t, err)
	assert.Equal(t, PreflightWarn, cfg.Writer.QueuePreflight, "left out: warn")
	for _, bad := range []string{"loud", ""} {
		_, err = ConfigFromOptions(opts(bad))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "sink.queue-preflight")
		assert.Contains(t, err.Error(), "warn, fail, off")
	}
}

// countGetQueue counts the v2 GetQueue calls srv answers from now on.
func countGetQueue(srv *cloudtaskstest.Server) *atomic.Int64 {
	var n atomic.Int64
	srv.Observe("GetQueue", func(cloudtaskstest.Call) { n.Add(1) })
	return &n
}

func TestAtLeastOnceWriterReadsTheQueueOncePerProcess(t *testing.T) {
	srv := newBundleServer(t)
	require.NoError(t, srv.PauseQueue(bundleQueue))
	reads := countGetQueue(srv)
	logs := captureLogs(t)
	ctx, counters := metricsContext()
	// Two DoFn instances of one process, two bundles each.
	for range 2 {
		f := newBundleWriteFn(t, srv, FailBundle, 10, WriterOptions{})
		for bundle := range 2 {
			require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
			for i := range 5 {
				require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: fmt.Sprint(bundle, "-", i)}, discardDeadLetters))
			}
			readsEnd(f.preflight)
			require.NoError(t, f.FinishBundle(ctx, discardDeadLetters), "a warning does not fail the bundle")
		}
	}
	assert.Equal(t, int64(1), reads.Load(), "one read for the process")
	assert.Len(t, srv.Tasks(bundleQueue), 20, "the tasks are created anyway, and wait in the paused queue")
	assert.Len(t, logLines(logs, "is PAUSED"), 1)
	assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused])
}

// The bundle that first writes to a paused queue does not wait for the read: the read logs the
// warning as it ends, and the next bundle counts it (TestUnderPreflightWarnFinishBundleDoesNotWaitForASlowQueueRead
// times it).
func TestAtLeastOnceWriterReportsAPausedQueueWithoutHoldingTheBundle(t *testing.T) {
	srv := newBundleServer(t)
	require.NoError(t, srv.PauseQueue(bundleQueue))
	logs := captureSyncLogs(t)
	ctx, counters := metricsContext()
	f := newBundleWriteFn(t, srv, FailBundle, 10, WriterOptions{})
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: "only"}, discardDeadLetters))
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Len(t, srv.Tasks(bundleQueue), 1)
	assert.LessOrEqual(t, counters()[MetricQueuePreflightPaused], int64(1), "counted if the read had ended")

	readsEnd(f.preflight)
	assert.Len(t, logs.lines("is PAUSED"), 1, "logged as the read ended")
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused], "counted by the next bundle at the latest, once")
	assert.Len(t, logs.lines("is PAUSED"), 1)
}

func TestAtLeastOnceWriterUnderPreflightFailCreatesNothingInAPausedQueue(t *testing.T) {
	srv := newBundleServer(t)
	require.NoError(t, srv.PauseQueue(bundleQueue))
	// Whatever the failure policy: the queue is at fault, not an element.
	f := newBundleWriteFn(t, srv, LogAndDrop, 10, WriterOptions{QueuePreflight: PreflightFail})
	ctx, counters := metricsContext()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	err := f.ProcessElement(ctx, 0, urlOrder{ID: "1"}, discardDeadLetters)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "queue "+bundleQueue+" is PAUSED")
	assert.Contains(t, err.Error(), "PreflightFail")
	require.Error(t, f.ProcessElement(ctx, 0, urlOrder{ID: "2"}, discardDeadLetters), "the bundle stays failed")
	require.Error(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Zero(t, srv.Stats().CreateTaskCalls, "nothing was sent")
	assert.Equal(t, int64(1), counters()[MetricQueuePreflightPaused])
	assert.Zero(t, counters()[MetricRecordsSendErrors], "the queue failed, not an element")

	// The runner retries the bundle at once: it fails the same way without reading the queue
	// again (the process reads it again after gcpconn.FailureTTL, and goes on once it is
	// resumed: TestQueuePreflightFailRemembersAMisconfiguredQueueForFailureTTLAndPassesOnceItIsFixed).
	reads := countGetQueue(srv)
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	err = f.ProcessElement(ctx, 0, urlOrder{ID: "1"}, discardDeadLetters)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is PAUSED")
	require.Error(t, f.FinishBundle(ctx, discardDeadLetters))
	assert.Zero(t, reads.Load())
	assert.Zero(t, srv.Stats().CreateTaskCalls, "nothing was sent")
}

func TestExactlyOnceCreateStepRunsTheQueuePreflight(t *testing.T) {
	srv := newStagedServer(t, "eo-preflight")
	const queue = "projects/p/locations/l/queues/eo-preflight"
	require.NoError(t, srv.DisableQueue(queue))
	reads := countGetQueue(srv)
	spec := stagedSpecFor(t, srv, "eo-preflight", eoPlainOrder{})
	spec.Writer.QueuePreflight = PreflightFail
	envs := stageAll(t, spec, plainOrders(3)...)
	ctx, counters := metricsContext()
	f := &stagedCreateFn{Spec: spec}
	require.NoError(t, f.Setup())
	err := createAll(ctx, f, envs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "queue "+queue+" is DISABLED")
	assert.Zero(t, srv.Stats().CreateTaskCalls)
	assert.Equal(t, int64(1), counters()[MetricQueuePreflightDisabled])

	spec.Writer.QueuePreflight = PreflightWarn
	f = &stagedCreateFn{Spec: spec}
	require.NoError(t, f.Setup())
	for range 2 {
		require.NoError(t, createAll(ctx, f, envs))
		readsEnd(f.preflight) // counted by the second bundle at the latest
	}
	assert.Len(t, srv.Tasks(queue), 3, "created under a warning, once each")
	assert.Equal(t, int64(2), reads.Load(), "one read failed the first bundle, one more for the warning mode")
	assert.Equal(t, int64(2), counters()[MetricQueuePreflightDisabled])
}
