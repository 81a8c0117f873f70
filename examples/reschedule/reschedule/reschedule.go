// Package reschedule is the delete-then-create example. Appointment reminders are named tasks
// scheduled ahead. Cloud Tasks cannot change a task, so when an appointment moves, one
// pipeline deletes the reminder of the old version (cloudtasksio.Delete) and creates the
// reminder of the new version (cloudtasksio.Write) under a new key; when an appointment is
// cancelled, it only deletes.
//
// The program in examples/reschedule runs it; the integration tests call Run directly.
package reschedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeFor[Reminder]())
	beam.RegisterType(reflect.TypeFor[Change]())
	register.Function1x2(ReminderKey)
	register.Function1x2(ReplacedKey)
	register.Function2x0(NewReminder)
	register.Emitter1[Reminder]()
}

// Queue holds the reminders. The example pauses it, so that its tasks stay listed.
var Queue = cloudtasksio.Queue{Project: "demo-project", Location: "europe-west1", Name: "reminders"}

// Reminder is the reminder of one version of an appointment: a task due at At, whose JSON
// body is the appointment, its version and the patient.
type Reminder struct {
	Appointment string    `json:"appointment"`
	Version     int       `json:"version"`
	Patient     string    `json:"patient"`
	At          time.Time `cloudtasks:"schedule-time"` // when the task is due; not in the body
}

// Change is one change to an appointment whose reminder of version From exists: it moves to
// At (its next version, From+1, gets a reminder), or, Cancelled, it has no reminder any more.
type Change struct {
	Appointment string
	From        int
	Patient     string
	At          time.Time
	Cancelled   bool
}

// key is the task-id key of an appointment's reminder of version v. The version is part of
// the key because a task cannot be changed, and a deleted task's name cannot be reused for
// the queue's name retention (an hour or more): each version is a task of its own.
func key(appointment string, v int) string { return fmt.Sprintf("appointment/%s/v%d", appointment, v) }

// ReminderKey is Write's TaskIDFn: the key of the reminder's appointment and version.
func ReminderKey(r Reminder) (string, error) { return key(r.Appointment, r.Version), nil }

// ReplacedKey is Delete's TaskIDFn: the key of the reminder a change replaces, the one Write
// named from ReminderKey for version From.
func ReplacedKey(c Change) (string, error) { return key(c.Appointment, c.From), nil }

// NewReminder emits the reminder of a change's new version, and nothing for a cancellation.
func NewReminder(c Change, emit func(Reminder)) {
	if !c.Cancelled {
		emit(Reminder{Appointment: c.Appointment, Version: c.From + 1, Patient: c.Patient, At: c.At})
	}
}

// writeConfig creates each reminder as a named task at the service of cloudTasksEndpoint.
func writeConfig(cloudTasksEndpoint string) cloudtasksio.Config {
	return cloudtasksio.Config{
		Queue:            Queue,
		HTTP:             &cloudtasksio.HTTPTarget{URL: "https://reminders.example.com/send", Body: formats.JSON()},
		TaskIDFn:         ReminderKey,
		EmulatorEndpoint: cloudTasksEndpoint,
	}
}

// deleteConfig deletes the reminder each change replaces. A reminder already gone (sent, or
// deleted by an earlier run) counts as done.
func deleteConfig(cloudTasksEndpoint string) cloudtasksio.DeleteConfig {
	return cloudtasksio.DeleteConfig{Queue: Queue, TaskIDFn: ReplacedKey, EmulatorEndpoint: cloudTasksEndpoint}
}

// BuildChanges adds the change pipeline to s: one Delete of the replaced reminders, and one
// Write of the new ones. The two keys differ, so the two steps need no order between them.
func BuildChanges(s beam.Scope, cloudTasksEndpoint string, changes beam.PCollection) {
	cloudtasksio.Delete(s, deleteConfig(cloudTasksEndpoint), changes)
	cloudtasksio.Write(s, writeConfig(cloudTasksEndpoint), beam.ParDo(s, NewReminder, changes))
}

// Options are the input of one run.
type Options struct {
	// Reminders are created by the first pipeline.
	Reminders []Reminder
	// Changes are applied by the second.
	Changes []Change
}

// Demo returns the example's input, with times from now: three appointments, one moved a
// day later and one cancelled.
func Demo(now time.Time) Options {
	at := now.Truncate(time.Hour).Add(72 * time.Hour).UTC()
	return Options{
		Reminders: []Reminder{
			{Appointment: "a-100", Version: 1, Patient: "Ada", At: at},
			{Appointment: "a-101", Version: 1, Patient: "Grace", At: at.Add(time.Hour)},
			{Appointment: "a-102", Version: 1, Patient: "Edsger", At: at.Add(2 * time.Hour)},
		},
		Changes: []Change{
			{Appointment: "a-100", From: 1, Patient: "Ada", At: at.Add(24 * time.Hour)},
			{Appointment: "a-102", From: 1, Cancelled: true},
		},
	}
}

// Scheduled is one reminder the queue holds.
type Scheduled struct {
	Appointment string
	Version     int
	At          time.Time
}

// Result is what a run produced.
type Result struct {
	// Before and After are the reminders the queue held after each pipeline, by appointment.
	Before, After []Scheduled
	// Counters are the sink's metrics of the change pipeline (namespace cloudtasksio).
	Counters map[string]int64
}

// Run creates the queue (paused), runs the reminder pipeline and then the change pipeline
// with env.Runner, and prints what the queue holds after each to env.Out.
func Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error) {
	client, err := env.CloudTasks.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	if err := exampleenv.EnsureQueue(ctx, client, Queue, true); err != nil {
		return nil, err
	}
	list := func() ([]Scheduled, error) {
		tasks, err := exampleenv.ListTasks(ctx, client, Queue)
		if err != nil {
			return nil, err
		}
		out := make([]Scheduled, 0, len(tasks))
		for _, t := range tasks {
			var r Reminder
			if err := json.Unmarshal(t.GetHttpRequest().GetBody(), &r); err != nil {
				return nil, fmt.Errorf("task %s: its body is no reminder: %w", t.GetName(), err)
			}
			out = append(out, Scheduled{Appointment: r.Appointment, Version: r.Version, At: t.GetScheduleTime().AsTime().UTC()})
		}
		slices.SortFunc(out, func(a, b Scheduled) int { return strings.Compare(a.Appointment, b.Appointment) })
		return out, nil
	}

	changes := func() (beam.PipelineResult, error) {
		p, s := beam.NewPipelineWithRoot()
		BuildChanges(s, env.CloudTasks.Endpoint, beam.CreateList(s, opts.Changes))
		return env.Runner(ctx, p)
	}

	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Write(s, writeConfig(env.CloudTasks.Endpoint), beam.CreateList(s, opts.Reminders))
	if _, err := env.Runner(ctx, p); errors.Is(err, exampleenv.ErrDryRun) {
		// The runner translated the reminder pipeline without running it: translate the
		// change pipeline too (the one this example is about, printed last), and stop there.
		_, err = changes()
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("running the reminder pipeline: %w", err)
	}
	res := &Result{}
	if res.Before, err = list(); err != nil {
		return nil, err
	}

	pr, err := changes()
	if err != nil {
		return nil, fmt.Errorf("running the change pipeline: %w", err)
	}
	res.Counters = exampleenv.Counters(pr, cloudtasksio.MetricsNamespace)
	if res.After, err = list(); err != nil {
		return nil, err
	}
	res.Print(env.Output())
	return res, nil
}

// Print writes the reminders before and after the changes, then the change pipeline's counters.
func (r *Result) Print(w io.Writer) {
	show := func(title string, reminders []Scheduled) {
		fmt.Fprintf(w, "%s (%d in %s):\n", title, len(reminders), Queue.Path())
		for _, s := range reminders {
			fmt.Fprintf(w, "  %s v%d due %s\n", s.Appointment, s.Version, s.At.Format(time.RFC3339))
		}
	}
	show("Reminders before the changes", r.Before)
	show("Reminders after the changes", r.After)
	fmt.Fprintf(w, "Changes: %s=%d %s=%d %s=%d %s=%d\n",
		cloudtasksio.MetricRecordsDeleted, r.Counters[cloudtasksio.MetricRecordsDeleted],
		cloudtasksio.MetricTasksAlreadyGone, r.Counters[cloudtasksio.MetricTasksAlreadyGone],
		cloudtasksio.MetricRecordsSend, r.Counters[cloudtasksio.MetricRecordsSend],
		cloudtasksio.MetricRecordsSendErrors, r.Counters[cloudtasksio.MetricRecordsSendErrors])
}
