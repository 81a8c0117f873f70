package integration

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

// These tests need cloudtaskstest's reject hook and pstest, so they always run in process,
// whatever CLOUDTASKS_EMULATOR_HOST says.

func init() {
	beam.RegisterType(reflect.TypeFor[dlOrder]())
	register.Function1x2(dlStamp)
	register.Function1x2(dlSerialize)
	register.Function1x2(dlTaskKey)
}

// dlQueue and dlTopic are where the dead-letter tests write.
var dlQueue = cloudtasksio.Queue{Project: "dl-project", Location: "here", Name: "orders"}

const dlTopic = "projects/dl-project/topics/dead-letters"

// dlOrder is an element of the dead-letter tests. Key is unique and travels in the task body;
// the flags choose how the element fails.
type dlOrder struct {
	Key    string
	Millis int64 // event time, Unix milliseconds

	Rejected    bool // the server answers INVALID_ARGUMENT (reject hook)
	Oversized   bool // the body is over the server's 100 KiB task limit
	BadURL      bool // the URL is not http(s): the sink's own check before sending
	Unbuildable bool // the serializer fails
	NoKey       bool // the task-id function fails
}

// dlRejectMarker in a body makes the reject hook refuse the task.
const dlRejectMarker = `"reject":true`

func dlStamp(o dlOrder) (beam.EventTime, dlOrder) { return mtime.FromMilliseconds(o.Millis), o }

func dlSerialize(o dlOrder) (*cloudtaskspb.Task, error) {
	if o.Unbuildable {
		return nil, errors.New("the order cannot be encoded")
	}
	body := `{"key":"` + o.Key + `"`
	switch {
	case o.Rejected:
		body += "," + dlRejectMarker
	case o.Oversized:
		body += `,"pad":"` + strings.Repeat("x", cloudtaskstest.MaxTaskSize) + `"`
	}
	url := "https://example.com/orders"
	if o.BadURL {
		url = "ftp://example.com/orders"
	}
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: url, Body: []byte(body + "}")}}}, nil
}

func dlTaskKey(o dlOrder) (string, error) {
	if o.NoKey {
		return "", errors.New("the order has no key")
	}
	return o.Key, nil
}

// dlKeyOf returns the key in a task body written by dlSerialize.
func dlKeyOf(t *testing.T, body []byte) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(body), `{"key":"`)
	require.True(t, ok, "body %.60q has no key", body)
	key, _, ok := strings.Cut(rest, `"`)
	require.True(t, ok)
	return key
}

// dlEnv is the servers of one dead-letter test: Cloud Tasks with dlQueue, Pub/Sub with dlTopic.
type dlEnv struct {
	tasks  *cloudtaskstest.Server
	pubsub *pstest.Server
}

func newDLEnv(t *testing.T) *dlEnv {
	t.Helper()
	e := &dlEnv{tasks: cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch()), pubsub: pstest.NewServer()}
	t.Cleanup(func() { e.tasks.Close(); e.pubsub.Close() })
	_, err := e.tasks.CreateQueue(dlQueue.Path())
	require.NoError(t, err)
	e.tasks.SetRejectFunc(func(req *cloudtaskspb.CreateTaskRequest) error {
		if strings.Contains(string(req.GetTask().GetHttpRequest().GetBody()), dlRejectMarker) {
			return errors.New("the reject hook refused this task")
		}
		return nil
	})

	// The topic exists before the pipeline, created through the ordinary admin client.
	ctx := context.Background()
	client, err := pubsub.NewClient(ctx, "dl-project",
		option.WithEndpoint(e.pubsub.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	require.NoError(t, err)
	defer client.Close()
	_, err = client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: dlTopic})
	require.NoError(t, err)
	return e
}

// run writes elems with the dead-letter policy, publishes the dead letters to dlTopic and
// returns the counters of namespaces cloudtasksio and deadletter, keyed "namespace.name".
func (e *dlEnv) run(t *testing.T, elems []dlOrder) map[string]int64 {
	t.Helper()
	in := make([]any, len(elems))
	for i, o := range elems {
		in[i] = o
	}
	p, s := beam.NewPipelineWithRoot()
	stamped := beam.ParDo(s, dlStamp, beam.Create(s, in...))
	failed := cloudtasksio.Write(s, cloudtasksio.Config{
		Queue:            dlQueue,
		Serializer:       dlSerialize,
		TaskIDFn:         dlTaskKey,
		OnFailure:        cloudtasksio.DeadLetter,
		EmulatorEndpoint: e.tasks.Addr,
	}, stamped)
	pub := pubsubdl.DefaultPubSubConfig(dlTopic)
	pub.MaxInFlightMessages = 8 // several waits per bundle, not only the one in FinishBundle
	pub.EmulatorEndpoint = e.pubsub.Addr
	pubsubdl.ToPubSub(s, pub, failed)

	pr, err := ptest.RunWithMetrics(p)
	require.NoError(t, err)
	counters := map[string]int64{}
	for _, c := range pr.Metrics().Query(func(metrics.SingleResult) bool { return true }).Counters() {
		counters[c.Namespace()+"."+c.Name()] += c.Result()
	}
	return counters
}

// dlInput returns n orders, every seventh rejected by the server, plus one oversized, one
// with a bad URL, two unbuildable and two without a key. It returns the elements and the
// keys of the orders Cloud Tasks should accept.
func dlInput(n int) (elems []dlOrder, accepted map[string]bool) {
	base := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	accepted = map[string]bool{}
	for i := range n {
		o := dlOrder{Key: fmt.Sprintf("order-%04d", i), Millis: base.Add(time.Duration(i) * time.Second).UnixMilli()}
		switch {
		case i%7 == 3:
			o.Rejected = true
		case i == 12:
			o.Oversized = true
		case i == 13:
			o.BadURL = true
		case i == 20 || i == 40:
			o.Unbuildable = true
		case i == 30 || i == 50:
			o.NoKey = true
		default:
			accepted[o.Key] = true
		}
		elems = append(elems, o)
	}
	return elems, accepted
}

func TestDeadLettersReachPubSubOnceEachAndAcceptedOrdersAreCreated(t *testing.T) {
	e := newDLEnv(t)
	const n = 300
	elems, accepted := dlInput(n)
	byKey := map[string]dlOrder{}
	for _, o := range elems {
		byKey[o.Key] = o
	}

	counters := e.run(t, elems)

	// Every accepted order is stored once, under its name.
	stored := map[string]int{}
	for _, task := range e.tasks.Tasks(dlQueue.Path()) {
		key := dlKeyOf(t, task.GetHttpRequest().GetBody())
		stored[key]++
		assert.Equal(t, dlQueue.Path()+"/tasks/"+cloudtasksio.TaskID(key), task.GetName())
	}
	assert.Len(t, stored, len(accepted))
	for key := range accepted {
		assert.Equal(t, 1, stored[key], "accepted order %s stored once", key)
	}

	// Every failed order is on the topic exactly once.
	msgs := e.pubsub.Messages()
	failedCount := n - len(accepted)
	require.Len(t, msgs, failedCount)
	seen := map[string]int{}
	var serialization, taskID, invalid int
	for _, m := range msgs {
		a := m.Attributes
		assert.Equal(t, cloudtasksio.Connector, a[pubsubdl.AttrConnector])
		assert.Equal(t, dlQueue.Path(), a[pubsubdl.AttrDestination])
		assert.NotEmpty(t, a[pubsubdl.AttrWorker])
		assert.NotEmpty(t, a[pubsubdl.AttrBundle])
		assert.NotContains(t, a[pubsubdl.AttrError], `{"key"`, "the error never carries the payload")
		fe, _, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.Data, Attributes: a})
		require.NoError(t, err)
		assert.Equal(t, pubsubdl.EncodingEnvelopeV1, a[pubsubdl.AttrEncoding])
		// Every dead letter gives its order back.
		failedOrder, err := deadletter.DecodeElement[dlOrder](fe)
		require.NoError(t, err)

		var key string
		switch a[pubsubdl.AttrCode] {
		case cloudtasksio.CodeSerialization:
			serialization++
			assert.Empty(t, fe.Payload, "no task could be built, so the dead letter carries none")
			assert.Contains(t, a[pubsubdl.AttrError], "Serializer failed: the order cannot be encoded")
			_, err := cloudtasksio.FailedTask(fe)
			assert.Error(t, err)
			// The element itself comes back, and it is the one of that event time.
			assert.True(t, failedOrder.Unbuildable)
			assert.Equal(t, time.UnixMilli(failedOrder.Millis).UTC().Format(time.RFC3339Nano), a[pubsubdl.AttrEventTime])
			key = failedOrder.Key
		case cloudtasksio.CodeTaskID:
			taskID++
			assert.Contains(t, a[pubsubdl.AttrError], "TaskIDFn failed: the order has no key")
			task, err := cloudtasksio.FailedTask(fe)
			require.NoError(t, err, "the task was built before naming failed, so it is carried")
			assert.Empty(t, task.GetName())
			key = dlKeyOf(t, task.GetHttpRequest().GetBody())
			assert.True(t, byKey[key].NoKey)
		case cloudtasksio.CodeInvalidArgument:
			invalid++
			task, err := cloudtasksio.FailedTask(fe)
			require.NoError(t, err)
			key = dlKeyOf(t, task.GetHttpRequest().GetBody())
			o := byKey[key]
			switch {
			case o.Rejected:
				assert.Contains(t, a[pubsubdl.AttrError], "the reject hook refused this task")
				assert.Equal(t, dlQueue.Path()+"/tasks/"+cloudtasksio.TaskID(key), task.GetName(), "a task the service rejected keeps its name")
			case o.Oversized:
				assert.Greater(t, len(fe.Payload), cloudtaskstest.MaxTaskSize, "the whole oversized task is carried")
			case o.BadURL:
				assert.Contains(t, a[pubsubdl.AttrError], "http or https")
				assert.Empty(t, task.GetName(), "the sink's own check runs before the task is named")
			default:
				t.Errorf("order %s was not meant to be rejected", key)
			}
		default:
			t.Errorf("unexpected code %q", a[pubsubdl.AttrCode])
		}
		require.NotEmpty(t, key, "message with code %s matched no order", a[pubsubdl.AttrCode])
		assert.Equal(t, time.UnixMilli(byKey[key].Millis).UTC().Format(time.RFC3339Nano), a[pubsubdl.AttrEventTime],
			"the dead letter carries the event time of order %s", key)
		assert.Equal(t, key, failedOrder.Key, "the dead letter's element is its order")
		seen[key]++
	}
	for key, o := range byKey {
		if !accepted[key] {
			assert.Equal(t, 1, seen[key], "failed order %s (%+v) published once", key, o)
		}
	}
	assert.Equal(t, 2, serialization)
	assert.Equal(t, 2, taskID)
	assert.Equal(t, failedCount-4, invalid)

	assert.Equal(t, int64(len(accepted)), counters["cloudtasksio.numRecordsSend"])
	assert.Equal(t, int64(failedCount), counters["cloudtasksio.numRecordsSendErrors"])
	assert.Equal(t, int64(failedCount), counters["deadletter.messagesPublished"])
}

func TestDeadLettersAreRepublishedWhenTheInputIsReplayed(t *testing.T) {
	// Prism never retries a bundle, so the replay a retried bundle would cause is a second run
	// over the same input: dead letters are at least once, named tasks are not duplicated.
	e := newDLEnv(t)
	elems, accepted := dlInput(60)
	e.run(t, elems)
	counters := e.run(t, elems)

	assert.Len(t, e.tasks.Tasks(dlQueue.Path()), len(accepted), "named tasks are created once")
	assert.Equal(t, int64(len(accepted)), counters["cloudtasksio.tasksDeduplicated"])
	failed := len(elems) - len(accepted)
	assert.Len(t, e.pubsub.Messages(), 2*failed, "each run publishes its dead letters")
	assert.Equal(t, int64(failed), counters["deadletter.messagesPublished"])
}
