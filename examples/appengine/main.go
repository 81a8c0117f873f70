// Command appengine writes thumbnail jobs as App Engine tasks and shows how their routing
// reaches the application. The target routes to service "worker", version "v1"; a job whose
// `cloudtasks:"app-engine-service"` field is set replaces the service (or clears it with "").
// Cloud Tasks delivers each task to an HTTP handler in this process, and the program prints
// the Host header of every request: App Engine encodes the routing there as
// [instance.][version.][service.]<app host>.
//
//	go run ./examples/appengine
//
// Without flags it runs on Beam's prism runner against an in-process Cloud Tasks server
// (cloudtaskstest) that sends App Engine tasks to the handler. To use an emulator of your
// own, point its App Engine dispatch at the handler:
//
//	APP_ENGINE_EMULATOR_HOST=http://127.0.0.1:8080 \
//	    go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 &
//	go run ./examples/appengine --cloudtasks_emulator=localhost:8123 --handler_address=127.0.0.1:8080
//
// Beam's standard flags apply (--runner and the runner's own flags). The in-process server
// listens on loopback, so only a runner executing in this process reaches it.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/appengine/appengine"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

var (
	cloudTasksEmulator = flag.String("cloudtasks_emulator", "", "host:port of a Cloud Tasks emulator; empty starts one in this process")
	handlerAddress     = flag.String("handler_address", "127.0.0.1:0", "host:port the App Engine handler listens on (port 0 picks one)")
)

func main() { exampleenv.Main("appengine", run) }

func run(ctx context.Context) error {
	h, err := appengine.StartHandler(*handlerAddress)
	if err != nil {
		return err
	}
	defer h.Close()
	ct := exampleenv.StartCloudTasks(*cloudTasksEmulator, cloudtaskstest.WithAppEngineURL(h.URL()))
	defer ct.Close()
	_, err = appengine.Run(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, appengine.Options{Handler: h, Jobs: appengine.DemoJobs()})
	return err
}
