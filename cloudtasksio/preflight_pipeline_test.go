package cloudtasksio_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() { register.Function1x2(pausedOrRedirected) }

// pausedOrRedirected sends orders with an even id to queue "paused", the rest to "redirected".
func pausedOrRedirected(o order) (cloudtasksio.Queue, error) {
	if n, _ := strconv.Atoi(o.ID); n%2 == 0 {
		return cloudtasksio.NewQueue("p", "l", "paused")
	}
	return cloudtasksio.NewQueue("p", "l", "redirected")
}

// TestQueuePreflightInAPipelineWithDynamicQueues runs the preflight where it runs in
// production: on prism, with queues that only a QueueFn knows.
func TestQueuePreflightInAPipelineWithDynamicQueues(t *testing.T) {
	srv := newServer(t)
	var reads atomic.Int64
	srv.Observe("GetQueue", func(cloudtaskstest.Call) { reads.Add(1) })
	for _, q := range []string{"paused", "redirected"} {
		_, err := srv.CreateQueue("projects/p/locations/l/queues/" + q)
		require.NoError(t, err)
	}
	require.NoError(t, srv.PauseQueue("projects/p/locations/l/queues/paused"))
	admin, err := cloudtasks.NewClient(context.Background(), srv.ClientOptions()...)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: "projects/p/locations/l/queues/redirected", HttpTarget: &cloudtaskspb.HttpTarget{
			UriOverride: &cloudtaskspb.UriOverride{Host: proto.String("elsewhere.example.com"), UriOverrideEnforceMode: cloudtaskspb.UriOverride_ALWAYS}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"http_target"}}})
	require.NoError(t, err)

	// The bundle's end does not wait for the reads; it counts what they found if they have
	// ended. Creates slower than a read make sure they have.
	srv.SetLatency(50 * time.Millisecond)
	elems := make([]any, 40)
	for i := range elems {
		elems[i] = order{ID: fmt.Sprint(i), Amount: 1}
	}
	counters, err := run(t, cloudtasksio.Config{QueueFn: pausedOrRedirected,
		HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, EmulatorEndpoint: srv.Addr}, elems)
	require.NoError(t, err)
	assert.Equal(t, int64(40), counters[cloudtasksio.MetricRecordsSend], "warnings do not stop the creates")
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricQueuePreflightPaused])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricQueuePreflightURIOverride])
	assert.Zero(t, counters[cloudtasksio.MetricQueuePreflightSkipped])
	assert.Equal(t, int64(2), reads.Load(), "each queue read once per process")

	// Under PreflightFail the same pipeline fails, naming the paused queue.
	_, err = run(t, cloudtasksio.Config{QueueFn: pausedOrRedirected,
		HTTP:   &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		Writer: cloudtasksio.WriterOptions{QueuePreflight: cloudtasksio.PreflightFail}, EmulatorEndpoint: srv.Addr}, elems)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "projects/p/locations/l/queues/")
	assert.Contains(t, err.Error(), "PreflightFail")
}
