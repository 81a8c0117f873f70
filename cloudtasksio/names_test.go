package cloudtasksio_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// documentedMetrics are the sink's metric names as docs/metrics.md and the package
// documentation list them, each with the exported name the code, tests and examples use.
var documentedMetrics = []struct{ got, want string }{
	{cloudtasksio.MetricRecordsSend, "numRecordsSend"},
	{cloudtasksio.MetricBytesSend, "numBytesSend"},
	{cloudtasksio.MetricRecordsSendErrors, "numRecordsSendErrors"},
	{cloudtasksio.MetricRecordsSkipped, "recordsSkipped"},
	{cloudtasksio.MetricTasksDeduplicated, "tasksDeduplicated"},
	{cloudtasksio.MetricTasksTooLarge, "tasksTooLarge"},
	{cloudtasksio.MetricErrorClass("<CODE>"), "errorClass.<CODE>.errors"},
	{cloudtasksio.MetricInFlightTasks, "inFlightTasks"},
	{cloudtasksio.MetricParkedTasks, "parkedTasks"},
	{cloudtasksio.MetricAdaptiveConcurrencyLimit, "adaptiveConcurrencyLimit"},
	{cloudtasksio.MetricDestinationRecordsSend("<queue path>"), "destination.<queue path>.recordsSend"},
	{cloudtasksio.MetricDestinationSendErrors("<queue path>"), "destination.<queue path>.sendErrors"},
	{cloudtasksio.MetricQueueFailures, "queueFailures"},
	{cloudtasksio.MetricDestinationQueueFailures("<queue path>"), "destination.<queue path>.queueFailures"},
	{cloudtasksio.MetricRecordsDeleted, "numRecordsDeleted"},
	{cloudtasksio.MetricTasksAlreadyGone, "tasksAlreadyGone"},
	{cloudtasksio.MetricDeleteAttemptLatencyMillis, "deleteAttemptLatencyMillis"},
	{cloudtasksio.MetricDestinationRecordsDeleted("<queue path>"), "destination.<queue path>.recordsDeleted"},
	{cloudtasksio.MetricExpiredEnvelopesFailed, "expiredEnvelopesFailed"},
	{cloudtasksio.MetricExpiredEnvelopesAssumedCreated, "expiredEnvelopesAssumedCreated"},
	{cloudtasksio.MetricExpiredEnvelopesCreatedAnyway, "expiredEnvelopesCreatedAnyway"},
	{cloudtasksio.MetricExpiredEnvelopesDropped, "expiredEnvelopesDropped"},
	{cloudtasksio.MetricStagedTaskAgeMillis, "stagedTaskAgeMillis"},
	{cloudtasksio.MetricStagedTaskRemainingMillis, "stagedTaskRemainingMillis"},
	{cloudtasksio.MetricCreateAttemptLatencyMillis, "createAttemptLatencyMillis"},
	{cloudtasksio.MetricCreateAttemptsPerTask, "createAttemptsPerTask"},
	{cloudtasksio.MetricQueuePreflightPaused, "queuePreflightPaused"},
	{cloudtasksio.MetricQueuePreflightDisabled, "queuePreflightDisabled"},
	{cloudtasksio.MetricQueuePreflightURIOverride, "queuePreflightUriOverride"},
	{cloudtasksio.MetricQueuePreflightRoutingOverride, "queuePreflightRoutingOverride"},
	{cloudtasksio.MetricQueuePreflightSkipped, "queuePreflightSkipped"},
	{cloudtasksio.MetricQueueState, "queueState"},
	{cloudtasksio.MetricQueueTasks, "queueTasks"},
	{cloudtasksio.MetricQueueOldestTaskAgeSeconds, "queueOldestTaskAgeSeconds"},
	{cloudtasksio.MetricQueueHealthReads, "queueHealthReads"},
	{cloudtasksio.MetricQueueHealthReadErrors, "queueHealthReadErrors"},
	{cloudtasksio.MetricDestinationQueueState("<queue path>"), "destination.<queue path>.queueState"},
	{cloudtasksio.MetricDestinationQueueTasks("<queue path>"), "destination.<queue path>.queueTasks"},
	{cloudtasksio.MetricDestinationQueueOldestTaskAgeSeconds("<queue path>"), "destination.<queue path>.queueOldestTaskAgeSeconds"},
	{cloudtasksio.MetricDeadLetterElementsNotEncoded, "deadLetterElementsNotEncoded"},
	{cloudtasksio.MetricThrottlingMsecs, "throttling-msecs"},
}

func TestMetricNamesAreTheDocumentedOnes(t *testing.T) {
	assert.Equal(t, "cloudtasksio", cloudtasksio.MetricsNamespace)
	assert.Equal(t, "dataflow-throttling-metrics", cloudtasksio.ThrottlingMetricsNamespace)
	assert.Equal(t, "errorClass.UNAVAILABLE.errors", cloudtasksio.MetricErrorClass("UNAVAILABLE"))
	assert.Equal(t, "destination.projects/p/locations/l/queues/q.recordsSend",
		cloudtasksio.MetricDestinationRecordsSend("projects/p/locations/l/queues/q"))

	docs := readFile(t, "../docs/metrics.md")
	pkgDoc := readFile(t, "doc.go")
	for _, m := range documentedMetrics {
		assert.Equal(t, m.want, m.got)
		assert.Contains(t, docs, "`"+m.want+"`", "docs/metrics.md lists %s", m.want)
		assert.Regexp(t, `(?m)^//\t`+regexp.QuoteMeta(m.want)+` +(counter|gauge|distribution)`, pkgDoc,
			"the package documentation's metric table lists %s", m.want)
	}

	// Every name in docs/metrics.md's tables has its exported name.
	want := map[string]bool{}
	for _, m := range documentedMetrics {
		want[m.want] = true
	}
	rows := regexp.MustCompile("(?m)^\\| (`[^|]+) \\|").FindAllStringSubmatch(docs, -1)
	require.NotEmpty(t, rows, "docs/metrics.md has a metric table")
	for _, row := range rows {
		for _, name := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row[1], -1) {
			assert.True(t, want[name[1]], "docs/metrics.md lists %s, which has no exported name", name[1])
		}
	}
}

func TestDeadLetterVocabularyIsTheDocumentedOne(t *testing.T) {
	assert.Equal(t, "cloudtasks", cloudtasksio.Connector)
	assert.Equal(t, "cloudtasks-delete", cloudtasksio.DeleteConnector)
	assert.Equal(t, "SERIALIZATION", cloudtasksio.CodeSerialization)
	assert.Equal(t, "TASK_ID", cloudtasksio.CodeTaskID)
	assert.Equal(t, "INVALID_ARGUMENT", cloudtasksio.CodeInvalidArgument)
	assert.Equal(t, "TASK_TOO_LARGE", cloudtasksio.CodeTaskTooLarge)
	assert.Equal(t, "NOT_FOUND", cloudtasksio.CodeNotFound)
	assert.Equal(t, "PERMISSION_DENIED", cloudtasksio.CodePermissionDenied)
	assert.Equal(t, "FAILED_PRECONDITION", cloudtasksio.CodeFailedPrecondition)
}

func TestEnumsPrintTheirNames(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{cloudtasksio.AtLeastOnce, "AtLeastOnce"},
		{cloudtasksio.ExactlyOnce, "ExactlyOnce"},
		{cloudtasksio.DeliveryGuarantee(5), "DeliveryGuarantee(5)"},
		{cloudtasksio.FailBundle, "FailBundle"},
		{cloudtasksio.LogAndDrop, "LogAndDrop"},
		{cloudtasksio.DeadLetter, "DeadLetter"},
		{cloudtasksio.FailurePolicy(-1), "FailurePolicy(-1)"},
		{cloudtasksio.ExpiredFail, "ExpiredFail"},
		{cloudtasksio.ExpiredAssumeCreated, "ExpiredAssumeCreated"},
		{cloudtasksio.ExpiredCreateAnyway, "ExpiredCreateAnyway"},
		{cloudtasksio.ExpiredDrop, "ExpiredDrop"},
		{cloudtasksio.ExpiredEnvelopePolicy(4), "ExpiredEnvelopePolicy(4)"},
		{cloudtasksio.DestinationFailBundle, "DestinationFailBundle"},
		{cloudtasksio.DestinationIsolate, "DestinationIsolate"},
		{cloudtasksio.DestinationFailurePolicy(2), "DestinationFailurePolicy(2)"},
	} {
		assert.Equal(t, c.want, c.v.String())
		assert.Equal(t, c.want, fmt.Sprint(c.v))
	}
}

func TestUnknownEnumValuesAreNamedInErrors(t *testing.T) {
	staged := cloudtasksio.DefaultStagedOptions()
	staged.ExpiredEnvelopePolicy = 9
	for _, c := range []struct {
		name string
		cfg  cloudtasksio.Config
		want string
	}{
		{"delivery", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Delivery: 5}, "Config.Delivery DeliveryGuarantee(5) is not AtLeastOnce or ExactlyOnce"},
		{"failure policy", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), OnFailure: 7}, "Config.OnFailure FailurePolicy(7) is not FailBundle"},
		{"expired-envelope policy", cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), Delivery: cloudtasksio.ExactlyOnce, Staged: &staged},
			"ExpiredEnvelopePolicy(9) is not a known policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := tryWrite(c.cfg, order{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
