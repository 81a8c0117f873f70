// Command quickstart shows what Cloud Tasks is for: a pipeline that produces work fast, feeding
// an endpoint that must be called slowly.
//
// It runs everything on this machine: an in-memory Cloud Tasks server with one queue limited
// to -rate dispatches per second, a local HTTP handler standing in for a rate-limited API, and
// a Beam pipeline that generates -orders orders and writes one named task per order with
// cloudtasksio.Write. The pipeline creates every task at full speed and finishes; the queue
// then delivers them to the handler at its limit. Progress shows both counts, and the summary
// compares the creation rate with the delivery rate.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -orders 10000 -rate 500 -latency 50ms
//	go run ./examples/quickstart -chart run.svg
//
// With -chart it also writes a chart of the tasks created and delivered over time (SVG or PNG,
// by the file's extension).
//
// The pipeline itself, its one Write call, is examples/quickstart/quickstart/pipeline.go; run.go
// there is the harness around it.
//
// With no -runner flag the pipeline runs on prism, Beam's local runner. The Beam standard
// flags are accepted too, but the server and the handler live in this process, so only a
// runner that executes the workers in this process (prism in loopback mode) can reach them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"

	"golang.org/x/term"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/quickstart/quickstart"
)

var (
	orders  = flag.Int("orders", quickstart.DefaultOrders, "number of generated orders, one task each")
	rate    = flag.Float64("rate", quickstart.DefaultRate, "the queue's max dispatches per second, in (0, 500]")
	latency = flag.Duration("latency", quickstart.DefaultCreateLatency, "time the in-memory server adds to every CreateTask call (0 for none)")
	chart   = flag.String("chart", "", "write a chart of tasks created and delivered over time to this `file` (.svg or .png)")
)

func main() { exampleenv.Main("quickstart", run) }

func run(ctx context.Context) error {
	opts, err := options()
	if err != nil {
		usage(err.Error())
	}
	if fd := int(os.Stdout.Fd()); term.IsTerminal(fd) {
		opts.ProgressBar = true
		if w, _, err := term.GetSize(fd); err == nil {
			opts.ProgressWidth = w
		}
	}
	ct := exampleenv.StartCloudTasks("")
	defer ct.Close()
	_, err = quickstart.Run(ctx, exampleenv.Env{CloudTasks: ct, Runner: exampleenv.RunWithMetrics, Out: os.Stdout}, opts)
	return err
}

// options checks the flags and turns them into the run's options; an error names the flag.
func options() (quickstart.Options, error) {
	switch {
	case *orders < 1:
		return quickstart.Options{}, errors.New("-orders must be at least 1")
	case math.IsNaN(*rate) || *rate <= 0 || *rate > 500:
		return quickstart.Options{}, fmt.Errorf("-rate %v: want dispatches per second in (0, 500], the Cloud Tasks maximum", *rate)
	case *latency < 0:
		return quickstart.Options{}, errors.New("-latency must not be negative")
	}
	if err := quickstart.CheckChart("-chart", *chart); err != nil {
		return quickstart.Options{}, err
	}
	opts := quickstart.Options{
		Orders:        *orders,
		Rate:          *rate,
		CreateLatency: *latency,
		Chart:         *chart,
	}
	if *latency == 0 {
		opts.CreateLatency = -1 // the flag's 0 means none; the library's 0 means its default
	}
	return opts, nil
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "quickstart: %s (see -help)\n", msg)
	os.Exit(2)
}
