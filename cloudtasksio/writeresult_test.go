package cloudtasksio

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// resultOrder is the element type of the created-task tests: a key and a schedule time.
type resultOrder struct {
	ID  string    `json:"id"`
	Key string    `cloudtasks:"task-id"`
	At  time.Time `cloudtasks:"schedule-time"`
}

// createdOut collects what a DoFn emits on its created-task output.
type createdOut struct {
	times []beam.EventTime
	tasks []CreatedTask
}

func (o *createdOut) emit(et beam.EventTime, t CreatedTask) {
	o.times = append(o.times, et)
	o.tasks = append(o.tasks, t)
}

// newResultWriteFn returns a set-up writeResultFn for elements of elem's type, sending to
// bundleQueue at srv.
func newResultWriteFn(t *testing.T, addr string, elem any) *writeResultFn {
	t.Helper()
	q, err := ParseQueue(bundleQueue)
	require.NoError(t, err)
	spec, err := compile(Config{Queue: q, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		EmulatorEndpoint: addr}, typeOf(elem))
	require.NoError(t, err)
	f := &writeResultFn{writeFn{Spec: spec}}
	require.NoError(t, f.Setup())
	return f
}

// runResultBundle runs one bundle of elems (element i at event time i+1) and returns the
// created tasks it emitted.
func runResultBundle(t *testing.T, f *writeResultFn, elems ...any) *createdOut {
	t.Helper()
	out := &createdOut{}
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters, out.emit))
	for i, e := range elems {
		require.NoError(t, f.ProcessElement(ctx, beam.EventTime(i+1), e, discardDeadLetters, out.emit))
	}
	require.NoError(t, f.FinishBundle(ctx, discardDeadLetters, out.emit))
	return out
}

func TestAnUnnamedTaskIsReportedWithTheNameCloudTasksGaveIt(t *testing.T) {
	srv := newBundleServer(t)
	f := newResultWriteFn(t, srv.Addr, urlOrder{})
	out := runResultBundle(t, f, urlOrder{ID: "a"})

	require.Len(t, out.tasks, 1)
	stored := srv.Tasks(bundleQueue)
	require.Len(t, stored, 1)
	got := out.tasks[0]
	assert.Equal(t, bundleQueue, got.Queue)
	assert.Equal(t, stored[0].GetName(), got.Name, "the service's name for the unnamed task")
	assert.True(t, strings.HasPrefix(got.Name, bundleQueue+"/tasks/"))
	assert.Empty(t, got.Key)
	assert.Equal(t, stored[0].GetCreateTime().AsTime(), got.CreateTime)
	assert.Equal(t, stored[0].GetScheduleTime().AsTime(), got.ScheduleTime, "the service set the schedule time")
	assert.False(t, got.CreateTime.IsZero())
	assert.False(t, got.Duplicate)
	assert.False(t, got.AssumedCreated)
	assert.Equal(t, []beam.EventTime{1}, out.times, "the element's event time")
}

func TestANamedTaskIsReportedWithItsKeyAndAgainAsADuplicateOnReplay(t *testing.T) {
	srv := newBundleServer(t)
	f := newResultWriteFn(t, srv.Addr, resultOrder{})
	at := time.Now().Add(time.Hour).Truncate(time.Second).UTC() // within the service's 30 days
	elems := []any{resultOrder{ID: "1", Key: "order-1"}, resultOrder{ID: "2", Key: "order-2", At: at}}
	q, err := ParseQueue(bundleQueue)
	require.NoError(t, err)

	first := runResultBundle(t, f, elems...)
	replay := runResultBundle(t, f, elems...) // a retried bundle, or a rerun of the job
	require.Len(t, first.tasks, 2)
	require.Len(t, replay.tasks, 2, "the output is complete on replay")
	assert.Len(t, srv.Tasks(bundleQueue), 2, "the replay created nothing")

	byKey := func(out *createdOut) map[string]CreatedTask {
		m := map[string]CreatedTask{}
		for _, c := range out.tasks {
			m[c.Key] = c
		}
		return m
	}
	created, again := byKey(first), byKey(replay)
	for _, key := range []string{"order-1", "order-2"} {
		stored, ok := srv.Task(taskName(q, key))
		require.True(t, ok, key)
		c := created[key]
		assert.Equal(t, taskName(q, key), c.Name, key)
		assert.Equal(t, bundleQueue, c.Queue, key)
		assert.False(t, c.Duplicate, key)
		assert.Equal(t, stored.GetCreateTime().AsTime(), c.CreateTime, key)
		assert.Equal(t, stored.GetScheduleTime().AsTime(), c.ScheduleTime, key)

		d := again[key]
		assert.Equal(t, taskName(q, key), d.Name, key)
		assert.True(t, d.Duplicate, "%s: ALREADY_EXISTS", key)
		assert.True(t, d.CreateTime.IsZero(), "%s: ALREADY_EXISTS does not say when", key)
	}
	assert.Equal(t, at, created["order-2"].ScheduleTime)
	assert.Equal(t, at, again["order-2"].ScheduleTime, "a duplicate reports the schedule time the sink asked for")
	assert.True(t, again["order-1"].ScheduleTime.IsZero(), "a duplicate that asked for none reports none")
}

func TestExactlyOnceReportsTheSameCreatedTasks(t *testing.T) {
	srv := newStagedServer(t, "result")
	spec := stagedSpecFor(t, srv, "result", eoOrder{})
	stage := &stageResultFn{stageFn{Spec: spec}}
	require.NoError(t, stage.Setup())
	var envs []keyedEnvelope
	ctx := context.Background()
	for _, e := range []eoOrder{{ID: "1", Key: "k1"}, {ID: "2", Key: "k2"}} {
		require.NoError(t, stage.ProcessElement(ctx, e, func(env keyedEnvelope) { envs = append(envs, env) }))
	}
	require.Len(t, envs, 2)
	assert.Equal(t, "k1", envs[0].Key, "the key travels with the staged task")

	create := &stagedCreateResultFn{stagedCreateFn{Spec: spec}}
	require.NoError(t, create.Setup())
	run := func() *createdOut {
		out := &createdOut{}
		require.NoError(t, create.StartBundle(ctx, discardDeadLetters, out.emit))
		for i, env := range envs {
			require.NoError(t, create.ProcessElement(ctx, beam.EventTime(10+i), env, discardDeadLetters, out.emit))
		}
		require.NoError(t, create.FinishBundle(ctx, discardDeadLetters, out.emit))
		return out
	}
	first, replay := run(), run() // the replay re-sends the staged tasks the Reshuffle kept
	q := spec.Queue
	for _, out := range []*createdOut{first, replay} {
		require.Len(t, out.tasks, 2)
		assert.ElementsMatch(t, []beam.EventTime{10, 11}, out.times)
	}
	for _, c := range first.tasks {
		stored, ok := srv.Task(c.Name)
		require.True(t, ok, c.Name)
		assert.Equal(t, taskName(q, c.Key), c.Name)
		assert.Equal(t, stored.GetCreateTime().AsTime(), c.CreateTime)
		assert.False(t, c.Duplicate)
	}
	for _, c := range replay.tasks {
		assert.Equal(t, taskName(q, c.Key), c.Name)
		assert.True(t, c.Duplicate)
	}
}

func TestExactlyOnceReportsAnEnvelopeAssumedCreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		staged := DefaultStagedOptions()
		staged.VerifyQueueRetention = false
		staged.ExpiredEnvelopePolicy = ExpiredAssumeCreated
		spec := eoSpec(t, "q", eoOrder{}, staged)
		creator := &fakeCreator{}
		f := &stagedCreateResultFn{*newStagedCreateFnWith(spec, creator)}
		require.NoError(t, f.Setup())
		env := expiredEnvelope(t, spec, "k")[0]
		out := &createdOut{}
		ctx := context.Background()
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters, out.emit))
		require.NoError(t, f.ProcessElement(ctx, 7, keyedEnvelope{Queue: env.Queue, Origin: env.Origin, Deadline: env.Deadline, Task: env.Task, Key: "k"},
			discardDeadLetters, out.emit))
		require.NoError(t, f.FinishBundle(ctx, discardDeadLetters, out.emit))
		assert.Zero(t, creator.callCount(), "nothing was sent")
		require.Len(t, out.tasks, 1)
		assert.True(t, out.tasks[0].AssumedCreated)
		assert.False(t, out.tasks[0].Duplicate)
		assert.Equal(t, "k", out.tasks[0].Key)
		assert.Equal(t, taskName(spec.Queue, "k"), out.tasks[0].Name)
		assert.True(t, out.tasks[0].CreateTime.IsZero())
	})
}

// TestOnlyWriteWithResultHasTheCreatedOutput checks the graphs: plain Write keeps its DoFns
// of one output, which build no CreatedTask, in both delivery modes.
func TestOnlyWriteWithResultHasTheCreatedOutput(t *testing.T) {
	q, err := ParseQueue(bundleQueue)
	require.NoError(t, err)
	for _, d := range []DeliveryGuarantee{AtLeastOnce, ExactlyOnce} {
		cfg := Config{Queue: q, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, Delivery: d}
		for _, result := range []bool{false, true} {
			p, s := beam.NewPipelineWithRoot()
			col := beam.Create(s, urlOrder{ID: "a"})
			var err error
			if result {
				var r WriteResult
				r, err = TryWriteWithResult(s, cfg, col)
				assert.True(t, r.Created.IsValid() && r.DeadLetters.IsValid())
				assert.Equal(t, "cloudtasksio.CreatedTask", r.Created.Type().Type().String())
			} else {
				_, err = TryWrite(s, cfg, col)
			}
			require.NoError(t, err)
			edges, _, err := p.Build()
			require.NoError(t, err)
			var sinkFns []string
			for _, e := range edges {
				if e.DoFn == nil {
					continue
				}
				name := reflect.TypeOf(e.DoFn.Recv).String()
				if strings.HasPrefix(name, "*cloudtasksio.") {
					sinkFns = append(sinkFns, fmt.Sprintf("%s/%d", name, len(e.Output)))
				}
			}
			want := map[bool]map[DeliveryGuarantee][]string{
				false: {AtLeastOnce: {"*cloudtasksio.writeFn/1"}, ExactlyOnce: {"*cloudtasksio.stageFn/1", "*cloudtasksio.stagedCreateFn/1"}},
				true: {AtLeastOnce: {"*cloudtasksio.writeResultFn/2"},
					ExactlyOnce: {"*cloudtasksio.stageResultFn/1", "*cloudtasksio.stagedCreateResultFn/2"}},
			}[result][d]
			assert.Equal(t, want, sinkFns, "%v, with result %v", d, result)
		}
	}
}
