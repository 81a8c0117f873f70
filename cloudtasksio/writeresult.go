package cloudtasksio

import (
	"context"
	"reflect"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// This file holds WriteWithResult, the form of Write that also returns the tasks it created,
// and the DoFns that emit them. Each is the plain Write's DoFn with a second output: the
// plain DoFns build no CreatedTask, so Write pays nothing for this form.

func init() {
	register.DoFn5x1[context.Context, beam.EventTime, beam.X, func(beam.EventTime, deadletter.FailedElement), func(beam.EventTime, CreatedTask), error](&writeResultFn{})
	register.DoFn3x1[context.Context, beam.X, func(keyedEnvelope), error](&stageResultFn{})
	register.DoFn5x1[context.Context, beam.EventTime, keyedEnvelope, func(beam.EventTime, deadletter.FailedElement), func(beam.EventTime, CreatedTask), error](&stagedCreateResultFn{})
	register.Emitter2[beam.EventTime, CreatedTask]()
	register.Emitter1[keyedEnvelope]()
	beam.RegisterType(reflect.TypeFor[CreatedTask]())
	beam.RegisterType(reflect.TypeFor[keyedEnvelope]())
}

// WriteResult is what WriteWithResult returns: the tasks the sink created and the elements it
// could not create a task for. The name and the two outputs follow Beam's BigQueryIO
// (WriteResult: the successful and the failed inserts) and SpannerIO (SpannerWriteResult: an
// output to wait on, and the failed mutations).
type WriteResult struct {
	// Created is a PCollection of CreatedTask: one per element whose task Cloud Tasks accepted,
	// a named task it already had (Duplicate) included. It is complete once the write step is:
	// a step that takes it as a side input, or reads a combination of it, runs after every task
	// of its window is created (Beam Java's Wait.on). Like the dead letters, it is at least
	// once (a retried bundle emits its tasks again, marked Duplicate when they are named) and
	// each carries its element's event time; "Dead letters and windows" in the package
	// documentation says which window it lands in.
	Created beam.PCollection
	// DeadLetters is the PCollection of deadletter.FailedElement that Write returns.
	DeadLetters beam.PCollection
}

// CreatedTask is one task WriteWithResult created, or found created already, for one input
// element: where it is and when it runs, never its body or headers. Its fields are plain
// values that Beam's schema coder encodes, so it can be written out as it is (to BigQuery, to
// files as JSON) to record which element became which task.
type CreatedTask struct {
	// Queue is the queue's path, "projects/P/locations/L/queues/Q".
	Queue string
	// Name is the task's full name, Queue + "/tasks/ID": for an unnamed task the name Cloud
	// Tasks gave it, which is known nowhere else; for a named task TaskID(Key), or in
	// exactly-once mode the random id the sink drew.
	Name string
	// Key is the key the task was named from (Config.TaskIDFn or the `cloudtasks:"task-id"`
	// field); empty for a task without one.
	Key string
	// ScheduleTime is when Cloud Tasks first dispatches the task, as it answered (for a task
	// that set none, the time it was created). For a Duplicate it is the schedule time the
	// sink asked for, zero when it asked none: the existing task's is not returned.
	ScheduleTime time.Time
	// CreateTime is when Cloud Tasks created the task, as it answered (the service keeps whole
	// seconds). Zero for a Duplicate and for AssumedCreated.
	CreateTime time.Time
	// Duplicate is true when Cloud Tasks answered ALREADY_EXISTS: a task of this name existed
	// already, created by an earlier attempt, a retried bundle or an earlier run. A replay
	// thus still lists every element's task.
	Duplicate bool
	// AssumedCreated is true, in exactly-once mode only, for a staged task past its creation
	// deadline that StagedOptions.ExpiredEnvelopePolicy ExpiredAssumeCreated counted as
	// created without sending it: nothing confirms that it exists.
	AssumedCreated bool
}

// WriteWithResult is Write returning, beside the dead letters, the tasks it created (see
// WriteResult and CreatedTask), in both delivery modes. A bad configuration panics at pipeline
// construction; use TryWriteWithResult to get the error instead.
//
// A later step can wait for the tasks, as Beam Java's Wait.on does, by taking Created as a
// side input:
//
//	res := cloudtasksio.WriteWithResult(s, cfg, orders)
//	count := stats.CountElms(s, res.Created) // one value, once every task is created
//	beam.ParDo0(s, markBatchDone, beam.Impulse(s), beam.SideInput{Input: count})
func WriteWithResult(s beam.Scope, cfg Config, col beam.PCollection) WriteResult {
	out, err := TryWriteWithResult(s, cfg, col)
	if err != nil {
		panic(err)
	}
	return out
}

// TryWriteWithResult is WriteWithResult returning construction errors instead of panicking,
// the same errors as TryWrite.
func TryWriteWithResult(s beam.Scope, cfg Config, col beam.PCollection) (WriteResult, error) {
	out, err := tryWrite(s, cfg, col, true)
	return out, withPrefix(err)
}

// writeResult names the outputs of the sink's last DoFn: the dead letters, then with created
// the created tasks.
func writeResult(out []beam.PCollection, created bool) WriteResult {
	r := WriteResult{DeadLetters: out[0]}
	if created {
		r.Created = out[1]
	}
	return r
}

// createdTask describes the task req created: returned is what Cloud Tasks answered (nil for a
// duplicate, or a task assumed created), key the key the task was named from.
func createdTask(req *cloudtaskspb.CreateTaskRequest, returned *cloudtaskspb.Task, key string, duplicate bool) CreatedTask {
	task := req.GetTask()
	c := CreatedTask{Queue: req.GetParent(), Name: task.GetName(), Key: key, Duplicate: duplicate}
	if returned != nil {
		task = returned
		if returned.GetName() != "" {
			c.Name = returned.GetName()
		}
		if t := returned.GetCreateTime(); t != nil {
			c.CreateTime = t.AsTime()
		}
	}
	if t := task.GetScheduleTime(); t != nil {
		c.ScheduleTime = t.AsTime()
	}
	return c
}

// writeResultFn is writeFn with a second output, the created tasks.
type writeResultFn struct{ writeFn }

func (f *writeResultFn) StartBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement), created func(beam.EventTime, CreatedTask)) error {
	f.emitCreated = created
	return withPrefix(f.startBundle(ctx, emit))
}

func (f *writeResultFn) ProcessElement(ctx context.Context, et beam.EventTime, elem beam.X, emit func(beam.EventTime, deadletter.FailedElement), created func(beam.EventTime, CreatedTask)) error {
	f.emitCreated = created
	return withPrefix(f.processElement(ctx, et, elem, emit))
}

func (f *writeResultFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement), created func(beam.EventTime, CreatedTask)) error {
	f.emitCreated = created
	return withPrefix(f.finishBundle(ctx, emit))
}

// keyedEnvelope is the envelope of WriteWithResult's exactly-once form: the key travels with
// the staged task through the Reshuffle, so that the create step can report it. Plain Write
// keeps envelope, so that its Reshuffle's encoding does not change.
type keyedEnvelope struct {
	Queue    string
	Origin   int64
	Deadline int64
	Task     []byte
	Key      string
}

// stageResultFn is stageFn emitting keyed envelopes.
type stageResultFn struct{ stageFn }

func (f *stageResultFn) ProcessElement(ctx context.Context, elem beam.X, emit func(keyedEnvelope)) error {
	env, key, err := f.stageKeyed(elem)
	if err != nil {
		logCut(ctx, "an element's failure in exactly-once mode", err)
		return withPrefix(err)
	}
	if env == nil {
		f.skipped.Inc(ctx, 1)
		return nil
	}
	emit(keyedEnvelope{Queue: env.Queue, Origin: env.Origin, Deadline: env.Deadline, Task: env.Task, Key: key})
	return nil
}

// stagedCreateResultFn is stagedCreateFn taking keyed envelopes, with a second output, the
// created tasks.
type stagedCreateResultFn struct{ stagedCreateFn }

func (f *stagedCreateResultFn) StartBundle(ctx context.Context, _ func(beam.EventTime, deadletter.FailedElement), created func(beam.EventTime, CreatedTask)) error {
	f.emitCreated = created
	return withPrefix(f.startBundle(ctx))
}

func (f *stagedCreateResultFn) ProcessElement(ctx context.Context, et beam.EventTime, env keyedEnvelope,
	_ func(beam.EventTime, deadletter.FailedElement), created func(beam.EventTime, CreatedTask)) error {
	f.emitCreated = created
	plain := envelope{Queue: env.Queue, Origin: env.Origin, Deadline: env.Deadline, Task: env.Task}
	return withPrefix(f.processElement(ctx, plain, &stagedCreate{eventTime: et, key: env.Key}))
}

func (f *stagedCreateResultFn) FinishBundle(ctx context.Context, emit func(beam.EventTime, deadletter.FailedElement), created func(beam.EventTime, CreatedTask)) error {
	f.emitCreated = created
	return withPrefix(f.stagedCreateFn.FinishBundle(ctx, emit)) // (withPrefix adds the prefix once)
}
