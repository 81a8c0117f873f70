// Command kafka-to-cloudtasks is a template pipeline that turns records into Google Cloud
// Tasks: one task per record, the record's value as the body. It reads Kafka through Beam's
// cross-language Kafka read, or files (--input) or stdin for local runs, and runs on any Beam
// runner through Beam's standard flags (--runner, --endpoint, --project, ...).
//
// Local run against the bundled emulator, on the prism runner (the default):
//
//	go run ./cloudtasksio/cloudtaskstest/cmd/cloudtasks-emulator -port 8123 \
//	    -queue projects/my-project/locations/us-central1/queues/orders &
//	go run ./examples/kafka-to-cloudtasks --input orders.jsonl --format json \
//	    --task_id_field id \
//	    --cloudtasks_project my-project --cloudtasks_location us-central1 \
//	    --cloudtasks_queue orders --cloudtasks_http_url http://127.0.0.1:8080/orders \
//	    --cloudtasks_emulator_endpoint 127.0.0.1:8123
//
// Kafka on Flink:
//
//	go run ./examples/kafka-to-cloudtasks --runner flink --endpoint localhost:8099 \
//	    --environment_type LOOPBACK --expansion_addr localhost:8097 \
//	    --kafka_bootstrap_servers kafka:9092 --kafka_topics orders --format json \
//	    --cloudtasks_project my-project --cloudtasks_location us-central1 \
//	    --cloudtasks_queue orders --cloudtasks_http_url https://orders.example.com/tasks
//
// Every flag is passed once as --name=value, as a Dataflow Flex Template launch passes its
// parameters; metadata.json beside this file is the Flex Template spec. https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/template.md
// describes every flag; https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md every option key behind the cloudtasks_* flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/kafka-to-cloudtasks/kafkatemplate"
)

// main keeps Beam's own logging (a template job's launcher and workers log through it), so
// unlike the demo examples it does not go through exampleenv.Main.
func main() {
	opts := kafkatemplate.RegisterFlags(flag.CommandLine)
	flag.CommandLine.Usage = func() { kafkatemplate.PrintUsage(flag.CommandLine.Output(), flag.CommandLine) }
	flag.Parse()
	beam.Init()

	ctx := context.Background()
	opts.Stdin = os.Stdin
	if err := run(ctx, *opts); err != nil {
		log.Exitf(ctx, "kafka-to-cloudtasks: %v", err)
	}
}

// run builds the template's pipeline from opts and runs it on the runner Beam's flags choose.
func run(ctx context.Context, opts kafkatemplate.Options) error {
	p, s := beam.NewPipelineWithRoot()
	if err := kafkatemplate.Build(s, opts); err != nil {
		return err
	}
	if err := beamx.Run(ctx, p); err != nil {
		return fmt.Errorf("the pipeline failed: %w", err)
	}
	return nil
}
