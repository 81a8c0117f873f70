package cloudtasksio

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// throttledFor is a RESOURCE_EXHAUSTED answer asking the caller to wait d.
func throttledFor(t *testing.T, d time.Duration) error {
	st, err := status.New(codes.ResourceExhausted, "Quota exceeded").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	require.NoError(t, err)
	return st.Err()
}

// TestAdaptiveConcurrencyIsSharedByTheCreateDoFnsOfAProcess drives two create DoFn instances
// of one sink, as two bundles of a worker: the first one's create is throttled with a
// RetryInfo delay of 2s. With adaptive concurrency (the default) the second instance's create
// waits for the delay too, because both share the queue's state; with it off it goes at once,
// and the throttled create retries after its own 100ms backoff.
func TestAdaptiveConcurrencyIsSharedByTheCreateDoFnsOfAProcess(t *testing.T) {
	for _, c := range []struct {
		name      string
		setting   AdaptiveConcurrency
		secondAt  time.Duration
		retryFrom time.Duration // the throttled create's retry, within [retryFrom, retryTo]
		retryTo   time.Duration
	}{
		{"default", AdaptiveConcurrencyDefault, 2 * time.Second, 2 * time.Second, 2 * time.Second},
		{"off", AdaptiveConcurrencyOff, 0, 75 * time.Millisecond, 125 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				staged := DefaultStagedOptions()
				staged.VerifyQueueRetention = false
				// A queue of this run alone: the state is process-wide, and other tests (and
				// later runs of this one) must not see this one's pause.
				spec := eoSpec(t, ownSetting("adaptive-shared-"+c.name), eoOrder{}, staged)
				spec.Writer.AdaptiveConcurrency = c.setting
				envs := stageAll(t, spec, eoOrder{ID: "1", Key: "k1"}, eoOrder{ID: "2", Key: "k2"})
				first := &fakeCreator{script: []error{throttledFor(t, 2*time.Second)}}
				second := &fakeCreator{}
				f1 := newStagedCreateFnWith(spec, first)
				f2 := newStagedCreateFnWith(spec, second)
				require.NoError(t, f1.Setup())
				require.NoError(t, f2.Setup())
				ctx := context.Background()
				start := time.Now()

				require.NoError(t, f1.StartBundle(ctx, nil))
				require.NoError(t, f1.ProcessElement(ctx, envs[0], nil))
				synctest.Wait() // the first create has been answered RESOURCE_EXHAUSTED
				require.NoError(t, f2.StartBundle(ctx, nil))
				require.NoError(t, f2.ProcessElement(ctx, envs[1], nil))
				require.NoError(t, f2.FinishBundle(ctx, nil))
				require.NoError(t, f1.FinishBundle(ctx, nil))

				require.Len(t, second.calls, 1)
				assert.Equal(t, c.secondAt, second.calls[0].Sub(start), "the other DoFn instance's create")
				require.Len(t, first.calls, 2)
				retry := first.calls[1].Sub(start)
				assert.True(t, retry >= c.retryFrom && retry <= c.retryTo, "the throttled create retried after %v", retry)
			})
		})
	}
}

func TestAdaptiveConcurrencyStateIsPerClientSetting(t *testing.T) {
	staged := DefaultStagedOptions()
	a := eoSpec(t, "q", eoOrder{}, staged)
	b := eoSpec(t, "q", eoOrder{}, staged)
	assert.Same(t, adaptiveFor(a), adaptiveFor(b), "the same client setting shares")
	b.client.EmulatorEndpoint = "127.0.0.1:2"
	assert.NotSame(t, adaptiveFor(a), adaptiveFor(b), "another endpoint does not")
	b.Writer.AdaptiveConcurrency = AdaptiveConcurrencyOff
	assert.Nil(t, adaptiveFor(b))
	a.Writer.AdaptiveConcurrency = AdaptiveConcurrencyOn
	assert.NotNil(t, adaptiveFor(a))
}

func TestAnUnknownAdaptiveConcurrencyIsAnErrorNamingTheField(t *testing.T) {
	w := DefaultWriterOptions()
	w.AdaptiveConcurrency = AdaptiveConcurrency(7)
	_, err := w.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WriterOptions.AdaptiveConcurrency is 7")
	assert.Equal(t, "AdaptiveConcurrency(7)", AdaptiveConcurrency(7).String())
	assert.Equal(t, "AdaptiveConcurrencyOff", AdaptiveConcurrencyOff.String())
}

func TestTheAdaptiveOptionKey(t *testing.T) {
	base := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
	with := func(v string) map[string]string {
		m := map[string]string{"sink.in-flight.adaptive": v}
		for k, x := range base {
			m[k] = x
		}
		return m
	}
	cfg, err := ConfigFromOptions(base)
	require.NoError(t, err)
	assert.Equal(t, AdaptiveConcurrencyDefault, cfg.Writer.AdaptiveConcurrency)
	for v, want := range map[string]AdaptiveConcurrency{"on": AdaptiveConcurrencyOn, "OFF": AdaptiveConcurrencyOff, "off": AdaptiveConcurrencyOff} {
		cfg, err := ConfigFromOptions(with(v))
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.Writer.AdaptiveConcurrency, v)
	}
	_, err = ConfigFromOptions(with("true"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sink.in-flight.adaptive")
	assert.Contains(t, err.Error(), `value "true" is not accepted; accepted: on, off`)
}

// TestTheAdaptiveLimitGaugeShowsTheThrottledQueue checks the adaptiveConcurrencyLimit gauge:
// slow start's limit while nothing is throttled (from 1 toward the cap), low after
// RESOURCE_EXHAUSTED answers, and not set with adaptive concurrency off.
func TestTheAdaptiveLimitGaugeShowsTheThrottledQueue(t *testing.T) {
	exhausted := status.Error(codes.ResourceExhausted, "Quota exceeded")
	for _, c := range []struct {
		name    string
		setting AdaptiveConcurrency
		script  []error
		check   func(t *testing.T, v int64, set bool)
	}{
		{"not throttled", AdaptiveConcurrencyOn, nil, func(t *testing.T, v int64, set bool) {
			assert.True(t, set)
			// The fake answers at once, so how many creates overlap depends on the scheduler, and
			// a success grows the limit only when the limit was at least half used. Sent one at
			// a time, the first three creates are bound by a limit of 0, 1 and 2 and each grows
			// it; at 3 a lone create no longer does. So 3 is what every schedule reaches (a
			// race-detector run of CI met it once; most runs reach 4 to 8).
			assert.GreaterOrEqual(t, v, int64(3), "slow start's limit grew from 1 while creates succeeded")
			assert.LessOrEqual(t, v, int64(8), "and grows up to the cap, MaxInFlightTasks")
		}},
		{"throttled", AdaptiveConcurrencyOn, []error{exhausted, exhausted, exhausted}, func(t *testing.T, v int64, set bool) {
			assert.True(t, set)
			assert.Less(t, v, int64(8), "the rejections brought the limit below the cap")
			assert.GreaterOrEqual(t, v, int64(1))
		}},
		{"off", AdaptiveConcurrencyOff, []error{exhausted}, func(t *testing.T, _ int64, set bool) {
			assert.False(t, set, "no limit to report")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				staged := DefaultStagedOptions()
				staged.VerifyQueueRetention = false
				spec := eoSpec(t, "adaptive-gauge-"+strings.ReplaceAll(c.name, " ", "-"), eoOrder{}, staged)
				spec.Writer.AdaptiveConcurrency = c.setting
				spec.Writer.MaxInFlightTasks = 8
				var orders []any
				for i := range 8 {
					orders = append(orders, eoOrder{ID: fmt.Sprint(i), Key: fmt.Sprint("k", i)})
				}
				envs := stageAll(t, spec, orders...)
				ctx, counters := metricsContext()
				f := newStagedCreateFnWith(spec, &fakeCreator{script: slices.Clone(c.script)})
				require.NoError(t, f.Setup())
				require.NoError(t, createAll(ctx, f, envs))
				require.Equal(t, int64(8), counters()[MetricRecordsSend])

				var v int64
				var set bool
				_ = metrics.Extractor{GaugeInt64: func(l metrics.Labels, g int64, _ time.Time) {
					if l.Name() == MetricAdaptiveConcurrencyLimit {
						v, set = g, true
					}
				}}.ExtractFrom(metrics.GetStore(ctx))
				c.check(t, v, set)
			})
		})
	}
}

func TestABadAdaptiveStartRateIsAnErrorNamingTheField(t *testing.T) {
	for _, r := range []float64{-1, 0.4, math.NaN(), math.Inf(1), 2e6} {
		w := DefaultWriterOptions()
		w.AdaptiveStartRate = r
		_, err := w.resolve()
		require.Error(t, err, "%v", r)
		assert.Contains(t, err.Error(), "WriterOptions.AdaptiveStartRate is")
		assert.Contains(t, err.Error(), "it must be 0 (slow start) or lie in 0.5..1000000 creates per second")
	}
	w := DefaultWriterOptions()
	w.AdaptiveStartRate = 125
	w.AdaptiveConcurrency = AdaptiveConcurrencyOff
	_, err := w.resolve()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WriterOptions.AdaptiveStartRate 125 is set with WriterOptions.AdaptiveConcurrency off")
	assert.Contains(t, err.Error(), "turn adaptive concurrency on or leave the start rate unset")
	for _, r := range []float64{0, 0.5, 125, 1e6} {
		w := DefaultWriterOptions()
		w.AdaptiveStartRate = r
		got, err := w.resolve()
		require.NoError(t, err, "%v", r)
		assert.Equal(t, r, got.AdaptiveStartRate)
		assert.Equal(t, r, engineOptions(got).StartRate, "the rate reaches the engine")
	}
}

func TestTheAdaptiveStartRateOptionKey(t *testing.T) {
	with := func(kv ...string) map[string]string {
		m := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	const key = "sink.in-flight.adaptive-start-rate"
	cfg, err := ConfigFromOptions(with())
	require.NoError(t, err)
	assert.Zero(t, cfg.Writer.AdaptiveStartRate, "left out: slow start")
	for v, want := range map[string]float64{"125": 125, "62.5": 62.5, "0.5": 0.5, "007.50": 7.5, "1000000": 1e6} {
		cfg, err := ConfigFromOptions(with(key, v))
		require.NoError(t, err, v)
		assert.Equal(t, want, cfg.Writer.AdaptiveStartRate, v)
	}
	bad := map[string]string{
		"0":                            `value "0" is below 0.5`,
		"0.4":                          `value "0.4" is below 0.5`,
		"1000001":                      `value "1000001" is above 1000000`,
		"1" + strings.Repeat("0", 400): `is above 1000000`,
	}
	// What strconv.ParseFloat would read but the key does not: it takes digits and a decimal
	// fraction, as the template's flag does.
	for _, v := range []string{"-5", "+5", "fast", "NaN", "inf", "1e3", ".5", "5.", "1_000", "0x10", " 5", "5 ", "1,5"} {
		bad[v] = fmt.Sprintf("value %q is not a decimal number", v)
	}
	for v, says := range bad {
		_, err := ConfigFromOptions(with(key, v))
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), key, v)
		assert.Contains(t, err.Error(), says, v)
		assert.Contains(t, err.Error(), "creates per second per worker process, a decimal number from 0.5 to 1000000", v)
	}
	_, err = ConfigFromOptions(with(key, "125", "sink.in-flight.adaptive", "off"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), key+" 125 is set with sink.in-flight.adaptive off")
	assert.Contains(t, err.Error(), "leave the start rate unset")
}

// TestAStartRatePacesAQueuesFirstCreates writes five tasks in one bundle with a start rate of
// 50/s: the creates go 20 ms apart from the first, where slow start would send them as fast as
// its floor lets them.
func TestAStartRatePacesAQueuesFirstCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		spec := eoSpec(t, ownSetting("adaptive-start-rate"), eoOrder{}, staged)
		spec.Writer.AdaptiveStartRate = 50
		var orders []any
		for i := range 5 {
			orders = append(orders, eoOrder{ID: fmt.Sprint(i), Key: fmt.Sprint("k", i)})
		}
		envs := stageAll(t, spec, orders...)
		creator := &fakeCreator{}
		f := newStagedCreateFnWith(spec, creator)
		require.NoError(t, f.Setup())
		ctx := context.Background()
		start := time.Now()
		require.NoError(t, f.StartBundle(ctx, nil))
		for _, e := range envs {
			require.NoError(t, f.ProcessElement(ctx, e, nil))
		}
		require.NoError(t, f.FinishBundle(ctx, nil))
		require.Len(t, creator.calls, 5)
		for i, at := range creator.calls {
			// Within a millisecond: the rate grows a little as the first creates succeed.
			assert.InDelta(t, float64(time.Duration(i)*20*time.Millisecond), float64(at.Sub(start)), float64(time.Millisecond), "create %d at %v", i, at.Sub(start))
		}
	})
}
