"""Writes orders as Google Cloud Tasks from a Python pipeline, through beam-cloudtasks' Go sink.

    pip install ./cloudtasksio/xlang/python
    go build -o cloudtasks-expansion-service ./cloudtasksio/xlang/cmd/cloudtasks-expansion-service
    python examples/xlang/python/write_orders.py --binary ./cloudtasks-expansion-service \\
        --project my-project --location europe-west1 --queue orders \\
        --url https://api.example.com/v1/orders [--emulator 127.0.0.1:8123] [BEAM FLAGS]

--expansion_service HOST:PORT uses a running cloudtasks-expansion-service instead of starting
one. Every order becomes one task whose body is the order as JSON, named after its id so that a
rerun creates nothing twice; the order without an id comes back as an error row, printed here.
docs/xlang.md explains the fields and how to run the pipeline on Dataflow or Flink.
"""

import argparse
import typing

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from beam_cloudtasks import WriteToCloudTasks


class Order(typing.NamedTuple):
  id: typing.Optional[str]
  customer: str
  amount: int


beam.coders.registry.register_coder(Order, beam.coders.RowCoder)

ORDERS = [
    Order("order-0001", "ada", 12),
    Order("order-0002", "grace", 7),
    Order(None, "no id: this one fails with code TASK_ID", 3),
    Order("order-0004", "edsger", 41),
]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  service = parser.add_mutually_exclusive_group(required=True)
  service.add_argument("--expansion_service", help="host:port of a running cloudtasks-expansion-service")
  service.add_argument("--binary", help="path of the cloudtasks-expansion-service program to start")
  parser.add_argument("--project", required=True)
  parser.add_argument("--location", required=True)
  parser.add_argument("--queue", required=True)
  parser.add_argument("--url", required=True, help="the URL every task is sent to")
  parser.add_argument("--emulator", help="host:port of a Cloud Tasks emulator (no credentials)")
  args, beam_args = parser.parse_known_args(argv)

  with beam.Pipeline(options=PipelineOptions(beam_args)) as p:
    errors = (
        p
        | "Orders" >> beam.Create(ORDERS).with_output_types(Order)
        | WriteToCloudTasks(
            expansion_service=args.expansion_service,
            binary=args.binary,
            project=args.project,
            location=args.location,
            queue=args.queue,
            http_url=args.url,
            emulator_endpoint=args.emulator,
            task_id_field="id",
            error_handling={"output": "errors"}))
    _ = errors | "Print" >> beam.Map(
        lambda e: print("failed: %s (%s): %s" % (e.element, e.code, e.msg)))


if __name__ == "__main__":
  main()
