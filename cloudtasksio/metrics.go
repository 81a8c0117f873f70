package cloudtasksio

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// metricsNamespace is the Beam metrics namespace of every metric the sink reports.
const metricsNamespace = "cloudtasksio"

// sinkMetrics are the sink's Beam metrics. Counters count elements, not attempts, except
// errorClass.<CODE>.errors, which counts every failed attempt by its outermost status.
type sinkMetrics struct {
	recordsSend      beam.Counter // numRecordsSend: elements Cloud Tasks accepted
	bytesSend        beam.Counter // numBytesSend: task wire bytes of accepted elements
	recordsErrors    beam.Counter // numRecordsSendErrors: elements that reached the failure policy
	recordsSkipped   beam.Counter // recordsSkipped: elements the serializer skipped
	deduplicated     beam.Counter // tasksDeduplicated: ALREADY_EXISTS answers for named tasks
	inFlight, parked beam.Gauge   // inFlightTasks, parkedTasks
	perDestination   bool         // per-queue counters enabled
	errorClasses     map[string]beam.Counter
}

func newSinkMetrics(perDestination bool) *sinkMetrics {
	return &sinkMetrics{
		recordsSend:    beam.NewCounter(metricsNamespace, "numRecordsSend"),
		bytesSend:      beam.NewCounter(metricsNamespace, "numBytesSend"),
		recordsErrors:  beam.NewCounter(metricsNamespace, "numRecordsSendErrors"),
		recordsSkipped: beam.NewCounter(metricsNamespace, "recordsSkipped"),
		deduplicated:   beam.NewCounter(metricsNamespace, "tasksDeduplicated"),
		inFlight:       beam.NewGauge(metricsNamespace, "inFlightTasks"),
		parked:         beam.NewGauge(metricsNamespace, "parkedTasks"),
		perDestination: perDestination,
		errorClasses:   map[string]beam.Counter{},
	}
}

func (m *sinkMetrics) created(ctx context.Context, queue string, bytes int, deduplicated bool) {
	m.recordsSend.Inc(ctx, 1)
	m.bytesSend.Inc(ctx, int64(bytes))
	if deduplicated {
		m.deduplicated.Inc(ctx, 1)
	}
	if m.perDestination {
		beam.NewCounter(metricsNamespace, "destination."+queue+".recordsSend").Inc(ctx, 1)
	}
}

func (m *sinkMetrics) failed(ctx context.Context, queue string) {
	m.recordsErrors.Inc(ctx, 1)
	if m.perDestination && queue != "" {
		beam.NewCounter(metricsNamespace, "destination."+queue+".sendErrors").Inc(ctx, 1)
	}
}

func (m *sinkMetrics) attemptFailed(ctx context.Context, code string) {
	c, ok := m.errorClasses[code]
	if !ok {
		c = beam.NewCounter(metricsNamespace, "errorClass."+code+".errors")
		m.errorClasses[code] = c
	}
	c.Inc(ctx, 1)
}

func (m *sinkMetrics) gauges(ctx context.Context, e interface{ Stats() (int, int) }) {
	inFlight, parked := e.Stats()
	m.inFlight.Set(ctx, int64(inFlight))
	m.parked.Set(ctx, int64(parked))
}
