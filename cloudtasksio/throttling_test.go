package cloudtasksio

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// throttlingMsecs reads the throttling counter Dataflow reads from ctx's metrics, and whether
// it was reported at all.
func throttlingMsecs(ctx context.Context) (v int64, reported bool) {
	_ = metrics.Extractor{SumInt64: func(l metrics.Labels, x int64) {
		if l.Namespace() == ThrottlingMetricsNamespace && l.Name() == MetricThrottlingMsecs {
			v, reported = v+x, true
		}
	}}.ExtractFrom(metrics.GetStore(ctx))
	return v, reported
}

// throttlingWriteFn returns a set-up at-least-once write DoFn for a queue of its own, whose
// bundles the test starts with its own creators.
func throttlingWriteFn(t *testing.T, name string, adaptive AdaptiveConcurrency) *writeFn {
	t.Helper()
	cfg := Config{Queue: Queue{Project: "p", Location: "l", Name: ownSetting(name)},
		HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, EmulatorEndpoint: "127.0.0.1:1",
		Writer: WriterOptions{AdaptiveConcurrency: adaptive}}
	spec, err := compile(cfg, typeOf(eoOrder{}))
	require.NoError(t, err)
	spec.Writer.QueuePreflight = PreflightOff // nothing serves 127.0.0.1:1
	f := &writeFn{Spec: spec}
	require.NoError(t, f.Setup())
	return f
}

// writeBundle runs one bundle of n elements through f, sending through creator, and returns
// the bundle's error.
func writeBundle(ctx context.Context, f *writeFn, creator *fakeCreator, bundle, n int) error {
	f.start(creator, engineOptions(f.Spec.Writer), f)
	for i := range n {
		id := fmt.Sprintf("%d-%d", bundle, i)
		if err := f.ProcessElement(ctx, 0, eoOrder{ID: id, Key: id}, discardDeadLetters); err != nil {
			return err
		}
	}
	return f.FinishBundle(ctx, discardDeadLetters)
}

// TestTheThrottlingCounterCountsTheTimeCreatesAreHeldUnderAQuota drives the at-least-once write
// DoFn through bundles: a create refused with a RetryInfo delay of 3s holds the bundle's
// creates for 3s, which the bundle adds to Dataflow's throttling counter when it ends; a
// bundle that nothing throttles adds nothing.
func TestTheThrottlingCounterCountsTheTimeCreatesAreHeldUnderAQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := throttlingWriteFn(t, "throttling-counter", AdaptiveConcurrencyDefault)
		ctx, counters := metricsContext()

		start := time.Now()
		require.NoError(t, writeBundle(ctx, f, &fakeCreator{script: []error{throttledFor(t, 3*time.Second)}}, 1, 4))
		require.Equal(t, 3*time.Second, time.Since(start), "the bundle waited out the delay")
		got, reported := throttlingMsecs(ctx)
		assert.True(t, reported)
		assert.Equal(t, int64(3000), got, "the 3s the creates were held")

		require.NoError(t, writeBundle(ctx, f, &fakeCreator{}, 2, 200))
		got, _ = throttlingMsecs(ctx)
		assert.Equal(t, int64(3000), got, "a bundle nothing throttled adds 0, however slow start held its creates")
		assert.Equal(t, int64(204), counters()[MetricRecordsSend])
	})
}

func TestAFailedBundleReportsItsThrottledTimeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := throttlingWriteFn(t, "throttling-failed", AdaptiveConcurrencyDefault)
		ctx, _ := metricsContext()
		denied := status.Error(codes.PermissionDenied, "no permission")
		err := writeBundle(ctx, f, &fakeCreator{script: []error{throttledFor(t, 2*time.Second), denied}}, 1, 3)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PERMISSION_DENIED")
		got, _ := throttlingMsecs(ctx)
		assert.Equal(t, int64(2000), got, "held for the delay until the retry failed the bundle, counted once")
	})
}

func TestTheThrottlingCounterStaysZeroWithAdaptiveConcurrencyOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := throttlingWriteFn(t, "throttling-off", AdaptiveConcurrencyOff)
		ctx, _ := metricsContext()
		require.NoError(t, writeBundle(ctx, f, &fakeCreator{script: []error{throttledFor(t, 3*time.Second)}}, 1, 4))
		_, reported := throttlingMsecs(ctx)
		assert.False(t, reported, "the sink held nothing under the quota: it retried after its backoff")
	})
}
