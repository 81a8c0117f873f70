package cloudtasksio

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// queuePath is the path of queue name in the project and location of queueOfSpreadOrder.
func queuePath(name string) string { return "projects/p/locations/l/queues/" + name }

// isolationConfig writes spreadOrders to their queues at srv, dead-lettering failures, with the
// given destination-failure policy, a NOT_FOUND budget of 3 quick attempts and per-queue metrics.
func isolationConfig(addr string, policy DestinationFailurePolicy) Config {
	return Config{QueueFn: queueOfSpreadOrder, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		OnFailure: DeadLetter, OnDestinationFailure: policy, EmulatorEndpoint: addr,
		Writer: WriterOptions{NotFoundRecoveryInitialBackoff: time.Millisecond, NotFoundRecoveryMaxBackoff: time.Millisecond,
			PerDestinationMetrics: true, QueuePreflight: PreflightOff}}
}

// newIsolationFn returns a set-up write DoFn for cfg with a memory of failed queues of its own.
func newIsolationFn(t *testing.T, cfg Config) *writeFn {
	t.Helper()
	spec, err := compile(cfg, typeOf(spreadOrder{}))
	require.NoError(t, err)
	f := &writeFn{Spec: spec, queueIsolation: queueIsolation{destinations: &failedDestinations{TTL: destinationFailureTTL, MaxEntries: maxQueueStates}}}
	require.NoError(t, f.Setup())
	return f
}

// deadLetters collects emitted dead letters.
type deadLetters struct {
	mu  sync.Mutex
	out []deadletter.FailedElement
}

func (d *deadLetters) emit(_ beam.EventTime, fe deadletter.FailedElement) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.out = append(d.out, fe)
}

// runIsolationBundle runs one bundle of elements for the given queues (one element each) and
// returns its dead letters and error.
func runIsolationBundle(ctx context.Context, t *testing.T, f *writeFn, queues ...string) ([]deadletter.FailedElement, error) {
	t.Helper()
	dl := &deadLetters{}
	require.NoError(t, f.StartBundle(ctx, dl.emit))
	for i, q := range queues {
		if err := f.ProcessElement(ctx, 0, spreadOrder{Queue: q, ID: i}, dl.emit); err != nil {
			_ = f.FinishBundle(ctx, dl.emit)
			return dl.out, err
		}
	}
	err := f.FinishBundle(ctx, dl.emit)
	return dl.out, err
}

func TestAMissingQueueFailsOnlyItsOwnElementsUnderDestinationIsolate(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	_, err := srv.CreateQueue(queuePath("q-good"))
	require.NoError(t, err)
	bundle := []string{"q-good", "q-missing", "q-good", "q-missing", "q-good", "q-missing"}

	t.Run("without the policy the bundle fails", func(t *testing.T) {
		f := newIsolationFn(t, isolationConfig(srv.Addr, DestinationFailBundle))
		dead, err := runIsolationBundle(context.Background(), t, f, bundle...)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "NOT_FOUND")
		assert.Empty(t, dead)
	})

	t.Run("isolated", func(t *testing.T) {
		before := len(srv.Tasks(queuePath("q-good")))
		f := newIsolationFn(t, isolationConfig(srv.Addr, DestinationIsolate))
		logs := captureLogs(t)
		ctx, counters := metricsContext()
		dead, err := runIsolationBundle(ctx, t, f, bundle...)
		require.NoError(t, err, "the missing queue fails only its own elements")
		assert.Len(t, logLines(logs, "failed with NOT_FOUND: under Config.OnDestinationFailure DestinationIsolate"), 1,
			"one line for the queue, not one per element")
		assert.Len(t, srv.Tasks(queuePath("q-good")), before+3, "the other queue's tasks are created")
		require.Len(t, dead, 3)
		for _, fe := range dead {
			assert.Equal(t, CodeNotFound, fe.Code)
			assert.Equal(t, queuePath("q-missing"), fe.Destination)
			assert.Contains(t, fe.Error, "NOT_FOUND")
			task, err := FailedTask(fe)
			require.NoError(t, err, "the dead letter carries the task for a replay once the queue exists")
			assert.Equal(t, "https://example.com/orders", task.GetHttpRequest().GetUrl())
			got, err := deadletter.DecodeElement[spreadOrder](fe)
			require.NoError(t, err)
			assert.Equal(t, "q-missing", got.Queue)
		}
		c := counters()
		assert.Equal(t, int64(3), c[MetricRecordsSend])
		assert.Equal(t, int64(3), c[MetricRecordsSendErrors])
		assert.Equal(t, int64(3), c[MetricQueueFailures])
		assert.Equal(t, int64(3), c[MetricDestinationQueueFailures(queuePath("q-missing"))])
		assert.Equal(t, int64(3), c[MetricDestinationSendErrors(queuePath("q-missing"))])
		assert.Zero(t, c[MetricDestinationQueueFailures(queuePath("q-good"))])
	})
}

// denyQueues makes srv answer each CreateTask for a queue of codes with that code.
func denyQueues(srv *cloudtaskstest.Server, byQueue map[string]codes.Code) {
	srv.AddReactor("CreateTask", cloudtaskstest.ReactorFunc(func(req proto.Message) (bool, proto.Message, error) {
		if c, ok := byQueue[req.(*cloudtaskspb.CreateTaskRequest).GetParent()]; ok {
			return true, nil, status.Error(c, "refused for the test")
		}
		return false, nil, nil
	}))
}

func TestForbiddenAndUnusableQueuesAreIsolatedButOtherFailuresStillFailTheBundle(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	for _, q := range []string{"q-good", "q-forbidden", "q-unusable", "q-unauthenticated"} {
		_, err := srv.CreateQueue(queuePath(q))
		require.NoError(t, err)
	}
	denyQueues(srv, map[string]codes.Code{queuePath("q-forbidden"): codes.PermissionDenied,
		queuePath("q-unusable"): codes.FailedPrecondition, queuePath("q-unauthenticated"): codes.Unauthenticated})
	f := newIsolationFn(t, isolationConfig(srv.Addr, DestinationIsolate))
	ctx := context.Background()

	dead, err := runIsolationBundle(ctx, t, f, "q-good", "q-forbidden", "q-unusable", "q-good")
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(queuePath("q-good")), 2)
	codesByQueue := map[string]string{}
	for _, fe := range dead {
		codesByQueue[fe.Destination] = fe.Code
	}
	assert.Equal(t, map[string]string{queuePath("q-forbidden"): CodePermissionDenied, queuePath("q-unusable"): CodeFailedPrecondition}, codesByQueue)

	// UNAUTHENTICATED is about the sink's credentials, not about one queue.
	dead, err = runIsolationBundle(ctx, t, f, "q-unauthenticated")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UNAUTHENTICATED")
	assert.Empty(t, dead)
}

// TestAFailedQueueIsRememberedBrieflyAndItsNextElementsAreNotSent checks the memory of failed
// queues, in fake time: within the TTL an element of the queue goes to the failure policy
// without a create, in this bundle and the next, by another DoFn instance too; after it the
// queue is tried again.
func TestAFailedQueueIsRememberedBrieflyAndItsNextElementsAreNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := map[string]int{}
		creator := engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[req.GetParent()]++
			if req.GetParent() == queuePath("q-missing") {
				return nil, status.Error(codes.NotFound, "queue not found")
			}
			return req.GetTask(), nil
		})
		callsTo := func(q string) int {
			mu.Lock()
			defer mu.Unlock()
			return calls[queuePath(q)]
		}
		cfg := isolationConfig("127.0.0.1:1", DestinationIsolate)
		cfg.Writer.AdaptiveConcurrency = AdaptiveConcurrencyOff // no process-wide state made inside the bubble
		spec, err := compile(cfg, typeOf(spreadOrder{}))
		require.NoError(t, err)
		memory := &failedDestinations{TTL: destinationFailureTTL, MaxEntries: maxQueueStates}
		newFn := func() *writeFn {
			f := &writeFn{Spec: spec, queueIsolation: queueIsolation{destinations: memory}}
			require.NoError(t, f.Setup())
			return f
		}
		run := func(f *writeFn, queues ...string) []deadletter.FailedElement {
			dl := &deadLetters{}
			f.start(creator, engineOptions(f.Spec.Writer), f)
			f.emit = dl.emit
			for i, q := range queues {
				require.NoError(t, f.processElement(context.Background(), 0, spreadOrder{Queue: q, ID: i}, dl.emit))
			}
			require.NoError(t, f.finishBundle(context.Background(), dl.emit))
			return dl.out
		}
		first, second := newFn(), newFn()

		dead := run(first, "q-missing")
		require.Len(t, dead, 1)
		assert.Equal(t, 3, callsTo("q-missing"), "the first element spends the NOT_FOUND budget")

		time.Sleep(destinationFailureTTL / 2)
		dead = run(first, "q-missing", "q-good", "q-missing")
		dead = append(dead, run(second, "q-missing")...)
		assert.Equal(t, 3, callsTo("q-missing"), "within the TTL the queue is sent nothing, by any instance")
		assert.Equal(t, 1, callsTo("q-good"))
		require.Len(t, dead, 3)
		for _, fe := range dead {
			assert.Equal(t, CodeNotFound, fe.Code)
			assert.Contains(t, fe.Error, "not sent: this worker process met a failure of queue "+queuePath("q-missing"))
			assert.Contains(t, fe.Error, "NOT_FOUND retry budget of 3 attempts exhausted")
		}

		time.Sleep(destinationFailureTTL / 2)
		dead = run(second, "q-missing")
		require.Len(t, dead, 1)
		assert.Equal(t, 6, callsTo("q-missing"), "once the TTL has passed the queue is tried again")
		assert.NotContains(t, dead[0].Error, "not sent")
	})
}

func TestTheMemoryOfFailedQueuesIsBounded(t *testing.T) {
	d := &failedDestinations{TTL: time.Minute, MaxEntries: 2}
	now := time.Now()
	key := func(q string) destinationKey { return destinationKey{queue: queuePath(q)} }
	for i, q := range []string{"a", "b", "a", "c"} {
		d.remember(destinationFailure{key: key(q), code: CodeNotFound, at: now.Add(time.Duration(i) * time.Second)})
	}
	assert.Equal(t, 2, d.Len())
	_, ok := d.lookup(key("b"), now.Add(4*time.Second))
	assert.False(t, ok, "the least recently failed queue is forgotten first")
	for _, q := range []string{"a", "c"} {
		_, ok := d.lookup(key(q), now.Add(4*time.Second))
		assert.True(t, ok, q)
	}
	_, ok = d.lookup(key("c"), now.Add(3*time.Second+time.Minute))
	assert.False(t, ok, "a failure is forgotten a TTL after it")
	assert.Zero(t, d.Len())
	_, ok = d.lookup(destinationKey{client: clientSpec{EmulatorEndpoint: "other:1"}, queue: queuePath("a")}, now)
	assert.False(t, ok, "another client setting has a memory of its own")
}

func TestDestinationIsolateIsCheckedAtConstruction(t *testing.T) {
	base := isolationConfig("127.0.0.1:1", DestinationIsolate)
	for _, c := range []struct {
		name string
		cfg  func(Config) Config
		want string
	}{
		{"with FailBundle", func(c Config) Config { c.OnFailure = FailBundle; return c },
			"Config.OnDestinationFailure DestinationIsolate needs Config.OnFailure LogAndDrop or DeadLetter"},
		{"with exactly-once", func(c Config) Config {
			c.QueueFn, c.Queue, c.Delivery, c.OnFailure = nil, Queue{Project: "p", Location: "l", Name: "q"}, ExactlyOnce, FailBundle
			return c
		}, "Config.OnDestinationFailure DestinationIsolate requires Config.Delivery AtLeastOnce"},
		{"an unknown value", func(c Config) Config { c.OnDestinationFailure = 7; return c },
			"Config.OnDestinationFailure DestinationFailurePolicy(7) is not DestinationFailBundle or DestinationIsolate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := compile(c.cfg(base), typeOf(spreadOrder{}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := compile(base, typeOf(spreadOrder{}))
	assert.NoError(t, err)
	logAndDrop := base
	logAndDrop.OnFailure = LogAndDrop
	_, err = compile(logAndDrop, typeOf(spreadOrder{}))
	assert.NoError(t, err)
}

func TestTheDestinationFailureOptionKey(t *testing.T) {
	opts := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range opts {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cfg, err := ConfigFromOptions(with("sink.destination-failure", "isolate"))
	require.NoError(t, err, "OnFailure is set on the result, so the key alone is accepted")
	assert.Equal(t, DestinationIsolate, cfg.OnDestinationFailure)
	cfg, err = ConfigFromOptions(with("sink.destination-failure", "FAIL"))
	require.NoError(t, err)
	assert.Equal(t, DestinationFailBundle, cfg.OnDestinationFailure)

	_, err = ConfigFromOptions(with("sink.destination-failure", "skip"))
	var oe *OptionError
	require.True(t, errors.As(err, &oe), "%v", err)
	assert.Equal(t, "sink.destination-failure", oe.Key)
	assert.Contains(t, err.Error(), "accepted: fail, isolate")

	_, err = ConfigFromOptions(with("sink.destination-failure", "isolate", "sink.delivery-guarantee", "exactly-once"))
	require.True(t, errors.As(err, &oe), "%v", err)
	assert.Equal(t, "sink.destination-failure", oe.Key)
	assert.Contains(t, err.Error(), "sink.destination-failure DestinationIsolate requires sink.delivery-guarantee AtLeastOnce")
}
