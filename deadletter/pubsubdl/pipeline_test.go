package pubsubdl

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	log.LogLevel = "warn"
	register.Function1x2(stampEventTime)
	register.Function1x1(inflate)
}

func TestMain(m *testing.M) { ptest.Main(m) }

// pipelineEventTime is the event time stampEventTime gives every element.
var pipelineEventTime = time.Date(2026, 3, 4, 5, 6, 7, 89e6, time.UTC)

// stampEventTime gives an element a fixed event time, as a sink's dead-letter output would
// carry the original element's time.
func stampEventTime(fe deadletter.FailedElement) (beam.EventTime, deadletter.FailedElement) {
	return mtime.FromTime(pipelineEventTime), fe
}

func TestToPubSubPipelineOnPrism(t *testing.T) {
	// The output under both its names: this package's, and deadletter.ToPubSub, the design
	// contract's, which finds this package through internal/dlhook.
	for _, way := range []struct {
		name string
		add  func(s beam.Scope, endpoint string, failed beam.PCollection)
	}{
		{"pubsubdl.ToPubSub", func(s beam.Scope, endpoint string, failed beam.PCollection) {
			cfg := DefaultPubSubConfig(testTopic)
			cfg.MaxInFlightMessages = 2
			cfg.EmulatorEndpoint = endpoint
			ToPubSub(s, cfg, failed)
		}},
		{"deadletter.ToPubSub", func(s beam.Scope, endpoint string, failed beam.PCollection) {
			deadletter.ToPubSub(s, deadletter.PubSubConfig{Topic: testTopic, MaxInFlightMessages: 2, EmulatorEndpoint: endpoint}, failed)
		}},
	} {
		t.Run(way.name, func(t *testing.T) { assertPipelinePublishesFive(t, way.add) })
	}
}

// assertPipelinePublishesFive runs a pipeline on prism that adds the Pub/Sub output with add
// for five dead letters, and checks the messages and the metrics.
func assertPipelinePublishesFive(t *testing.T, add func(s beam.Scope, endpoint string, failed beam.PCollection)) {
	srv := newPubSub(t, true)
	var elems []any
	for i := range 5 {
		elems = append(elems, deadletter.FailedElement{
			Connector:   "cloudtasks",
			Destination: "projects/p/locations/l/queues/q",
			Payload:     fmt.Appendf(nil, "task-%d", i),
			Code:        "INVALID_ARGUMENT",
			Error:       fmt.Sprintf("rejected %d", i),
		})
	}
	p, s := beam.NewPipelineWithRoot()
	failed := beam.ParDo(s, stampEventTime, beam.Create(s, elems...))
	add(s, srv.Addr, failed)

	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err)

	var payloads []string
	for _, m := range srv.Messages() {
		payloads = append(payloads, string(m.Data))
		i := len(m.Data) - 1
		a := m.Attributes
		assert.Equal(t, "cloudtasks", a[AttrConnector])
		assert.Equal(t, "projects/p/locations/l/queues/q", a[AttrDestination])
		assert.Equal(t, "INVALID_ARGUMENT", a[AttrCode])
		assert.Equal(t, "rejected "+string(m.Data[i]), a[AttrError])
		assert.Equal(t, "2026-03-04T05:06:07.089Z", a[AttrEventTime])
		assert.NotEmpty(t, a[AttrWorker])
		assert.NotEmpty(t, a[AttrBundle])
	}
	sort.Strings(payloads)
	assert.Equal(t, []string{"task-0", "task-1", "task-2", "task-3", "task-4"}, payloads)

	ours := func(r metrics.SingleResult) bool { return r.Namespace() == "deadletter" }
	res := pr.Metrics().Query(ours)
	var published int64
	for _, c := range res.Counters() {
		if c.Name() == "messagesPublished" {
			published += c.Result()
		}
	}
	assert.Equal(t, int64(5), published)
	var waits int64
	for _, d := range res.Distributions() {
		if d.Name() == "flushWaitMillis" {
			waits += d.Result().Count
		}
	}
	assert.GreaterOrEqual(t, waits, int64(3), "two waits at the bound of 2, one in FinishBundle")
	var gauges int
	for _, g := range res.Gauges() {
		if g.Name() == "messagesOutstanding" {
			gauges++
			assert.Zero(t, g.Result().Value, "nothing outstanding after the bundle")
		}
	}
	assert.Positive(t, gauges)
}

// inflate makes a dead letter of size MiB of payload, too large for Pub/Sub when size > 10.
func inflate(size int) deadletter.FailedElement {
	return deadletter.FailedElement{Connector: "cloudtasks", Code: "INVALID_ARGUMENT", Error: "too big",
		Payload: make([]byte, size<<20), Element: []byte("elem"), ElementType: "string"}
}

func TestAReducedMessageIsCountedOnPrism(t *testing.T) {
	srv := newPubSub(t, true)
	p, s := beam.NewPipelineWithRoot()
	cfg := DefaultPubSubConfig(testTopic)
	cfg.EmulatorEndpoint = srv.Addr
	ToPubSub(s, cfg, beam.ParDo(s, inflate, beam.Create(s, 11, 0)))
	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err, "an 11 MiB dead letter does not fail the bundle")

	counters := map[string]int64{}
	for _, c := range pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == "deadletter" }).Counters() {
		counters[c.Name()] += c.Result()
	}
	assert.Equal(t, int64(2), counters["messagesPublished"])
	assert.Equal(t, int64(1), counters["messagesReduced"])
	omitted := map[string]int{}
	for _, m := range srv.Messages() {
		omitted[m.Attributes[AttrOmitted]]++
	}
	assert.Equal(t, map[string]int{"": 1, OmittedPayload: 1}, omitted)
}
