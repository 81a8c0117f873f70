package cloudtasksio_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	register.Function1x1(summarizeDeadLetter)
}

// summarizeDeadLetter describes a dead letter without its (possibly huge) payload: the code,
// the destination, the task's body size and whether the error text stays short.
func summarizeDeadLetter(fe deadletter.FailedElement) string {
	body := -1
	if task, err := cloudtasksio.FailedTask(fe); err == nil {
		body = len(task.GetHttpRequest().GetBody())
	}
	return fmt.Sprintf("%s %s body=%d short-error=%v", fe.Code, fe.Destination, body, len(fe.Error) < 2048)
}

// bigOrder is an order whose JSON body is 5 MiB: over the 1 MiB any task may have, and over
// gRPC's 4 MiB default message limit.
func bigOrder() order { return order{ID: strings.Repeat("b", 5<<20), Amount: 5} }

// countCreates counts the CreateTask calls srv answers, and the largest request it read.
func countCreates(srv *cloudtaskstest.Server) (calls, largest *atomic.Int64) {
	calls, largest = &atomic.Int64{}, &atomic.Int64{}
	srv.Observe("CreateTask", func(c cloudtaskstest.Call) {
		calls.Add(1)
		if req, ok := c.Request.(*cloudtaskspb.CreateTaskRequest); ok {
			n := int64(proto.Size(req))
			for {
				old := largest.Load()
				if n <= old || largest.CompareAndSwap(old, n) {
					break
				}
			}
		}
	})
	return calls, largest
}

// TestAnOversizedTaskIsDeadLetteredWithoutBeingSent: a 5 MiB element once failed its bundle
// under DeadLetter after retrying the transport's RESOURCE_EXHAUSTED as a quota throttle. Now
// it is a TASK_TOO_LARGE dead letter carrying its task, it is never sent, and the other
// elements are created.
func TestAnOversizedTaskIsDeadLetteredWithoutBeingSent(t *testing.T) {
	srv := newServer(t)
	calls, largest := countCreates(srv)
	cfg := httpConfig(srv)
	cfg.OnFailure = cloudtasksio.DeadLetter
	bodySize := len(`{"id":"","amount":5}`) + 5<<20
	counters, err := run(t, cfg, []any{order{ID: "1", Amount: 1}, bigOrder(), order{ID: "2", Amount: 2}}, func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, summarizeDeadLetter, dl),
			fmt.Sprintf("TASK_TOO_LARGE projects/p/locations/l/queues/q body=%d short-error=true", bodySize))
	})
	require.NoError(t, err, "one oversized element must not fail its bundle under DeadLetter")
	assert.Len(t, srv.Tasks(testQueue.Path()), 2)
	assert.Equal(t, int64(2), calls.Load(), "the oversized task is never sent")
	assert.Less(t, largest.Load(), int64(1<<20))
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSend])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricTasksTooLarge])
	assert.Zero(t, counters[cloudtasksio.MetricErrorClass("RESOURCE_EXHAUSTED")], "no attempt, so no throttle")
}

func TestAnOversizedTaskIsCountedAndDroppedUnderLogAndDrop(t *testing.T) {
	srv := newServer(t)
	cfg := httpConfig(srv)
	cfg.OnFailure = cloudtasksio.LogAndDrop
	counters, err := run(t, cfg, []any{order{ID: "1", Amount: 1}, bigOrder()}, func(s beam.Scope, dl beam.PCollection) { passert.Empty(s, dl) })
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(testQueue.Path()), 1)
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Equal(t, int64(1), counters[cloudtasksio.MetricTasksTooLarge])
}

func TestAnOversizedTaskFailsTheBundleUnderFailBundleNamingItsSize(t *testing.T) {
	srv := newServer(t)
	calls, _ := countCreates(srv)
	_, err := run(t, httpConfig(srv), []any{bigOrder()})
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "TASK_TOO_LARGE")
	assert.Regexp(t, `is \d+ bytes in wire format, over the 1048576-byte \(1 MiB\) limit`, msg)
	assert.NotContains(t, msg, "bbbbbbbbbb", "the payload is not in the error")
	assert.NotContains(t, msg, "RESOURCE_EXHAUSTED")
	assert.Zero(t, calls.Load())
}

// TestATaskBetweenTheTwoSizeLimitsIsLeftToTheService: 500 KiB is over the 100 KB HTTP task
// limit and under 1 MiB; the sink sends it and the service's answer decides (cloudtaskstest,
// like Cloud Tasks for HTTP tasks, answers INVALID_ARGUMENT).
func TestATaskBetweenTheTwoSizeLimitsIsLeftToTheService(t *testing.T) {
	srv := newServer(t)
	calls, _ := countCreates(srv)
	cfg := httpConfig(srv)
	cfg.OnFailure = cloudtasksio.DeadLetter
	counters, err := run(t, cfg, []any{order{ID: strings.Repeat("m", 500<<10)}}, func(s beam.Scope, dl beam.PCollection) {
		passert.Equals(s, beam.ParDo(s, summarizeDeadLetter, dl),
			fmt.Sprintf("INVALID_ARGUMENT projects/p/locations/l/queues/q body=%d short-error=true", len(`{"id":"","amount":0}`)+500<<10))
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), calls.Load(), "sent: the service decides")
	assert.Zero(t, counters[cloudtasksio.MetricTasksTooLarge])
}

// TestAnOversizedTaskFailsTheExactlyOnceBundleNamingItsSize: in exactly-once mode every
// failure fails the bundle; the error says how large the task is and what the limit is.
func TestAnOversizedTaskFailsTheExactlyOnceBundleNamingItsSize(t *testing.T) {
	srv := newServer(t)
	srv.SetTombstoneTTL(testQueue.Path(), 2*time.Hour)
	calls, _ := countCreates(srv)
	cfg := httpConfig(srv)
	cfg.Delivery = cloudtasksio.ExactlyOnce
	_, err := run(t, cfg, []any{bigOrder()})
	require.Error(t, err)
	assert.Regexp(t, `is \d+ bytes in wire format with its name; the limit is 100000`, err.Error())
	assert.NotContains(t, err.Error(), "bbbbbbbbbb")
	assert.Zero(t, calls.Load())
}
