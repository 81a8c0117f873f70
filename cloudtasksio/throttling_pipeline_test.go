package cloudtasksio_test

import (
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// TestTheThrottlingCounterReachesThePipelineMetrics runs Write on prism while the server
// refuses the first create with a RetryInfo delay of one second, and reads Dataflow's
// throttling counter back from the job's metrics: about the second the creates were held.
// A run that nothing throttles reports none.
func TestTheThrottlingCounterReachesThePipelineMetrics(t *testing.T) {
	throttled := func(t *testing.T, refuse bool) (msecs int64, reported bool) {
		srv := newServer(t)
		if refuse {
			st, err := status.New(codes.ResourceExhausted, "Quota exceeded").
				WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
			require.NoError(t, err)
			srv.InjectError("CreateTask", st.Err())
		}
		p, s := beam.NewPipelineWithRoot()
		cloudtasksio.Write(s, httpConfig(srv), beam.Create(s, orders(20)...))
		pr, err := ptest.RunWithMetrics(p)
		require.NoError(t, err)
		require.Equal(t, 20, srv.Stats().TasksCreated)
		for _, c := range pr.Metrics().Query(func(r metrics.SingleResult) bool {
			return r.Namespace() == cloudtasksio.ThrottlingMetricsNamespace && r.Name() == cloudtasksio.MetricThrottlingMsecs
		}).Counters() {
			msecs, reported = msecs+c.Result(), true
		}
		return msecs, reported
	}

	msecs, reported := throttled(t, true)
	t.Logf("throttling-msecs of a run held by a RetryInfo delay of 1s: %d", msecs)
	assert.True(t, reported, "the counter is in the job's metrics")
	assert.GreaterOrEqual(t, msecs, int64(900), "the creates were held for the delay")
	assert.Less(t, msecs, int64(5000))

	msecs, _ = throttled(t, false)
	assert.Zero(t, msecs, "nothing held the creates of an unthrottled run")
}
