// Command deadletters shows the dead-letter policy end to end. Ten orders become Cloud Tasks;
// the four that Cloud Tasks will never accept (a body over the 100 KiB task limit, a URL that
// is not http(s), an unknown HTTP method, an order without an id for its task name) are
// published to a Pub/Sub topic instead of failing the pipeline. Then the program reads the
// topic like a consumer and prints, for each message, its attributes and the task recovered
// from its data.
//
//	go run ./examples/deadletters
//
// Without flags it runs on Beam's prism runner against an in-process Cloud Tasks server
// (cloudtaskstest) and an in-process Pub/Sub server (pstest). To use emulators of your own:
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 &
//	gcloud beta emulators pubsub start --host-port=localhost:8085 &
//	go run ./examples/deadletters --cloudtasks_emulator=localhost:8123 --pubsub_emulator=localhost:8085
//
// Beam's standard flags apply (--runner and the runner's own flags). The in-process servers
// listen on loopback, so only a runner executing in this process reaches them; give emulator
// addresses that the workers can reach when running elsewhere.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/deadletters/deadletters"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

var (
	cloudTasksEmulator = flag.String("cloudtasks_emulator", "", "host:port of a Cloud Tasks emulator; empty starts one in this process")
	pubSubEmulator     = flag.String("pubsub_emulator", "", "host:port of a Pub/Sub emulator; empty starts one in this process")
)

func main() { exampleenv.Main("deadletters", run) }

func run(ctx context.Context) error {
	ct := exampleenv.StartCloudTasks(*cloudTasksEmulator, cloudtaskstest.WithoutDispatch())
	defer ct.Close()
	pubSub, stopPubSub := deadletters.StartPubSub(*pubSubEmulator)
	defer stopPubSub()
	opts := deadletters.Options{Settings: deadletters.DefaultSettings(pubSub), Orders: deadletters.DemoOrders()}
	_, err := deadletters.Run(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, opts)
	return err
}
