package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/appengine/appengine"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/deadletters/deadletters"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/dynamicqueues/dynamicqueues"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exactlyonce/exactlyonce"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/replay/replay"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/reschedule/reschedule"
)

// These tests run the examples' own code on prism, each against in-process servers of its
// own (as the example programs do by default), whatever CLOUDTASKS_EMULATOR_HOST says.

// examplePrism runs an example's pipelines on prism.
func examplePrism(_ context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	return ptest.RunWithMetrics(p)
}

// exampleEnv is the Env of an example run in a test: ct, prism, and out.
func exampleEnv(ct *exampleenv.CloudTasks, out io.Writer) exampleenv.Env {
	return exampleenv.Env{CloudTasks: ct, Runner: examplePrism, Out: out}
}

// exampleCloudTasks starts an in-process Cloud Tasks server, closed when t ends.
func exampleCloudTasks(t *testing.T, opts ...cloudtaskstest.Option) *exampleenv.CloudTasks {
	t.Helper()
	ct := exampleenv.StartCloudTasks("", opts...)
	t.Cleanup(ct.Close)
	return ct
}

func TestExampleDeadLettersPublishesEachFailureKindWithItsTask(t *testing.T) {
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	set := deadletters.DefaultSettings(ps.Addr)
	var out bytes.Buffer

	res, err := deadletters.Run(context.Background(), exampleEnv(ct, &out), deadletters.Options{Settings: set, Orders: deadletters.DemoOrders()})
	require.NoError(t, err)

	var ids []string
	for _, task := range res.Tasks {
		ids = append(ids, task.GetHttpRequest().GetUrl()+" "+strings.SplitN(string(task.GetHttpRequest().GetBody()), ",", 2)[0])
	}
	assert.ElementsMatch(t, []string{
		deadletters.FulfilmentURL + ` {"id":"1001"`, deadletters.FulfilmentURL + ` {"id":"1002"`, deadletters.FulfilmentURL + ` {"id":"1003"`,
		deadletters.FulfilmentURL + ` {"id":"1004"`, deadletters.FulfilmentURL + ` {"id":"1005"`, deadletters.FulfilmentURL + ` {"id":"1006"`,
	}, ids, "the six good orders are created")
	assert.Equal(t, int64(6), res.Counters[cloudtasksio.MetricRecordsSend])
	assert.Equal(t, int64(4), res.Counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Equal(t, int64(4), res.Published)

	// Ordered by code, then event time (the orders were placed a minute apart from 09:00).
	require.Len(t, res.DeadLetters, 4)
	type seen struct{ code, eventTime, url, name string }
	var got []seen
	for _, dl := range res.DeadLetters {
		s := seen{code: dl.Attributes[pubsubdl.AttrCode], eventTime: dl.Attributes[pubsubdl.AttrEventTime]}
		if dl.Task != nil {
			s.url, s.name = dl.Task.GetHttpRequest().GetUrl(), dl.Task.GetName()
		} else {
			assert.Empty(t, dl.Failed.Payload)
		}
		assert.Equal(t, set.Queue.Path(), dl.Attributes[pubsubdl.AttrDestination])
		require.NotNil(t, dl.Order, "every dead letter gives its order back")
		assert.Equal(t, dl.Attributes[pubsubdl.AttrEventTime], time.UnixMilli(dl.Order.PlacedAt).UTC().Format(time.RFC3339Nano))
		got = append(got, s)
	}
	assert.Equal(t, []seen{
		{cloudtasksio.CodeInvalidArgument, "2026-05-04T09:06:00Z", deadletters.FulfilmentURL, set.Queue.Path() + "/tasks/" + cloudtasksio.TaskID("order-1007")},
		{cloudtasksio.CodeInvalidArgument, "2026-05-04T09:07:00Z", "ftp://partner.example.com/orders", ""},
		{cloudtasksio.CodeSerialization, "2026-05-04T09:08:00Z", "", ""},
		{cloudtasksio.CodeTaskID, "2026-05-04T09:09:00Z", deadletters.FulfilmentURL, ""},
	}, got)
	assert.Greater(t, len(res.DeadLetters[0].Task.GetHttpRequest().GetBody()), cloudtaskstest.MaxTaskSize, "the oversized order's whole task")

	text := out.String()
	assert.Contains(t, text, "Cloud Tasks accepted 6 order(s)")
	assert.Contains(t, text, "4 dead letter(s) published to projects/demo-project/topics/order-dead-letters")
	assert.Contains(t, text, "dead letter 4 of 4: code TASK_ID")
	assert.Contains(t, text, "task:        none: no task could be built")
	assert.Contains(t, text, `order:       id "1009", customer margaret`)
}

func TestExampleDynamicQueuesRoutesEachOrderToItsRegionsQueue(t *testing.T) {
	ct := exampleCloudTasks(t)
	orders := []dynamicqueues.Order{
		{ID: "1", Region: "eu", Amount: 5},
		{ID: "2", Region: "US", Amount: 6},
		{ID: "3", Region: "eu", Amount: 7},
		{ID: "4", Region: "mars", Amount: 8},
		{ID: "5", Region: "asia", Amount: 9},
	}
	var out bytes.Buffer

	res, err := dynamicqueues.Run(context.Background(), exampleEnv(ct, &out), dynamicqueues.Options{Orders: orders})
	require.NoError(t, err)

	got := map[string][]string{}
	for _, d := range res.Destinations {
		got[d.Queue.Path()] = d.OrderIDs
		assert.Equal(t, int64(d.Stored), d.Sent, "the per-destination metric of %s matches what it holds", d.Queue.Path())
		assert.Zero(t, d.Errors)
	}
	assert.Equal(t, map[string][]string{
		"projects/demo-project/locations/europe-west1/queues/orders-eu":      {"1", "3"},
		"projects/demo-project/locations/us-central1/queues/orders-us":       {"2"},
		"projects/demo-project/locations/asia-northeast1/queues/orders-asia": {"5"},
		"projects/demo-project/locations/us-central1/queues/orders-other":    {"4"},
	}, got)
	assert.Equal(t, int64(5), res.Counters[cloudtasksio.MetricRecordsSend])
	assert.Regexp(t, `queues/orders-eu +recordsSend=2 sendErrors=0 stored=2 orders=1,3\n`, out.String())
}

func TestExampleDynamicQueuesCountsARejectedOrderInItsQueuesSendErrors(t *testing.T) {
	ct := exampleCloudTasks(t)
	if ct.Server == nil {
		t.Skip("needs the in-process server to reject one order (SetRejectFunc); unset CLOUDTASKS_EMULATOR_HOST to run it")
	}
	ct.Server.SetRejectFunc(func(req *cloudtaskspb.CreateTaskRequest) error {
		if strings.Contains(string(req.GetTask().GetHttpRequest().GetBody()), `"id":"3"`) {
			return errors.New("the order is malformed")
		}
		return nil
	})
	orders := []dynamicqueues.Order{
		{ID: "1", Region: "eu", Amount: 5},
		{ID: "2", Region: "us", Amount: 6},
		{ID: "3", Region: "eu", Amount: 7},
	}
	var out bytes.Buffer

	res, err := dynamicqueues.Run(context.Background(), exampleEnv(ct, &out), dynamicqueues.Options{Orders: orders})
	require.NoError(t, err, "a rejected order is dropped, not a failed pipeline")

	errs := map[string]int64{}
	for _, d := range res.Destinations {
		errs[d.Queue.Name] = d.Errors
	}
	assert.Equal(t, map[string]int64{"orders-eu": 1, "orders-us": 0, "orders-asia": 0, "orders-other": 0}, errs,
		"the rejection counts against its own queue only")
	assert.Equal(t, int64(1), res.Counters[cloudtasksio.MetricRecordsSendErrors])
	assert.Equal(t, int64(2), res.Counters[cloudtasksio.MetricRecordsSend])
	assert.Regexp(t, `queues/orders-eu +recordsSend=1 sendErrors=1 stored=1 orders=1\n`, out.String())
}

func TestExampleAppEngineRoutingReachesTheHandlerInTheHostHeader(t *testing.T) {
	h, err := appengine.StartHandler("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(h.Close)
	ct := exampleCloudTasks(t, cloudtaskstest.WithAppEngineURL(h.URL()))
	jobs := []appengine.JobSpec{
		{ID: "a", Image: "gs://b/a.jpg"},
		{ID: "b", Image: "gs://b/b.jpg", OverrideService: true, Service: "thumbnails"},
		{ID: "c", Image: "gs://b/c.jpg", OverrideService: true, Service: ""},
	}
	var out bytes.Buffer

	res, err := appengine.Run(context.Background(), exampleEnv(ct, &out), appengine.Options{Handler: h, Jobs: jobs})
	require.NoError(t, err)

	base := strings.TrimPrefix(h.URL(), "http://")
	require.Len(t, res.Deliveries, 3)
	hosts := map[string]string{}
	for _, d := range res.Deliveries {
		hosts[d.JobID] = d.Host
		assert.Equal(t, "POST", d.Method)
		assert.Equal(t, appengine.RelativeURI, d.Path)
		assert.Equal(t, appengine.Queue.Name, d.QueueName)
		assert.NotEmpty(t, d.TaskName)
	}
	assert.Equal(t, map[string]string{
		"a": "v1.worker." + base,     // the target's routing
		"b": "v1.thumbnails." + base, // the element's service replaces it
		"c": "v1." + base,            // "" clears the service
	}, hosts)
	assert.Contains(t, out.String(), "Host: v1.thumbnails."+base)
}

func TestExampleExactlyOnceKeyedRerunCreatesNothingAndRandomIDsDoNot(t *testing.T) {
	ct := exampleCloudTasks(t)
	payments := exactlyonce.DemoPayments()[:3]
	var out bytes.Buffer

	res, err := exactlyonce.Run(context.Background(), exampleEnv(ct, &out), exactlyonce.Options{Payments: payments})
	require.NoError(t, err)

	require.Len(t, res.Passes, 4)
	type pass struct {
		queue                 string
		created, dedup, store int64
	}
	var got []pass
	for _, p := range res.Passes {
		got = append(got, pass{p.Queue.Name, p.Created, p.Deduplicated, int64(p.Stored)})
		window := time.Hour - 5*time.Minute - 20*time.Second
		assert.Greater(t, p.MinRemainingMillis, (window - time.Minute).Milliseconds(), "%s: created long before the deadline", p.Label)
		assert.LessOrEqual(t, p.MinRemainingMillis, window.Milliseconds())
		assert.GreaterOrEqual(t, p.MaxAgeMillis, int64(0))
	}
	assert.Equal(t, []pass{
		{"payments", 3, 0, 3},
		{"payments", 0, 3, 3},
		{"payments-random-ids", 3, 0, 3},
		{"payments-random-ids", 3, 0, 6},
	}, got)
	for _, task := range ct.Server.Tasks(exactlyonce.KeyedQueue.Path()) {
		assert.Contains(t, task.GetName(), "/tasks/"+cloudtasksio.TaskID("payment-"+strings.SplitN(strings.TrimPrefix(string(task.GetHttpRequest().GetBody()), `{"id":"`), `"`, 2)[0]))
	}
	assert.True(t, res.RetentionSet)
	assert.Contains(t, out.String(), "created 0, already there 3 -> queue holds 3 task(s)")
}

func TestExampleRescheduleDeletesTheOldReminderAndCreatesTheNewOne(t *testing.T) {
	ct := exampleCloudTasks(t)
	at := time.Now().UTC().Truncate(time.Hour).Add(48 * time.Hour) // within Cloud Tasks' 30 days
	opts := reschedule.Options{
		Reminders: []reschedule.Reminder{
			{Appointment: "a", Version: 1, Patient: "p1", At: at},
			{Appointment: "b", Version: 1, Patient: "p2", At: at},
			{Appointment: "c", Version: 1, Patient: "p3", At: at},
		},
		Changes: []reschedule.Change{
			{Appointment: "a", From: 1, Patient: "p1", At: at.Add(24 * time.Hour)},
			{Appointment: "c", From: 1, Cancelled: true},
			{Appointment: "d", From: 3, Cancelled: true}, // no such reminder: already gone
		},
	}
	var out bytes.Buffer

	res, err := reschedule.Run(context.Background(), exampleEnv(ct, &out), opts)
	require.NoError(t, err)

	due := func(appointment string, version int, at time.Time) reschedule.Scheduled {
		return reschedule.Scheduled{Appointment: appointment, Version: version, At: at}
	}
	assert.Equal(t, []reschedule.Scheduled{due("a", 1, at), due("b", 1, at), due("c", 1, at)}, res.Before)
	assert.Equal(t, []reschedule.Scheduled{due("a", 2, at.Add(24*time.Hour)), due("b", 1, at)}, res.After)
	assert.Equal(t, int64(2), res.Counters[cloudtasksio.MetricRecordsDeleted])
	assert.Equal(t, int64(1), res.Counters[cloudtasksio.MetricTasksAlreadyGone])
	assert.Equal(t, int64(1), res.Counters[cloudtasksio.MetricRecordsSend])
	names := map[string]bool{}
	for _, task := range ct.Server.Tasks(reschedule.Queue.Path()) {
		names[task.GetName()] = true
	}
	assert.True(t, names[reschedule.Queue.Path()+"/tasks/"+cloudtasksio.TaskID("appointment/a/v2")], "the new version is a task of its own")
	assert.Contains(t, out.String(), "  a v2 due "+at.Add(24*time.Hour).Format(time.RFC3339)+"\n")
	assert.Contains(t, out.String(), "Changes: numRecordsDeleted=2 tasksAlreadyGone=1 numRecordsSend=1 numRecordsSendErrors=0\n")
}

func TestExampleReplayWritesEachFixedOrderOnceAndASecondReplayNothing(t *testing.T) {
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	var out bytes.Buffer
	res, err := replay.Demo(context.Background(), exampleEnv(ct, &out), ps.Addr)
	require.NoError(t, err)

	assert.Equal(t, int64(4), res.DeadLetters.Published, "the dead-letter example's four dead letters")
	for i, r := range []*replay.Result{res.First, res.Second} {
		assert.Equal(t, int64(4), r.Replay[replay.MetricRead], "replay %d: dead letters read", i+1)
		assert.Equal(t, int64(3), r.Replay[replay.MetricReplayed], "replay %d: fixed and written again", i+1)
		assert.Equal(t, int64(1), r.Replay[replay.MetricLeftOut], "replay %d: the order without an id is left out", i+1)
		assert.Equal(t, int64(4), r.Replay[replay.MetricAcknowledged], "replay %d", i+1)
		assert.Equal(t, int64(3), r.Sink[cloudtasksio.MetricRecordsSend], "replay %d: tasks accepted", i+1)
	}
	assert.Equal(t, 3, res.First.Created, "the first replay creates the three fixed orders' tasks")
	assert.Zero(t, res.Second.Created, "the second replay creates no duplicate")
	assert.Equal(t, int64(3), res.Second.Sink[cloudtasksio.MetricTasksDeduplicated])

	// The six orders the first run created and the three fixed ones, each once under its name.
	names := map[string]bool{}
	for _, task := range res.Second.Tasks {
		names[task.GetName()] = true
		assert.Equal(t, deadletters.FulfilmentURL, task.GetHttpRequest().GetUrl())
		assert.Equal(t, cloudtaskspb.HttpMethod_POST, task.GetHttpRequest().GetHttpMethod())
		assert.Less(t, len(task.GetHttpRequest().GetBody()), 2000, "the oversized note was cut")
	}
	assert.Len(t, names, 9)
	for _, id := range []string{"1007", "1008", "1009"} {
		assert.True(t, names[deadletters.DefaultSettings("").Queue.Path()+"/tasks/"+cloudtasksio.TaskID("order-"+id)], "order %s replayed", id)
	}
	assert.Contains(t, out.String(), "4 dead letter(s) read, 3 replayed, 1 left out by the fix, 0 not replayable; 4 acknowledged.")
	assert.Contains(t, out.String(), "Cloud Tasks accepted 3 task(s), 3 of them already there (named); the queue gained 0 task(s).")
	assert.Contains(t, out.String(), "Reading the dead letters of "+replay.FirstSubscription+" until 3 pulls in a row find none (each waits up to 5s)...",
		"the output says what the replay waits for")
}
