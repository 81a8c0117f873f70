package integration

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/replay/replay"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"
)

// Element types of the replay tests, one per body format. The first run's reject hook refuses
// every task whose body holds "BAD"; the fix functions make it "GOOD". An http-method of
// "FETCH" cannot become a task at all (SERIALIZATION); the fix clears it.
type (
	replayJSON struct {
		ID     string `json:"id"`
		Note   string `json:"note"`
		Method string `cloudtasks:"http-method"`
	}
	replayCSV struct {
		ID   string `json:"id"`
		Note string `json:"note"`
	}
	replayForm struct {
		ID   string `json:"id"`
		Note string `json:"note"`
	}
	replayRaw struct {
		Line string `json:"line"`
		Key  string `cloudtasks:"task-id"` // raw names its tasks by field, the others by TaskIDFn
	}
	replayAvro struct {
		ID   string `json:"id"`
		Note string `json:"note"`
	}
)

const replayAvroSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"note","type":"string"}]}`

func init() {
	for _, t := range []reflect.Type{reflect.TypeFor[replayJSON](), reflect.TypeFor[replayCSV](), reflect.TypeFor[replayForm](), reflect.TypeFor[replayRaw](), reflect.TypeFor[replayAvro]()} {
		beam.RegisterType(t)
	}
	register.Function1x2(replayJSONKey)
	register.Function1x2(replayCSVKey)
	register.Function1x2(replayFormKey)
	register.Function1x2(replayAvroKey)
	register.Function2x2(fixReplayJSON)
	register.Function2x2(fixReplayCSV)
	register.Function2x2(fixReplayForm)
	register.Function2x2(fixReplayRaw)
	register.Function2x2(fixReplayAvro)
}

func replayJSONKey(o replayJSON) (string, error) { return "json-" + o.ID, nil }
func replayCSVKey(o replayCSV) (string, error)   { return "csv-" + o.ID, nil }
func replayFormKey(o replayForm) (string, error) { return "form-" + o.ID, nil }
func replayAvroKey(o replayAvro) (string, error) { return "avro-" + o.ID, nil }

func good(s string) string { return strings.ReplaceAll(s, "BAD", "GOOD") }

func fixReplayJSON(_ deadletter.FailedElement, o replayJSON) (replayJSON, bool) {
	o.Note = good(o.Note)
	if o.Method == "FETCH" {
		o.Method = ""
	}
	return o, true
}
func fixReplayCSV(_ deadletter.FailedElement, o replayCSV) (replayCSV, bool) {
	o.Note = good(o.Note)
	return o, true
}
func fixReplayForm(_ deadletter.FailedElement, o replayForm) (replayForm, bool) {
	o.Note = good(o.Note)
	return o, true
}
func fixReplayRaw(_ deadletter.FailedElement, o replayRaw) (replayRaw, bool) {
	o.Line = good(o.Line)
	return o, true
}
func fixReplayAvro(_ deadletter.FailedElement, o replayAvro) (replayAvro, bool) {
	o.Note = good(o.Note)
	return o, true
}

// replayCase is one format's round trip: elems are written with body, the dead letters go to
// Pub/Sub, and fix replays them.
type replayCase struct {
	name     string
	elem     reflect.Type
	elems    []any
	body     formats.Format
	taskID   any
	fix      any
	wantDead map[string]int // dead letters by code
}

func replayCases() []replayCase {
	return []replayCase{
		{name: "json", elem: reflect.TypeFor[replayJSON](), body: formats.JSON(), taskID: replayJSONKey, fix: fixReplayJSON,
			elems: []any{replayJSON{ID: "1", Note: "ok"}, replayJSON{ID: "2", Note: "BAD"}, replayJSON{ID: "3", Note: "ok"},
				replayJSON{ID: "4", Note: "BAD too"}, replayJSON{ID: "5", Note: "ok", Method: "FETCH"}},
			wantDead: map[string]int{cloudtasksio.CodeInvalidArgument: 2, cloudtasksio.CodeSerialization: 1}},
		{name: "serialization", elem: reflect.TypeFor[replayJSON](), body: formats.JSON(), taskID: replayJSONKey, fix: fixReplayJSON,
			elems:    []any{replayJSON{ID: "s1", Note: "ok"}, replayJSON{ID: "s2", Note: "ok", Method: "FETCH"}, replayJSON{ID: "s3", Note: "ok", Method: "FETCH"}},
			wantDead: map[string]int{cloudtasksio.CodeSerialization: 2}},
		{name: "csv", elem: reflect.TypeFor[replayCSV](), body: formats.CSV(), taskID: replayCSVKey, fix: fixReplayCSV,
			elems:    []any{replayCSV{ID: "1", Note: "a,BAD"}, replayCSV{ID: "2", Note: "ok"}, replayCSV{ID: "3", Note: "BAD \"quoted\""}},
			wantDead: map[string]int{cloudtasksio.CodeInvalidArgument: 2}},
		{name: "form-urlencoded", elem: reflect.TypeFor[replayForm](), body: formats.FormURLEncoded(), taskID: replayFormKey, fix: fixReplayForm,
			elems:    []any{replayForm{ID: "1", Note: "ok"}, replayForm{ID: "2", Note: "BAD & more"}},
			wantDead: map[string]int{cloudtasksio.CodeInvalidArgument: 1}},
		{name: "raw", elem: reflect.TypeFor[replayRaw](), body: formats.Raw(), fix: fixReplayRaw,
			elems:    []any{replayRaw{Line: "line one BAD", Key: "raw-1"}, replayRaw{Line: "line two", Key: "raw-2"}, replayRaw{Line: "BAD\x00binary\xff", Key: "raw-3"}},
			wantDead: map[string]int{cloudtasksio.CodeInvalidArgument: 2}},
		{name: "avro", elem: reflect.TypeFor[replayAvro](), body: avro.Format(replayAvroSchema), taskID: replayAvroKey, fix: fixReplayAvro,
			elems:    []any{replayAvro{ID: "1", Note: "BAD"}, replayAvro{ID: "2", Note: "ok"}},
			wantDead: map[string]int{cloudtasksio.CodeInvalidArgument: 1}},
	}
}

// TestReplayWritesEachDeadLetterAgainOnceForEveryFormat writes elements of each format with
// some refused, publishes the dead letters to Pub/Sub, replays them from one subscription
// (each becomes its task), then replays the same dead letters from a second subscription:
// the second replay creates nothing, the named tasks absorbing it.
func TestReplayWritesEachDeadLetterAgainOnceForEveryFormat(t *testing.T) {
	for _, c := range replayCases() {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
			ct.Server.SetRejectFunc(func(req *cloudtaskspb.CreateTaskRequest) error {
				if strings.Contains(string(req.GetTask().GetHttpRequest().GetBody()), "BAD") {
					return fmt.Errorf("the test refuses bodies that hold BAD")
				}
				return nil
			})
			queue := cloudtasksio.Queue{Project: "demo-project", Location: "us-central1", Name: "replay-" + c.name}
			tasksClient, err := ct.NewClient(ctx)
			require.NoError(t, err)
			defer tasksClient.Close()
			require.NoError(t, exampleenv.EnsureQueue(ctx, tasksClient, queue, true))

			ps := pstest.NewServer()
			t.Cleanup(func() { ps.Close() })
			topic := "projects/demo-project/topics/dead-letters"
			subs := []string{"projects/demo-project/subscriptions/replay", "projects/demo-project/subscriptions/replay-again"}
			_, err = ps.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic})
			require.NoError(t, err)
			for _, sub := range subs {
				_, err = ps.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 60})
				require.NoError(t, err)
			}

			// The pipeline that dead-letters.
			cfg := cloudtasksio.Config{Queue: queue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/replay", Body: c.body},
				TaskIDFn: c.taskID, EmulatorEndpoint: ct.Endpoint, OnFailure: cloudtasksio.DeadLetter}
			p, s := beam.NewPipelineWithRoot()
			pub := pubsubdl.DefaultPubSubConfig(topic)
			pub.EmulatorEndpoint = ps.Addr
			pubsubdl.ToPubSub(s, pub, cloudtasksio.Write(s, cfg, beam.Create(s, c.elems...)))
			_, err = ptest.RunWithMetrics(p)
			require.NoError(t, err)
			dead := 0
			codes := map[string]int{}
			for _, m := range ps.Messages() {
				codes[m.Attributes[pubsubdl.AttrCode]]++
				dead++
			}
			require.Equal(t, c.wantDead, codes, "the dead letters by code")
			created := len(c.elems) - dead

			// Two replays of the same dead letters, from two subscriptions.
			cfg.OnFailure = cloudtasksio.FailBundle
			for i, sub := range subs {
				res, err := replay.Run(ctx, exampleEnv(ct, nil), replay.Options{Subscription: sub, PubSubEndpoint: ps.Addr, EmptyPulls: 1, Write: cfg, Fix: c.fix}, c.elem)
				require.NoError(t, err, "replay %d", i+1)
				assert.Equal(t, int64(dead), res.Replay[replay.MetricRead], "replay %d: dead letters read", i+1)
				assert.Equal(t, int64(dead), res.Replay[replay.MetricReplayed], "replay %d: replayed", i+1)
				assert.Equal(t, int64(dead), res.Replay[replay.MetricAcknowledged], "replay %d: acknowledged", i+1)
				assert.Zero(t, res.Replay[replay.MetricNotReplayable], "replay %d", i+1)
				if i == 0 {
					assert.Equal(t, dead, res.Created, "the first replay creates each dead letter's task")
					assert.Zero(t, res.Sink[cloudtasksio.MetricTasksDeduplicated])
				} else {
					assert.Zero(t, res.Created, "the second replay creates no duplicate")
					assert.Equal(t, int64(dead), res.Sink[cloudtasksio.MetricTasksDeduplicated], "every task of the second replay was already there")
				}
				created += res.Created
			}
			tasks, err := exampleenv.ListTasks(ctx, tasksClient, queue)
			require.NoError(t, err)
			assert.Len(t, tasks, len(c.elems), "one task per element, none twice")
			assert.Equal(t, len(c.elems), created)
			names := map[string]bool{}
			for _, task := range tasks {
				assert.NotContains(t, string(task.GetHttpRequest().GetBody()), "BAD")
				names[task.GetName()] = true
			}
			assert.Len(t, names, len(c.elems))

			// The first subscription is drained: reading it again finds nothing.
			res, err := replay.Run(ctx, exampleEnv(ct, nil), replay.Options{Subscription: subs[0], PubSubEndpoint: ps.Addr, EmptyPulls: 1, Write: cfg, Fix: c.fix}, c.elem)
			require.NoError(t, err)
			assert.Zero(t, res.Replay[replay.MetricRead])
			assert.Zero(t, res.Created)
		})
	}
}

func TestReplayRefusesAWriteWithoutNamedTasksOrWithADroppingPolicy(t *testing.T) {
	sub := "projects/p/subscriptions/s"
	cfg := cloudtasksio.Config{Queue: cloudtasksio.Queue{Project: "p", Location: "l", Name: "q"},
		HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/", Body: formats.JSON()}}
	_, s := beam.NewPipelineWithRoot()
	err := replay.Build(s, replay.Options{Subscription: sub, Write: cfg, Fix: fixReplayCSV}, reflect.TypeFor[replayCSV]())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "without named tasks")

	cfg.TaskIDFn = replayCSVKey
	cfg.OnFailure = cloudtasksio.DeadLetter
	err = replay.Build(s, replay.Options{Subscription: sub, Write: cfg, Fix: fixReplayCSV}, reflect.TypeFor[replayCSV]())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Write.OnFailure")

	cfg.OnFailure = cloudtasksio.FailBundle
	err = replay.Build(s, replay.Options{Subscription: sub, Write: cfg, Fix: fixReplayForm}, reflect.TypeFor[replayCSV]())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replay: Fix is a func(deadletter.FailedElement, integration.replayForm)")

	err = replay.Build(s, replay.Options{Subscription: "subscriptions/s", Write: cfg, Fix: fixReplayCSV}, reflect.TypeFor[replayCSV]())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Subscription")
}

// replayDeadLetter is a dead letter of connector for queue, carrying o as its element.
func replayDeadLetter(t *testing.T, connector, queue string, o replayJSON) deadletter.FailedElement {
	t.Helper()
	elem, typ, err := deadletter.EncodeElement(o)
	require.NoError(t, err)
	return deadletter.FailedElement{Connector: connector, Destination: queue, Code: cloudtasksio.CodeInvalidArgument,
		Error: "refused", Element: elem, ElementType: typ}
}

// publishedDeadLetters starts a Pub/Sub server with a topic and a subscription to it, and
// publishes fes to the topic through pubsubdl.ToPubSub, as the sinks sharing the topic would.
func publishedDeadLetters(t *testing.T, fes ...deadletter.FailedElement) (ps *pstest.Server, sub string) {
	t.Helper()
	ctx := context.Background()
	ps = pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	topic, sub := "projects/demo-project/topics/shared-dead-letters", "projects/demo-project/subscriptions/replay"
	_, err := ps.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic})
	require.NoError(t, err)
	_, err = ps.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: sub, Topic: topic, AckDeadlineSeconds: 60})
	require.NoError(t, err)
	p, s := beam.NewPipelineWithRoot()
	pub := pubsubdl.DefaultPubSubConfig(topic)
	pub.EmulatorEndpoint = ps.Addr
	elems := make([]any, len(fes))
	for i, fe := range fes {
		elems[i] = fe
	}
	pubsubdl.ToPubSub(s, pub, beam.Create(s, elems...))
	_, err = ptest.RunWithMetrics(p)
	require.NoError(t, err)
	require.Len(t, ps.Messages(), len(fes))
	return ps, sub
}

// replayQueue makes a queue of the replay tests on ct and returns it with a client to it.
func replayQueue(t *testing.T, ct *exampleenv.CloudTasks, name string) (cloudtasksio.Queue, func() []*cloudtaskspb.Task) {
	t.Helper()
	ctx := context.Background()
	queue := cloudtasksio.Queue{Project: "demo-project", Location: "us-central1", Name: name}
	client, err := ct.NewClient(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	require.NoError(t, exampleenv.EnsureQueue(ctx, client, queue, true))
	return queue, func() []*cloudtaskspb.Task {
		tasks, err := exampleenv.ListTasks(ctx, client, queue)
		require.NoError(t, err)
		return tasks
	}
}

// TestReplayLeavesWhatIsNotItsOwnOnASharedTopic replays from a topic that another sink and a
// Write to another queue share with the replay's Write: only the Write's own dead letters are
// written and acknowledged; the others are counted as not replayable and stay on the
// subscription, unacknowledged, for their own consumers.
func TestReplayLeavesWhatIsNotItsOwnOnASharedTopic(t *testing.T) {
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	queue, tasks := replayQueue(t, ct, "replay-shared")
	other := "projects/demo-project/locations/us-central1/queues/refunds"
	ps, sub := publishedDeadLetters(t,
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "own-1", Note: "BAD"}),
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "own-2", Note: "ok"}),
		replayDeadLetter(t, "bigquery", queue.Path(), replayJSON{ID: "another-connector", Note: "ok"}),
		replayDeadLetter(t, cloudtasksio.Connector, other, replayJSON{ID: "another-queue", Note: "ok"}))

	cfg := cloudtasksio.Config{Queue: queue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/replay", Body: formats.JSON()},
		TaskIDFn: replayJSONKey, EmulatorEndpoint: ct.Endpoint}
	var out strings.Builder
	res, err := replay.Run(context.Background(), exampleEnv(ct, &out), replay.Options{Subscription: sub, PubSubEndpoint: ps.Addr, EmptyPulls: 1, Write: cfg, Fix: fixReplayJSON}, reflect.TypeFor[replayJSON]())
	require.NoError(t, err)
	assert.Equal(t, int64(4), res.Replay[replay.MetricRead])
	assert.Equal(t, int64(2), res.Replay[replay.MetricReplayed])
	assert.Equal(t, int64(2), res.Replay[replay.MetricNotReplayable])
	assert.Equal(t, int64(2), res.Replay[replay.MetricNotOwn])
	assert.Equal(t, int64(2), res.Replay[replay.MetricAcknowledged])
	assert.Equal(t, 2, res.Created)
	for _, task := range tasks() {
		assert.Contains(t, string(task.GetHttpRequest().GetBody()), `"id":"own-`, "only the Write's own dead letters reach its queue")
	}
	for _, m := range ps.Messages() {
		if m.Attributes[pubsubdl.AttrConnector] == cloudtasksio.Connector && m.Attributes[pubsubdl.AttrDestination] == queue.Path() {
			assert.Positive(t, m.Acks, "the replayed dead letters are acknowledged")
		} else {
			assert.Zero(t, m.Acks, "the others stay on the subscription")
		}
	}
	assert.Contains(t, out.String(), "2 dead letter(s) were left on the subscription, not acknowledged (2 not the replay's own")
}

func init() { register.Function2x2(fixReplayJSONOrPanic) }

// fixReplayJSONOrPanic is fixReplayJSON with a bug: it panics on the order "boom".
func fixReplayJSONOrPanic(fe deadletter.FailedElement, o replayJSON) (replayJSON, bool) {
	if o.ID == "boom" {
		panic("no fix for order " + o.ID)
	}
	return fixReplayJSON(fe, o)
}

// TestReplayGoesOnWhenFixPanicsOnOneDeadLetter runs a replay whose Fix panics on one dead
// letter: the replay succeeds, writes and acknowledges the others, and leaves that one on the
// subscription, counted, for a fixed Fix to replay later.
func TestReplayGoesOnWhenFixPanicsOnOneDeadLetter(t *testing.T) {
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	queue, tasks := replayQueue(t, ct, "replay-fix-panics")
	ps, sub := publishedDeadLetters(t,
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "1", Note: "BAD"}),
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "boom", Note: "ok"}),
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "2", Note: "ok"}))

	cfg := cloudtasksio.Config{Queue: queue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/replay", Body: formats.JSON()},
		TaskIDFn: replayJSONKey, EmulatorEndpoint: ct.Endpoint}
	var out strings.Builder
	res, err := replay.Run(context.Background(), exampleEnv(ct, &out), replay.Options{Subscription: sub, PubSubEndpoint: ps.Addr, EmptyPulls: 1, Write: cfg, Fix: fixReplayJSONOrPanic}, reflect.TypeFor[replayJSON]())
	require.NoError(t, err, "one dead letter Fix panics on does not fail the replay")
	assert.Equal(t, int64(3), res.Replay[replay.MetricRead])
	assert.Equal(t, int64(2), res.Replay[replay.MetricReplayed])
	assert.Equal(t, int64(1), res.Replay[replay.MetricNotReplayable])
	assert.Equal(t, int64(1), res.Replay[replay.MetricFixPanicked])
	assert.Equal(t, int64(2), res.Replay[replay.MetricAcknowledged])
	assert.Equal(t, 2, res.Created)
	assert.Len(t, tasks(), 2)
	for _, m := range ps.Messages() {
		elem, err := deadletter.DecodeElement[replayJSON](mustFromMessage(t, m))
		require.NoError(t, err)
		if elem.ID == "boom" {
			assert.Zero(t, m.Acks, "left on the subscription")
		} else {
			assert.Positive(t, m.Acks)
		}
	}
	assert.Contains(t, out.String(), "1 Fix panicked on")
}

// mustFromMessage is the dead letter m carries.
func mustFromMessage(t *testing.T, m *pstest.Message) deadletter.FailedElement {
	t.Helper()
	fe, _, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.Data, Attributes: m.Attributes})
	require.NoError(t, err)
	return fe
}

// TestAReplayThatFailsReleasesWhatItRead: the reader extends what it pulls to a 10-minute ack
// deadline, so a replay that failed hid its dead letters for 10 minutes, and a rerun read
// nothing and exited 0 with no counters. Run now releases what was not acknowledged (ack
// deadline 0) when the run ends, and says when the subscription looked empty.
func TestAReplayThatFailsReleasesWhatItRead(t *testing.T) {
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	queue, tasks := replayQueue(t, ct, "replay-released")
	ps, sub := publishedDeadLetters(t,
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "r-1", Note: "ok"}),
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "r-2", Note: "ok"}),
		replayDeadLetter(t, cloudtasksio.Connector, queue.Path(), replayJSON{ID: "r-3", Note: "ok"}))
	cfg := cloudtasksio.Config{Queue: queue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/replay", Body: formats.JSON()},
		TaskIDFn: replayJSONKey, EmulatorEndpoint: ct.Endpoint}
	opts := replay.Options{Subscription: sub, PubSubEndpoint: ps.Addr, EmptyPulls: 1, Write: cfg, Fix: fixReplayJSON}
	ctx := context.Background()

	// The queue refuses every task: the replay's Write fails the bundle, and the job.
	ct.Server.SetRejectFunc(func(*cloudtaskspb.CreateTaskRequest) error { return fmt.Errorf("the test refuses every task") })
	var out strings.Builder
	_, err := replay.Run(ctx, exampleEnv(ct, &out), opts, reflect.TypeFor[replayJSON]())
	require.Error(t, err)
	assert.Contains(t, out.String(), "released the 3 dead letter(s) it had read and not acknowledged")
	for _, m := range ps.Messages() {
		assert.Zero(t, m.Acks)
		require.NotEmpty(t, m.Modacks)
		assert.Equal(t, int32(0), m.Modacks[len(m.Modacks)-1].AckDeadline, "released: ack deadline 0")
	}

	// A rerun at once reads them all.
	ct.Server.SetRejectFunc(nil)
	out.Reset()
	res, err := replay.Run(ctx, exampleEnv(ct, &out), opts, reflect.TypeFor[replayJSON]())
	require.NoError(t, err)
	assert.Equal(t, int64(3), res.Replay[replay.MetricRead], "what the failed run read is there again")
	assert.Equal(t, int64(3), res.Replay[replay.MetricAcknowledged])
	assert.Len(t, tasks(), 3)
	assert.NotContains(t, out.String(), "looked empty")

	// And a run that reads nothing says so.
	out.Reset()
	res, err = replay.Run(ctx, exampleEnv(ct, &out), opts, reflect.TypeFor[replayJSON]())
	require.NoError(t, err)
	assert.Zero(t, res.Replay[replay.MetricRead])
	assert.Contains(t, out.String(), "The subscription looked empty")
}

// replayOrder gained Priority after dead letters of it were published; replayOrderV1 is its old
// definition, kept to decode them.
type (
	replayOrder struct {
		ID       string `json:"id" cloudtasks:"task-id"`
		Note     string `json:"note"`
		Priority string `json:"priority"`
	}
	replayOrderV1 struct {
		ID   string `json:"id"`
		Note string `json:"note"`
	}
)

func init() {
	beam.RegisterType(reflect.TypeFor[replayOrder]())
	beam.RegisterType(reflect.TypeFor[replayOrderV1]())
	register.Function2x2(keepReplayOrder)
	register.Function2x2(migrateReplayOrder)
}

func keepReplayOrder(_ deadletter.FailedElement, o replayOrder) (replayOrder, bool) { return o, true }

// migrateReplayOrder is the migration: the old order, given the new field's default.
func migrateReplayOrder(_ deadletter.FailedElement, o replayOrderV1) (replayOrder, bool) {
	return replayOrder{ID: o.ID, Note: o.Note, Priority: "normal"}, true
}

// TestAReplayMigratesTheDeadLettersOfAChangedElementType: the dead letters published before a
// field was added do not decode as the new type, so a plain replay leaves them; the migration
// decodes them with the old definition (Options.ElementType names what they carry), converts
// them in Fix and writes the new type.
func TestAReplayMigratesTheDeadLettersOfAChangedElementType(t *testing.T) {
	ct := exampleCloudTasks(t, cloudtaskstest.WithoutDispatch())
	queue, tasks := replayQueue(t, ct, "replay-migrated")
	newName := deadletter.ElementTypeName(reflect.TypeFor[replayOrder]())
	var old []deadletter.FailedElement
	for _, id := range []string{"m-1", "m-2"} {
		elem, _, err := deadletter.EncodeElement(replayOrderV1{ID: id, Note: "from before the change"})
		require.NoError(t, err)
		old = append(old, deadletter.FailedElement{Connector: cloudtasksio.Connector, Destination: queue.Path(),
			Code: cloudtasksio.CodeInvalidArgument, Error: "refused", Element: elem, ElementType: newName})
	}
	ps, sub := publishedDeadLetters(t, old...)
	cfg := cloudtasksio.Config{Queue: queue, HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		EmulatorEndpoint: ct.Endpoint}
	ctx := context.Background()

	res, err := replay.Run(ctx, exampleEnv(ct, nil), replay.Options{Subscription: sub, PubSubEndpoint: ps.Addr, EmptyPulls: 1,
		Write: cfg, Fix: keepReplayOrder}, reflect.TypeFor[replayOrder]())
	require.NoError(t, err)
	assert.Equal(t, int64(2), res.Replay[replay.MetricNotReplayable], "the new type cannot decode them")
	assert.Zero(t, res.Created)

	res, err = replay.Run(ctx, exampleEnv(ct, nil), replay.Options{Subscription: sub, PubSubEndpoint: ps.Addr, EmptyPulls: 1,
		Write: cfg, Fix: migrateReplayOrder, ElementType: newName}, reflect.TypeFor[replayOrderV1]())
	require.NoError(t, err)
	assert.Equal(t, int64(2), res.Replay[replay.MetricReplayed])
	assert.Equal(t, int64(2), res.Replay[replay.MetricAcknowledged])
	assert.Equal(t, 2, res.Created)
	for _, task := range tasks() {
		assert.Contains(t, string(task.GetHttpRequest().GetBody()), `"note":"from before the change","priority":"normal"`)
	}
}
