package cloudtasksio_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// TestCreateLatencyAndAttemptsInAPipeline reads the two distributions back from a prism run
// against a server that takes 25ms per create and answers four creates UNAVAILABLE.
func TestCreateLatencyAndAttemptsInAPipeline(t *testing.T) {
	const elements, rejected = 30, 4
	const latency = 25 * time.Millisecond
	srv := newServer(t)
	srv.SetLatency(latency)
	srv.InjectErrors("CreateTask", codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable)

	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Write(s, cloudtasksio.Config{Queue: testQueue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		Writer: fastRetries, EmulatorEndpoint: srv.Addr}, beam.Create(s, orders(elements)...))
	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err)

	got := map[string]metrics.DistributionValue{}
	for _, d := range pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == cloudtasksio.MetricsNamespace }).Distributions() {
		got[d.Name()] = d.Result()
	}
	attempts := int64(srv.Stats().CreateTaskCalls)
	require.Equal(t, int64(elements+rejected), attempts)

	lat := got[cloudtasksio.MetricCreateAttemptLatencyMillis]
	assert.Equal(t, attempts, lat.Count, "one sample per attempt the server answered")
	assert.GreaterOrEqual(t, lat.Min, latency.Milliseconds(), "no call is faster than the server's added latency")
	assert.Less(t, lat.Max, int64(10_000), "and none near the client's timeout")
	assert.GreaterOrEqual(t, lat.Sum, attempts*latency.Milliseconds())

	per := got[cloudtasksio.MetricCreateAttemptsPerTask]
	assert.Equal(t, int64(elements), per.Count, "one sample per created task")
	assert.Equal(t, attempts, per.Sum, "every attempt belongs to one created task")
	assert.Equal(t, int64(1), per.Min)
	assert.LessOrEqual(t, per.Max, int64(1+rejected))
}
