package cloudtasksio

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// hungCreator never answers the first hang calls: each waits until its context ends, as a
// hung regional endpoint would hold a call. It records when each call started and the
// deadline its context carried.
type hungCreator struct {
	hang int

	mu        sync.Mutex
	starts    []time.Time
	deadlines []time.Time
}

func (c *hungCreator) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	c.mu.Lock()
	n := len(c.starts)
	c.starts = append(c.starts, time.Now())
	dl, _ := ctx.Deadline()
	c.deadlines = append(c.deadlines, dl)
	c.mu.Unlock()
	if n < c.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return req.GetTask(), nil
}

// attemptTimeoutWriteFn returns a set-up at-least-once write DoFn with writer options w, its
// bundle's engine sending through c.
func attemptTimeoutWriteFn(t *testing.T, w WriterOptions, c *hungCreator) *writeFn {
	t.Helper()
	cfg := Config{Queue: Queue{Project: "p", Location: "l", Name: ownSetting("attempt-timeout")},
		HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, EmulatorEndpoint: "127.0.0.1:1", Writer: w}
	spec, err := compile(cfg, typeOf(eoOrder{}))
	require.NoError(t, err)
	spec.Writer.QueuePreflight = PreflightOff // nothing serves 127.0.0.1:1
	f := &writeFn{Spec: spec}
	require.NoError(t, f.Setup())
	f.start(c, engineOptions(f.Spec.Writer), f)
	return f
}

// TestAHungCreateIsCutAtTheAttemptTimeoutAndRetried sends one element to an endpoint that
// never answers its first two calls: with AttemptTimeout 2s each is cut after 2s and counted
// as DEADLINE_EXCEEDED, retried after the transient backoff, and the third call creates the
// task.
func TestAHungCreateIsCutAtTheAttemptTimeoutAndRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hungCreator{hang: 2}
		f := attemptTimeoutWriteFn(t, WriterOptions{AttemptTimeout: 2 * time.Second,
			RecoveryInitialBackoff: 100 * time.Millisecond, RecoveryMaxBackoff: 100 * time.Millisecond}, c)
		ctx, counters := metricsContext()
		start := time.Now()
		require.NoError(t, f.ProcessElement(ctx, 0, eoOrder{ID: "1", Key: "k1"}, discardDeadLetters))
		require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))

		require.Len(t, c.starts, 3)
		for i, s := range c.starts {
			assert.Equal(t, s.Add(2*time.Second), c.deadlines[i], "attempt %d ran under the 2s timeout", i+1)
		}
		for i := 1; i < 3; i++ {
			wait := c.starts[i].Sub(c.starts[i-1]) - 2*time.Second
			assert.True(t, wait >= 75*time.Millisecond && wait <= 125*time.Millisecond,
				"attempt %d came a backoff of 100ms ±25%% after the cut, got %v", i+1, wait)
		}
		assert.Less(t, time.Since(start), 5*time.Second, "not the client's 20s per attempt")
		got := counters()
		assert.Equal(t, int64(2), got[MetricErrorClass("DEADLINE_EXCEEDED")], "each cut attempt is a failed attempt")
		assert.Equal(t, int64(1), got[MetricRecordsSend])
	})
}

func TestAHungCreateFailsTheBundleWhenTheTransientBudgetIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hungCreator{hang: 100}
		f := attemptTimeoutWriteFn(t, WriterOptions{AttemptTimeout: time.Second, RecoveryMaxAttempts: 3,
			RecoveryInitialBackoff: 100 * time.Millisecond, RecoveryMaxBackoff: 100 * time.Millisecond}, c)
		ctx, _ := metricsContext()
		require.NoError(t, f.ProcessElement(ctx, 0, eoOrder{ID: "1", Key: "k1"}, discardDeadLetters))
		err := f.FinishBundle(ctx, discardDeadLetters)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "DEADLINE_EXCEEDED after 3 attempt(s), transient retry budget of 3 attempts exhausted")
		assert.Len(t, c.starts, 3)
	})
}

func TestWithoutAnAttemptTimeoutTheClientsOwnApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hungCreator{}
		f := attemptTimeoutWriteFn(t, WriterOptions{}, c)
		ctx, _ := metricsContext()
		require.NoError(t, f.ProcessElement(ctx, 0, eoOrder{ID: "1", Key: "k1"}, discardDeadLetters))
		require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))
		require.Len(t, c.deadlines, 1)
		assert.True(t, c.deadlines[0].IsZero(), "no deadline of the sink's: the client sets its 20s")
	})
}

func TestABadAttemptTimeoutIsAnErrorNamingTheField(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func(*Config)
		want []string
	}{
		{"negative", func(c *Config) { c.Writer.AttemptTimeout = -time.Second },
			[]string{"WriterOptions.AttemptTimeout is -1s; it must lie in 0..30m0s (0 means the client's own 20s)"}},
		{"too long", func(c *Config) { c.Writer.AttemptTimeout = 31 * time.Minute },
			[]string{"WriterOptions.AttemptTimeout is 31m0s; it must lie in 0..30m0s"}},
		{"with exactly-once", func(c *Config) {
			c.Writer.AttemptTimeout = 5 * time.Second
			c.Delivery = ExactlyOnce
		}, []string{"WriterOptions.AttemptTimeout 5s is set with exactly-once delivery", "StagedOptions.RequestTimeout"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/orders"}}
			c.cfg(&cfg)
			err := cfg.validate()
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestTheAttemptTimeoutOptionKey(t *testing.T) {
	opts := func(kv ...string) map[string]string {
		m := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cfg, err := ConfigFromOptions(opts())
	require.NoError(t, err)
	assert.Zero(t, cfg.Writer.AttemptTimeout, "left out: the client's own timeout")
	cfg, err = ConfigFromOptions(opts("sink.attempt-timeout", "5s"))
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, cfg.Writer.AttemptTimeout)
	cfg, err = ConfigFromOptions(opts("sink.attempt-timeout", "90 s"))
	require.NoError(t, err)
	assert.Equal(t, 90*time.Second, cfg.Writer.AttemptTimeout, "the Flink connector's duration syntax")

	for _, c := range []struct {
		kv   []string
		want []string
	}{
		{[]string{"sink.attempt-timeout", "0s"}, []string{"sink.attempt-timeout", "accepted: a positive duration"}},
		{[]string{"sink.attempt-timeout", "soon"}, []string{"sink.attempt-timeout", `value "soon" is not a duration`}},
		{[]string{"sink.attempt-timeout", "31m"}, []string{"sink.attempt-timeout", "must lie in 0..30m0s"}},
		{[]string{"sink.attempt-timeout", "5s", "sink.delivery-guarantee", "exactly-once"},
			[]string{"sink.attempt-timeout 5s is set with exactly-once delivery", "sink.staged.request-timeout"}},
	} {
		_, err := ConfigFromOptions(opts(c.kv...))
		require.Error(t, err, c.kv)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w, c.kv)
		}
	}
}
