package cloudtasksio

import (
	"context"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// MetricsNamespace is the Beam metrics namespace of every metric the sink reports. The package
// documentation lists the metrics; read them with the Metric constants, for example
//
//	pr.Metrics().Query(func(r metrics.SingleResult) bool {
//		return r.Namespace() == cloudtasksio.MetricsNamespace && r.Name() == cloudtasksio.MetricRecordsSend
//	})
const MetricsNamespace = "cloudtasksio"

// Names of the sink's metrics in MetricsNamespace. Counters count elements, not attempts,
// except the error-class counters (MetricErrorClass), which count every failed attempt.
const (
	// MetricRecordsSend counts the elements whose task Cloud Tasks accepted (ALREADY_EXISTS
	// for a named task included), once per element however many attempts it took.
	MetricRecordsSend = "numRecordsSend"
	// MetricBytesSend counts the wire bytes of those tasks, once per element.
	MetricBytesSend = "numBytesSend"
	// MetricRecordsSendErrors counts, at least once, the elements that reached the failure
	// policy; exactly once, the envelope whose failure failed the bundle.
	MetricRecordsSendErrors = "numRecordsSendErrors"
	// MetricRecordsSkipped counts the elements a Serializer skipped by returning (nil, nil).
	MetricRecordsSkipped = "recordsSkipped"
	// MetricTasksDeduplicated counts the ALREADY_EXISTS answers for named tasks.
	MetricTasksDeduplicated = "tasksDeduplicated"
	// MetricTasksTooLarge counts the elements whose task was too large to create
	// (CodeTaskTooLarge): over 1 MiB in wire format, so never sent, or refused by the gRPC
	// transport for its size. Each is also counted in MetricRecordsSendErrors.
	MetricTasksTooLarge = "tasksTooLarge"
	// MetricDeadLetterElementsNotEncoded counts the dead letters emitted without their
	// element (deadletter.FailedElement.Element) because the element could not be encoded
	// with its Beam coder; each such dead letter's Error says why.
	MetricDeadLetterElementsNotEncoded = "deadLetterElementsNotEncoded"
	// MetricCreateAttemptLatencyMillis is the distribution of how long each create attempt's
	// CreateTask call took, in whole milliseconds: one sample per attempt, retried or not
	// (backoff waits are not in it; a call the sink cancelled because its bundle had failed
	// is left out). Its count is the number of attempts.
	MetricCreateAttemptLatencyMillis = "createAttemptLatencyMillis"
	// MetricCreateAttemptsPerTask is the distribution of the attempts each accepted task took,
	// the first included: one sample per element counted in MetricRecordsSend.
	MetricCreateAttemptsPerTask = "createAttemptsPerTask"
	// MetricInFlightTasks is the gauge of creates in flight in the reporting DoFn instance.
	MetricInFlightTasks = "inFlightTasks"
	// MetricParkedTasks is the gauge of creates waiting out a retry backoff, or held back by
	// adaptive concurrency (WriterOptions.AdaptiveConcurrency) while their queue is throttled.
	MetricParkedTasks = "parkedTasks"
	// MetricAdaptiveConcurrencyLimit is the gauge of the adaptive concurrency limit
	// (WriterOptions.AdaptiveConcurrency) of the most throttled queue the reporting DoFn
	// instance's bundle wrote to, rounded down: slow start's limit (from 1 up to
	// MaxInFlightTasks) while no queue has been throttled, and once a queue is paced (after a
	// rejection, or from its start with WriterOptions.AdaptiveStartRate) the creates its rate
	// keeps in flight at the measured round trip (at least 1). It is set when a bundle
	// ends, and not at all with adaptive concurrency off.
	MetricAdaptiveConcurrencyLimit = "adaptiveConcurrencyLimit"

	// MetricExpiredEnvelopesFailed counts the staged tasks found past their creation deadline
	// under ExpiredFail (exactly-once only), as do the next three for their policies.
	MetricExpiredEnvelopesFailed = "expiredEnvelopesFailed"
	// MetricExpiredEnvelopesAssumedCreated: expired under ExpiredAssumeCreated.
	MetricExpiredEnvelopesAssumedCreated = "expiredEnvelopesAssumedCreated"
	// MetricExpiredEnvelopesCreatedAnyway: expired under ExpiredCreateAnyway.
	MetricExpiredEnvelopesCreatedAnyway = "expiredEnvelopesCreatedAnyway"
	// MetricExpiredEnvelopesDropped: expired under ExpiredDrop.
	MetricExpiredEnvelopesDropped = "expiredEnvelopesDropped"
	// MetricStagedTaskAgeMillis is the distribution of the time from staging to the create
	// step picking up a staged task (exactly-once only).
	MetricStagedTaskAgeMillis = "stagedTaskAgeMillis"
	// MetricStagedTaskRemainingMillis is the distribution of the time left before the
	// creation deadline at that moment (exactly-once only).
	MetricStagedTaskRemainingMillis = "stagedTaskRemainingMillis"

	// MetricRecordsDeleted counts the elements whose task a Delete deleted, once per element
	// however many attempts it took.
	MetricRecordsDeleted = "numRecordsDeleted"
	// MetricTasksAlreadyGone counts the elements of a Delete whose task was not there (Cloud
	// Tasks answered NOT_FOUND about the task: it ran, was deleted, or was never created). Not
	// an error, and not in MetricRecordsDeleted.
	MetricTasksAlreadyGone = "tasksAlreadyGone"
	// MetricDeleteAttemptLatencyMillis is MetricCreateAttemptLatencyMillis for a Delete's
	// DeleteTask calls.
	MetricDeleteAttemptLatencyMillis = "deleteAttemptLatencyMillis"

	// MetricQueuePreflightPaused counts the queues the queue preflight found PAUSED, once per
	// worker process and queue (under PreflightFail, once per failed bundle). The next three
	// count their findings the same way (see WriterOptions.QueuePreflight).
	MetricQueuePreflightPaused = "queuePreflightPaused"
	// MetricQueuePreflightDisabled: queues found DISABLED.
	MetricQueuePreflightDisabled = "queuePreflightDisabled"
	// MetricQueuePreflightURIOverride: queues whose httpTarget.uriOverride, in enforce mode
	// ALWAYS, replaces the URL of the HTTP tasks the sink creates.
	MetricQueuePreflightURIOverride = "queuePreflightUriOverride"
	// MetricQueuePreflightRoutingOverride: queues whose appEngineRoutingOverride replaces the
	// routing the sink sets on App Engine tasks.
	MetricQueuePreflightRoutingOverride = "queuePreflightRoutingOverride"
	// MetricQueuePreflightSkipped counts the queue reads of the preflight that failed: once
	// per process and queue for PERMISSION_DENIED and UNIMPLEMENTED (not tried again), once
	// per failed read for other errors (remembered for 30 seconds, gcpconn.FailureTTL, by
	// every instance of the process, then tried again).
	MetricQueuePreflightSkipped = "queuePreflightSkipped"

	// MetricQueueState is the gauge of the state of the queues the reporting DoFn instance's
	// bundle wrote to, as the latest queue health read (WriterOptions.QueueHealthInterval) of
	// each found it, the worst of them: 3 DISABLED, 2 PAUSED, 1 RUNNING (Cloud Tasks'
	// Queue.State numbers), 0 when the latest read of every such queue failed. It is set when a
	// bundle ends, once a read of one of its queues has ended, and not at all with queue health
	// off.
	MetricQueueState = "queueState"
	// MetricQueueTasks is the gauge of the tasks in the queues the bundle wrote to (the v2beta3
	// Queue.stats tasks_count: not yet dispatched, being dispatched, or waiting for a retry),
	// the largest, as the latest read of each found it. Set as MetricQueueState is, when the
	// server answers the stats.
	MetricQueueTasks = "queueTasks"
	// MetricQueueOldestTaskAgeSeconds is the gauge of how late the oldest task of those queues
	// is, in whole seconds: the time from its estimated arrival (Queue.stats
	// oldest_estimated_arrival_time) to the read, 0 when that time is still ahead or the queue
	// is empty; the largest among the bundle's queues. Set as MetricQueueTasks is.
	MetricQueueOldestTaskAgeSeconds = "queueOldestTaskAgeSeconds"
	// MetricQueueHealthReads counts the queue reads the queue health made, the preflight's
	// reads included: at most one per queue and interval in a worker process. Each is counted
	// by the next bundle end of the process that writes to the queue.
	MetricQueueHealthReads = "queueHealthReads"
	// MetricQueueHealthReadErrors counts those of them that failed.
	MetricQueueHealthReadErrors = "queueHealthReadErrors"
)

// ThrottlingMetricsNamespace is the Beam metrics namespace of MetricThrottlingMsecs, the one
// metric the sink reports outside MetricsNamespace: one of the namespaces in which Dataflow's
// Java worker reads the time a step was throttled. docs/tuning.md says what is known of Runner
// v2, which runs Go jobs.
const ThrottlingMetricsNamespace = "dataflow-throttling-metrics"

// MetricThrottlingMsecs counts, in ThrottlingMetricsNamespace, the milliseconds a DoFn instance
// held creates back under a quota: the wall time during which at least one of its creates was
// held by adaptive concurrency while its queue was paced or paused, or parked for a RetryInfo
// delay longer than its backoff. Slow start and the retry backoff are not counted. It is added
// once per bundle, when the bundle ends or fails, and stays 0 with adaptive concurrency off.
const MetricThrottlingMsecs = "throttling-msecs"

// MetricQueueFailures counts the elements Config.OnDestinationFailure DestinationIsolate sent to
// the failure policy because their queue failed (CodeNotFound, CodePermissionDenied,
// CodeFailedPrecondition): after their own attempts, or at once while the worker process
// remembered the queue's failure. Each is also counted in MetricRecordsSendErrors.
const MetricQueueFailures = "queueFailures"

// MetricErrorClass returns the name of the counter of failed create attempts whose outermost
// gRPC status is code ("UNAVAILABLE", "INVALID_ARGUMENT", ...): "errorClass.<code>.errors".
func MetricErrorClass(code string) string { return "errorClass." + code + ".errors" }

// MetricDestinationRecordsSend returns the name of the per-queue MetricRecordsSend counter
// that WriterOptions.PerDestinationMetrics adds: "destination.<queue path>.recordsSend", with
// queuePath as Queue.Path returns it.
func MetricDestinationRecordsSend(queuePath string) string {
	return "destination." + queuePath + ".recordsSend"
}

// MetricDestinationSendErrors returns the name of the per-queue MetricRecordsSendErrors
// counter that WriterOptions.PerDestinationMetrics adds: "destination.<queue path>.sendErrors".
func MetricDestinationSendErrors(queuePath string) string {
	return "destination." + queuePath + ".sendErrors"
}

// MetricDestinationRecordsDeleted returns the name of the per-queue MetricRecordsDeleted
// counter that WriterOptions.PerDestinationMetrics adds to a Delete:
// "destination.<queue path>.recordsDeleted".
func MetricDestinationRecordsDeleted(queuePath string) string {
	return "destination." + queuePath + ".recordsDeleted"
}

// MetricDestinationQueueFailures returns the name of the per-queue MetricQueueFailures counter
// that WriterOptions.PerDestinationMetrics adds: "destination.<queue path>.queueFailures".
func MetricDestinationQueueFailures(queuePath string) string {
	return "destination." + queuePath + ".queueFailures"
}

// MetricDestinationQueueState returns the name of the per-queue MetricQueueState gauge that
// WriterOptions.PerDestinationMetrics adds with queue health on:
// "destination.<queue path>.queueState".
func MetricDestinationQueueState(queuePath string) string {
	return "destination." + queuePath + ".queueState"
}

// MetricDestinationQueueTasks returns the name of the per-queue MetricQueueTasks gauge:
// "destination.<queue path>.queueTasks".
func MetricDestinationQueueTasks(queuePath string) string {
	return "destination." + queuePath + ".queueTasks"
}

// MetricDestinationQueueOldestTaskAgeSeconds returns the name of the per-queue
// MetricQueueOldestTaskAgeSeconds gauge: "destination.<queue path>.queueOldestTaskAgeSeconds".
func MetricDestinationQueueOldestTaskAgeSeconds(queuePath string) string {
	return "destination." + queuePath + ".queueOldestTaskAgeSeconds"
}

// sinkMetrics are the sink's Beam metrics. Counters count elements, not attempts, except
// errorClass.<CODE>.errors, which counts every failed attempt by its outermost status.
type sinkMetrics struct {
	recordsSend        beam.Counter      // numRecordsSend: elements Cloud Tasks accepted
	bytesSend          beam.Counter      // numBytesSend: task wire bytes of accepted elements
	recordsErrors      beam.Counter      // numRecordsSendErrors: elements that reached the failure policy
	recordsSkipped     beam.Counter      // recordsSkipped: elements the serializer skipped
	deduplicated       beam.Counter      // tasksDeduplicated: ALREADY_EXISTS answers for named tasks
	tooLarge           beam.Counter      // tasksTooLarge: elements whose task was too large to create
	elementsNotEncoded beam.Counter      // deadLetterElementsNotEncoded: dead letters without their element
	queueFailures      beam.Counter      // queueFailures: elements of a failed queue, under DestinationIsolate
	inFlight, parked   beam.Gauge        // inFlightTasks, parkedTasks
	adaptiveLimit      beam.Gauge        // adaptiveConcurrencyLimit: the lowest limit of the bundle's queues
	attemptLatency     beam.Distribution // createAttemptLatencyMillis: per attempt
	attemptsPerTask    beam.Distribution // createAttemptsPerTask: per accepted element
	recordsDeleted     beam.Counter      // numRecordsDeleted: tasks a Delete deleted
	alreadyGone        beam.Counter      // tasksAlreadyGone: tasks a Delete found gone
	deleteLatency      beam.Distribution // deleteAttemptLatencyMillis: per delete attempt
	throttled          beam.Counter      // throttling-msecs in ThrottlingMetricsNamespace: per bundle
	perDestination     bool              // per-queue counters enabled
	errorClasses       map[string]beam.Counter
}

func newSinkMetrics(perDestination bool) *sinkMetrics {
	return &sinkMetrics{
		recordsSend:        beam.NewCounter(MetricsNamespace, MetricRecordsSend),
		bytesSend:          beam.NewCounter(MetricsNamespace, MetricBytesSend),
		recordsErrors:      beam.NewCounter(MetricsNamespace, MetricRecordsSendErrors),
		recordsSkipped:     beam.NewCounter(MetricsNamespace, MetricRecordsSkipped),
		deduplicated:       beam.NewCounter(MetricsNamespace, MetricTasksDeduplicated),
		tooLarge:           beam.NewCounter(MetricsNamespace, MetricTasksTooLarge),
		elementsNotEncoded: beam.NewCounter(MetricsNamespace, MetricDeadLetterElementsNotEncoded),
		queueFailures:      beam.NewCounter(MetricsNamespace, MetricQueueFailures),
		inFlight:           beam.NewGauge(MetricsNamespace, MetricInFlightTasks),
		parked:             beam.NewGauge(MetricsNamespace, MetricParkedTasks),
		adaptiveLimit:      beam.NewGauge(MetricsNamespace, MetricAdaptiveConcurrencyLimit),
		attemptLatency:     beam.NewDistribution(MetricsNamespace, MetricCreateAttemptLatencyMillis),
		attemptsPerTask:    beam.NewDistribution(MetricsNamespace, MetricCreateAttemptsPerTask),
		recordsDeleted:     beam.NewCounter(MetricsNamespace, MetricRecordsDeleted),
		alreadyGone:        beam.NewCounter(MetricsNamespace, MetricTasksAlreadyGone),
		deleteLatency:      beam.NewDistribution(MetricsNamespace, MetricDeleteAttemptLatencyMillis),
		throttled:          beam.NewCounter(ThrottlingMetricsNamespace, MetricThrottlingMsecs),
		perDestination:     perDestination,
		errorClasses:       map[string]beam.Counter{},
	}
}

func (m *sinkMetrics) created(ctx context.Context, queue string, bytes, attempts int, deduplicated bool) {
	m.recordsSend.Inc(ctx, 1)
	m.bytesSend.Inc(ctx, int64(bytes))
	m.attemptsPerTask.Update(ctx, int64(attempts))
	if deduplicated {
		m.deduplicated.Inc(ctx, 1)
	}
	if m.perDestination {
		beam.NewCounter(MetricsNamespace, MetricDestinationRecordsSend(queue)).Inc(ctx, 1)
	}
}

// deleted counts a Delete's element whose task was deleted, or found gone already.
func (m *sinkMetrics) deleted(ctx context.Context, queue string, gone bool) {
	if gone {
		m.alreadyGone.Inc(ctx, 1)
		return
	}
	m.recordsDeleted.Inc(ctx, 1)
	if m.perDestination {
		beam.NewCounter(MetricsNamespace, MetricDestinationRecordsDeleted(queue)).Inc(ctx, 1)
	}
}

func (m *sinkMetrics) failed(ctx context.Context, queue string) {
	m.recordsErrors.Inc(ctx, 1)
	if m.perDestination && queue != "" {
		beam.NewCounter(MetricsNamespace, MetricDestinationSendErrors(queue)).Inc(ctx, 1)
	}
}

// queueFailed counts an element of a failed queue; the failure policy counts it as a send error.
func (m *sinkMetrics) queueFailed(ctx context.Context, queue string) {
	m.queueFailures.Inc(ctx, 1)
	if m.perDestination {
		beam.NewCounter(MetricsNamespace, MetricDestinationQueueFailures(queue)).Inc(ctx, 1)
	}
}

func (m *sinkMetrics) attemptFailed(ctx context.Context, code string) {
	c, ok := m.errorClasses[code]
	if !ok {
		c = beam.NewCounter(MetricsNamespace, MetricErrorClass(code))
		m.errorClasses[code] = c
	}
	c.Inc(ctx, 1)
}

func (m *sinkMetrics) gauges(ctx context.Context, e interface{ Stats() (int, int) }) {
	inFlight, parked := e.Stats()
	m.inFlight.Set(ctx, int64(inFlight))
	m.parked.Set(ctx, int64(parked))
}

// stagedMetrics are the exactly-once create step's Beam metrics, beside the sink's.
type stagedMetrics struct {
	expired map[ExpiredEnvelopePolicy]beam.Counter // expiredEnvelopes.*: envelopes past their deadline, by policy
	age     beam.Distribution                      // stagedTaskAgeMillis: origin to create, per envelope
	budget  beam.Distribution                      // stagedTaskRemainingMillis: time left before the deadline
}

func newStagedMetrics() *stagedMetrics {
	return &stagedMetrics{
		expired: map[ExpiredEnvelopePolicy]beam.Counter{
			ExpiredFail:          beam.NewCounter(MetricsNamespace, MetricExpiredEnvelopesFailed),
			ExpiredAssumeCreated: beam.NewCounter(MetricsNamespace, MetricExpiredEnvelopesAssumedCreated),
			ExpiredCreateAnyway:  beam.NewCounter(MetricsNamespace, MetricExpiredEnvelopesCreatedAnyway),
			ExpiredDrop:          beam.NewCounter(MetricsNamespace, MetricExpiredEnvelopesDropped),
		},
		age:    beam.NewDistribution(MetricsNamespace, MetricStagedTaskAgeMillis),
		budget: beam.NewDistribution(MetricsNamespace, MetricStagedTaskRemainingMillis),
	}
}

// taken records an envelope the create step takes: how long ago it was staged and how long
// remains before its creation deadline.
func (m *stagedMetrics) taken(ctx context.Context, age, remaining time.Duration) {
	m.age.Update(ctx, age.Milliseconds())
	m.budget.Update(ctx, remaining.Milliseconds())
}

// expiredEnvelope counts an envelope found past its creation deadline under policy.
func (m *stagedMetrics) expiredEnvelope(ctx context.Context, policy ExpiredEnvelopePolicy) {
	m.expired[policy].Inc(ctx, 1)
}
