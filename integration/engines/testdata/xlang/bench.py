"""The Python pipelines of the cross-language benchmark (integration/engines/xlang_bench_test.go).

    python bench.py sink --n 5000 --emulator HOST:PORT --binary PATH [-- BEAM ARGS]
    python bench.py dofn --n 5000 --emulator HOST:PORT [-- BEAM ARGS]

sink writes n rows through beam_cloudtasks.WriteToCloudTasks (beam-cloudtasks' Go sink, in Go
workers); dofn writes them with the official Python client (google-cloud-tasks), one
create_task call per element in a DoFn: what a Python user writes today. Both print one JSON
line: the seconds the pipeline ran (p.run() to its end, the expansion excluded).
"""

import argparse
import json
import sys
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

QUEUE = "projects/engines/locations/local/queues/orders"


class CreateTaskFn(beam.DoFn):
  """Creates one task per element with the official client, synchronously."""
  def __init__(self, emulator, url):
    self._emulator = emulator
    self._url = url
    self._client = None

  def setup(self):
    import grpc
    from google.cloud import tasks_v2
    from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport
    channel = grpc.insecure_channel(self._emulator)
    self._client = tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=channel))
    self._tasks_v2 = tasks_v2

  def process(self, row):
    task = self._tasks_v2.Task(
        http_request=self._tasks_v2.HttpRequest(
            http_method=self._tasks_v2.HttpMethod.POST,
            url=self._url,
            headers={"Content-Type": "application/json"},
            body=json.dumps({"id": row.id, "amount": row.amount}).encode()))
    self._client.create_task(parent=QUEUE, task=task)


def main(argv):
  beam_args = []
  if "--" in argv:
    i = argv.index("--")
    argv, beam_args = argv[:i], argv[i + 1:]
  parser = argparse.ArgumentParser()
  parser.add_argument("mode", choices=["sink", "dofn"])
  parser.add_argument("--n", type=int, default=5000)
  parser.add_argument("--emulator", required=True)
  parser.add_argument("--binary")
  args = parser.parse_args(argv)
  url = "https://example.com/orders"

  p = beam.Pipeline(options=PipelineOptions(beam_args))
  rows = (
      p | beam.Create([beam.Row(id="order-%06d" % i, amount=i) for i in range(args.n)])
      | beam.Reshuffle())
  if args.mode == "sink":
    from beam_cloudtasks import WriteToCloudTasks
    _ = rows | WriteToCloudTasks(
        binary=args.binary,
        project="engines",
        location="local",
        queue="orders",
        http_url=url,
        emulator_endpoint=args.emulator)
  else:
    _ = rows | beam.ParDo(CreateTaskFn(args.emulator, url))
  start = time.time()
  p.run().wait_until_finish()
  print(json.dumps({"seconds": time.time() - start}))


if __name__ == "__main__":
  main(sys.argv[1:])
