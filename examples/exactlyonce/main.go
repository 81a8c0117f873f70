// Command exactlyonce shows exactly-once task creation (Delivery: ExactlyOnce). It writes the
// same five payments four times: twice with a task-id key, where the second run creates
// nothing because every task name already exists, and twice with random ids, where the second
// run duplicates every task because a new run draws new ids. The printed summary explains
// which failures the mode covers and what it needs from the runner (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/exactly-once.md
// has the details).
//
//	go run ./examples/exactlyonce
//
// Without flags it runs on Beam's prism runner against an in-process Cloud Tasks server
// (cloudtaskstest) whose queues keep task names for two hours. To use an emulator of your
// own:
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 &
//	go run ./examples/exactlyonce --cloudtasks_emulator=localhost:8123
//
// The queues are created paused, so their tasks stay listed instead of being dispatched.
// Beam's standard flags apply (--runner and the runner's own flags). The in-process server
// listens on loopback, so only a runner executing in this process reaches it.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exactlyonce/exactlyonce"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

var (
	cloudTasksEmulator = flag.String("cloudtasks_emulator", "", "host:port of a Cloud Tasks emulator; empty starts one in this process")
)

func main() { exampleenv.Main("exactlyonce", run) }

func run(ctx context.Context) error {
	ct := exampleenv.StartCloudTasks(*cloudTasksEmulator)
	defer ct.Close()
	_, err := exactlyonce.Run(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, exactlyonce.Options{Payments: exactlyonce.DemoPayments()})
	return err
}
