// Command reschedule changes scheduled tasks the only way Cloud Tasks allows: it deletes the
// old task and creates a new one. Appointment reminders are named tasks due days ahead; a
// first pipeline creates them (cloudtasksio.Write), a second applies changes: an appointment
// moved a day later gets its old reminder deleted (cloudtasksio.Delete) and a new one, under a
// key with the next version; a cancelled one only loses its reminder. It prints the queue's
// reminders after each pipeline.
//
//	go run ./examples/reschedule
//
// Without flags it runs on Beam's prism runner against an in-process Cloud Tasks server
// (cloudtaskstest). To use an emulator of your own:
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 &
//	go run ./examples/reschedule --cloudtasks_emulator=localhost:8123
//
// The queue is created paused, so its tasks stay listed instead of being dispatched. Against
// an emulator that still remembers the names of an earlier run (for the queue's name
// retention), a rerun's creates are answered ALREADY_EXISTS and create nothing: start the
// emulator again first. Beam's standard flags apply (--runner and the runner's own flags).
// The in-process server listens on loopback, so only a runner executing in this process
// reaches it.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/reschedule/reschedule"
)

var (
	cloudTasksEmulator = flag.String("cloudtasks_emulator", "", "host:port of a Cloud Tasks emulator; empty starts one in this process")
)

func main() { exampleenv.Main("reschedule", run) }

func run(ctx context.Context) error {
	ct := exampleenv.StartCloudTasks(*cloudTasksEmulator)
	defer ct.Close()
	_, err := reschedule.Run(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, reschedule.Demo(time.Now()))
	return err
}
