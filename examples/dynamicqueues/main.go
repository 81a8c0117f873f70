// Command dynamicqueues writes orders to per-region Cloud Tasks queues from one Write:
// Config.QueueFn picks each order's queue (Europe, the US, Asia, or a fallback queue for other
// regions), and WriterOptions.PerDestinationMetrics counts the tasks of each queue. An order
// Cloud Tasks rejects is logged and dropped (LogAndDrop) and counted in its queue's sendErrors.
// It prints those metrics next to what each queue holds afterwards.
//
//	go run ./examples/dynamicqueues
//
// Without flags it runs on Beam's prism runner against an in-process Cloud Tasks server
// (cloudtaskstest). To use an emulator of your own:
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 &
//	go run ./examples/dynamicqueues --cloudtasks_emulator=localhost:8123
//
// The queues are created paused, so their tasks stay listed instead of being dispatched.
// Beam's standard flags apply (--runner and the runner's own flags). The in-process server
// listens on loopback, so only a runner executing in this process reaches it.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/dynamicqueues/dynamicqueues"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

var (
	cloudTasksEmulator = flag.String("cloudtasks_emulator", "", "host:port of a Cloud Tasks emulator; empty starts one in this process")
)

func main() { exampleenv.Main("dynamicqueues", run) }

func run(ctx context.Context) error {
	ct := exampleenv.StartCloudTasks(*cloudTasksEmulator)
	defer ct.Close()
	_, err := dynamicqueues.Run(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, dynamicqueues.Options{Orders: dynamicqueues.DemoOrders()})
	return err
}
