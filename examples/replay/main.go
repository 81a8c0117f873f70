// Command replay shows how dead letters are replayed. It first runs the dead-letter example
// (ten orders, four of which Cloud Tasks will never accept, published to a Pub/Sub topic),
// then a replay pipeline that reads those dead letters from a subscription, decodes the order
// each one carries (deadletter.DecodeElement), fixes it in one function (FixOrder in
// examples/replay/replay) and writes it again through cloudtasksio.Write with named tasks.
// A second replay of the same dead letters, from a second subscription, creates nothing new.
//
//	go run ./examples/replay
//
// Without flags it runs on Beam's prism runner against an in-process Cloud Tasks server
// (cloudtaskstest) and an in-process Pub/Sub server (pstest). To use emulators of your own:
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 &
//	gcloud beta emulators pubsub start --host-port=localhost:8085 &
//	go run ./examples/replay --cloudtasks_emulator=localhost:8123 --pubsub_emulator=localhost:8085
//
// Beam's standard flags apply (--runner and the runner's own flags). The replay reads the
// subscription with a bounded DoFn that pulls until the subscription is drained (Beam Go has
// no Pub/Sub source outside Dataflow); docs/dead-letters.md explains the replay.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/deadletters/deadletters"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/replay/replay"
)

var (
	cloudTasksEmulator = flag.String("cloudtasks_emulator", "", "host:port of a Cloud Tasks emulator; empty starts one in this process")
	pubSubEmulator     = flag.String("pubsub_emulator", "", "host:port of a Pub/Sub emulator; empty starts one in this process")
)

func main() { exampleenv.Main("replay", run) }

func run(ctx context.Context) error {
	ct := exampleenv.StartCloudTasks(*cloudTasksEmulator, cloudtaskstest.WithoutDispatch())
	defer ct.Close()
	pubSub, stopPubSub := deadletters.StartPubSub(*pubSubEmulator)
	defer stopPubSub()
	_, err := replay.Demo(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, pubSub)
	return err
}
