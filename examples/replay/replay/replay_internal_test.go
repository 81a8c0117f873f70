package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	beamlog "github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

const (
	testTopic = "projects/p/topics/dead-letters"
	testSub   = "projects/p/subscriptions/replay"
)

// newSubscription starts a pstest server with testTopic and testSub, and publishes n dead
// letters to it.
func newSubscription(t *testing.T, n int) *pstest.Server {
	t.Helper()
	srv := pstest.NewServer()
	t.Cleanup(func() { srv.Close() })
	_, err := srv.GServer.CreateTopic(t.Context(), &pubsubpb.Topic{Name: testTopic})
	require.NoError(t, err)
	_, err = srv.GServer.CreateSubscription(t.Context(), &pubsubpb.Subscription{Name: testSub, Topic: testTopic, AckDeadlineSeconds: 10})
	require.NoError(t, err)
	for range n {
		srv.Publish(testTopic, nil, map[string]string{pubsubdl.AttrConnector: "cloudtasks", pubsubdl.AttrCode: "INVALID_ARGUMENT"})
	}
	return srv
}

func metricsContext() (context.Context, func() map[string]int64) {
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "transform")
	return ctx, func() map[string]int64 {
		out := map[string]int64{}
		_ = metrics.Extractor{SumInt64: func(l metrics.Labels, v int64) { out[l.Name()] += v }}.ExtractFrom(metrics.GetStore(ctx))
		return out
	}
}

// The reader stops pulling a third of the way into the ack deadline it set, whatever is left:
// the Write needs the rest of it, and a message offered again while the run still pulled
// would come with a new ack id the run does not use.
func TestTheReaderStopsPullingAThirdOfTheWayIntoTheAckDeadline(t *testing.T) {
	srv := newSubscription(t, 3)
	start := time.Unix(1_000_000, 0)
	calls := 0
	f := &pullFn{Subscription: testSub, Endpoint: srv.Addr, EmptyPulls: 1_000, now: func() time.Time {
		calls++
		if calls > 10 {
			t.Error("the reader pulls on past its window")
			return start.Add(time.Hour)
		}
		return start.Add(time.Duration(calls-1) * (pullWindow / 2))
	}}
	ctx, counters := metricsContext()
	var got []pulled
	require.NoError(t, f.ProcessElement(ctx, nil, func(_ beam.EventTime, p pulled) { got = append(got, p) }))
	require.Len(t, got, 3, "what the first pull returned is read")
	for _, p := range got {
		assert.Equal(t, start.Add(ackExtension*time.Second).UnixNano(), p.AckBy, "the ack deadline is the extension's, from the pull")
		assert.NotEmpty(t, p.AckID)
	}
	assert.Equal(t, int64(3), counters()[MetricRead])
	assert.LessOrEqual(t, calls, 4, "the empty pulls that would follow are not made")
}

// An ack sent after its message's ack deadline may come too late: it is sent, but counted
// apart, so a run that took too long says so.
func TestAnAckAfterItsDeadlineIsCountedLate(t *testing.T) {
	srv := newSubscription(t, 2)
	resp, err := srv.GServer.Pull(t.Context(), &pubsubpb.PullRequest{Subscription: testSub, MaxMessages: 10})
	require.NoError(t, err)
	require.Len(t, resp.GetReceivedMessages(), 2)
	now := time.Unix(2_000_000, 0)
	f := &ackFn{Subscription: testSub, Endpoint: srv.Addr, now: func() time.Time { return now }}
	ctx, counters := metricsContext()
	none := func(*deadletter.FailedElement) bool { return false }
	f.StartBundle(ctx, none)
	require.NoError(t, f.ProcessElement(ctx, pendingAck{AckID: resp.GetReceivedMessages()[0].GetAckId(), AckBy: now.Add(time.Minute).UnixNano()}, none))
	require.NoError(t, f.ProcessElement(ctx, pendingAck{AckID: resp.GetReceivedMessages()[1].GetAckId(), AckBy: now.Add(-time.Second).UnixNano()}, none))
	require.NoError(t, f.FinishBundle(ctx, none))
	assert.Equal(t, int64(1), counters()[MetricAcknowledged])
	assert.Equal(t, int64(1), counters()[MetricAckLate])
	for _, m := range srv.Messages() {
		assert.Positive(t, m.Acks, "both acks were sent")
	}
}

// A topic that several sinks share holds dead letters that are not the replay's: another
// connector's, or those of a Write to another queue. The reader leaves them on the
// subscription (no ack, no nack: their ack deadline lapses, for a later run), counts them, and
// logs the first few of them and one summary line.
func TestTheReaderLeavesDeadLettersThatAreNotItsOwnOnTheSubscription(t *testing.T) {
	const queue = "projects/p/locations/l/queues/orders"
	srv := newSubscription(t, 0)
	publish := func(n int, attrs map[string]string) {
		for range n {
			srv.Publish(testTopic, []byte("payload"), attrs)
		}
	}
	publish(2, map[string]string{pubsubdl.AttrConnector: cloudtasksio.Connector, pubsubdl.AttrDestination: queue})
	publish(20, map[string]string{pubsubdl.AttrConnector: "bigquery", pubsubdl.AttrDestination: queue})
	publish(1, map[string]string{pubsubdl.AttrConnector: cloudtasksio.Connector, pubsubdl.AttrDestination: "projects/p/locations/l/queues/refunds"})
	publish(1, map[string]string{pubsubdl.AttrConnector: strings.Repeat("c", 1000), pubsubdl.AttrDestination: queue})
	logs := captureLogs(t)
	f := &pullFn{Subscription: testSub, Endpoint: srv.Addr, EmptyPulls: 1, Queue: queue}
	ctx, counters := metricsContext()
	var got []pulled
	require.NoError(t, f.ProcessElement(ctx, nil, func(_ beam.EventTime, p pulled) { got = append(got, p) }))

	require.Len(t, got, 2, "only the replay's own dead letters go on")
	for _, p := range got {
		assert.Equal(t, queue, p.DeadLetter.Destination)
	}
	assert.Equal(t, map[string]int64{MetricRead: 24, MetricNotReplayable: 22, MetricNotOwn: 22}, counters())
	for _, m := range srv.Messages() {
		assert.Zero(t, m.Acks, "nothing is acknowledged by the reader")
		for _, mod := range m.Modacks {
			assert.Equal(t, int32(ackExtension), mod.AckDeadline, "extended, never nacked")
		}
	}
	lines := logLines(logs, "level=WARN msg=\"replay:")
	require.Len(t, lines, maxLeftLines+1, "the first few, then one summary line")
	assert.Contains(t, lines[maxLeftLines], "12 more dead letters were left on the subscription without a line each, 22 in this bundle")
	for _, line := range lines {
		assert.Less(t, len(line), 600, "bounded")
		assert.NotContains(t, line, "payload")
	}
	// (The log's text handler escapes the quotes.)
	assert.Contains(t, logs.String(), `it comes from connector \"bigquery\", not \"cloudtasks\"`)
	assert.Equal(t, `it is for queue "projects/p/locations/l/queues/refunds", not the replay's Write queue `+queue,
		notOwn(deadletter.FailedElement{Connector: cloudtasksio.Connector, Destination: "projects/p/locations/l/queues/refunds"}, queue))

	// A Write with a QueueFn takes the dead letters of every queue, not another connector's.
	srv = newSubscription(t, 0)
	publish(1, map[string]string{pubsubdl.AttrConnector: cloudtasksio.Connector, pubsubdl.AttrDestination: "projects/p/locations/l/queues/refunds"})
	publish(1, map[string]string{pubsubdl.AttrConnector: "bigquery", pubsubdl.AttrDestination: queue})
	f = &pullFn{Subscription: testSub, Endpoint: srv.Addr, EmptyPulls: 1}
	got = got[:0]
	require.NoError(t, f.ProcessElement(ctx, nil, func(_ beam.EventTime, p pulled) { got = append(got, p) }))
	require.Len(t, got, 1)
	assert.Equal(t, "projects/p/locations/l/queues/refunds", got[0].DeadLetter.Destination)
}

// captureLogs sends what Beam's log package writes into a buffer for the rest of the test.
func captureLogs(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	saved := slog.Default()
	beamlog.SetLogger(&beamlog.Structural{})
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(saved) })
	return &buf
}

// logLines returns the lines of buf that contain containing.
func logLines(buf *bytes.Buffer, containing string) []string {
	var out []string
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, containing) {
			out = append(out, line)
		}
	}
	return out
}

// unprintable panics with itself from its String method: fmt recovers the first panic, but
// not the one raised while it prints that panic's own value.
type unprintable struct{}

func (unprintable) String() string { panic(unprintable{}) }

// fixOrPanic keeps "ok…" elements and panics on the others, with an unprintable value for
// "nested…" and with a long error naming the element otherwise.
func fixOrPanic(_ deadletter.FailedElement, s string) (string, bool) {
	switch {
	case strings.HasPrefix(s, "ok"):
		return s, true
	case strings.HasPrefix(s, "nested"):
		panic(unprintable{})
	}
	panic(errors.New("cannot fix " + s + strings.Repeat(" and more", 200)))
}

// pulledString is a dead letter read from the subscription whose element is s.
func pulledString(t *testing.T, s string) pulled {
	t.Helper()
	elem, typ, err := deadletter.EncodeElement(s)
	require.NoError(t, err)
	return pulled{AckID: "ack-" + s, DeadLetter: deadletter.FailedElement{Connector: cloudtasksio.Connector, Code: "INVALID_ARGUMENT",
		Destination: "projects/p/locations/l/queues/q", Payload: []byte("secret-payload"), Element: elem, ElementType: typ}}
}

// A fix function that panics on a dead letter costs that dead letter, not the replay: it is
// counted, logged without its payload (where Fix panicked once per bundle), not acknowledged,
// and the others go on. A panic value that cannot even be formatted does not escape either.
func TestAFixThatPanicsLeavesItsDeadLetterOnTheSubscriptionAndTheReplayGoesOn(t *testing.T) {
	fix, _, err := checkFix(fixOrPanic, reflect.TypeFor[string]())
	require.NoError(t, err)
	f := &fixFn{Elem: beam.EncodedType{T: reflect.TypeFor[string]()}, Fix: fix}
	f.Setup()
	logs := captureLogs(t)
	ctx, counters := metricsContext()
	var kept []any
	var acked []string
	emit := func(_ beam.EventTime, x beam.X) { kept = append(kept, x) }
	ack := func(a pendingAck) { acked = append(acked, a.AckID) }

	f.StartBundle(ctx, emit, ack)
	for _, s := range []string{"ok-1", "nested", "bad-1", "ok-2"} {
		require.NotPanics(t, func() { f.ProcessElement(ctx, 0, pulledString(t, s), emit, ack) }, s)
	}
	f.FinishBundle(ctx, emit, ack)
	assert.Equal(t, []any{"ok-1", "ok-2"}, kept)
	assert.Equal(t, []string{"ack-ok-1", "ack-ok-2"}, acked, "what Fix panicked on is not acknowledged")
	assert.Equal(t, map[string]int64{MetricReplayed: 2, MetricNotReplayable: 2, MetricFixPanicked: 2}, counters())
	lines := logLines(logs, "replay: Fix panicked")
	require.Len(t, lines, 2, "a line each")
	assert.Contains(t, lines[0], "a panic value of type replay.unprintable that cannot be formatted")
	assert.Contains(t, lines[0], "where:")
	assert.Contains(t, lines[0], "replay.fixOrPanic (replay_internal_test.go:", "where Fix panicked")
	assert.Contains(t, lines[1], "cannot fix bad-1 and more")
	assert.Contains(t, lines[1], "...[truncated]", "the value is cut")
	assert.NotContains(t, lines[1], "where:", "the stack once per bundle")
	for _, line := range lines {
		assert.Less(t, len(line), 4096, "bounded")
		assert.NotContains(t, line, "secret-payload")
	}

	// A bundle where Fix panics on every dead letter logs the first few and one summary line.
	logs.Reset()
	f.StartBundle(ctx, emit, ack)
	for i := range 3 * maxLeftLines {
		f.ProcessElement(ctx, 0, pulledString(t, fmt.Sprint("bad-", i)), emit, ack)
	}
	f.FinishBundle(ctx, emit, ack)
	require.Len(t, logLines(logs, "replay:"), maxLeftLines+1)
	assert.Contains(t, logs.String(), fmt.Sprintf("%d more dead letters were left on the subscription without a line each, %d in this bundle", 2*maxLeftLines, 3*maxLeftLines))
	assert.Equal(t, int64(2+3*maxLeftLines), counters()[MetricFixPanicked])
	assert.Len(t, acked, 2)
}
