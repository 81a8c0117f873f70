"""Python pipelines of the cross-language engine suite (integration/engines/xlang_test.go).

Each case builds one or more pipelines that write through beam_cloudtasks.WriteToCloudTasks,
runs them with the Beam options given after "--", and writes what Python saw (the error rows,
the sink's counters from the PipelineResult, construction errors) as JSON to --out. The Go
test starts the Cloud Tasks server and checks what it stored.

    python cases.py CASE --out result.json --emulator HOST:PORT
        (--service HOST:PORT | --binary PATH [--binary-arg=FLAG ...]) [--errors FILE] -- BEAM ARGS
"""

import argparse
import datetime
import glob
import json
import os
import sys
import tempfile
import time
import typing

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.utils.timestamp import Timestamp
from beam_cloudtasks import WriteToCloudTasks


class Order(typing.NamedTuple):
  id: typing.Optional[str]
  amount: int
  url: typing.Optional[str]
  at: typing.Optional[str]


beam.coders.registry.register_coder(Order, beam.coders.RowCoder)

QUEUE = {"project": "engines", "location": "local", "queue": "orders"}


def orders(n):
  """n orders; every 7th has no id (a TASK_ID failure), every 11th a URL the sink refuses; every
  5th is scheduled an hour ahead."""
  soon = (datetime.datetime.now(datetime.timezone.utc) +
          datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
  out = []
  for i in range(n):
    out.append(
        Order(
            id=None if i % 7 == 3 else "order-%04d" % i,
            amount=i,
            url="not a url" if i % 11 == 5 else
            ("http://127.0.0.1:9/orders/%d" % i if i % 2 else None),
            at=soon if i % 5 == 0 else None))
  return out


def sink(args, **config):
  """The transform under test: QUEUE, the emulator and a default URL, then config (a None value
  leaves a field out)."""
  config = dict(dict(QUEUE, emulator_endpoint=args.emulator, http_url="http://127.0.0.1:9/orders"), **config)
  if args.service:
    return WriteToCloudTasks(expansion_service=args.service, **config)
  return WriteToCloudTasks(binary=args.binary, binary_args=args.binary_arg or (), **config)


def counters(result):
  out = {}
  for c in result.metrics().query(MetricsFilter().with_namespace("cloudtasksio"))["counters"]:
    value = c.committed if c.committed is not None else c.attempted
    out[c.key.metric.name] = out.get(c.key.metric.name, 0) + (value or 0)
  return out


def as_dict(row):
  d = row._asdict() if hasattr(row, "_asdict") else dict(row.__dict__)
  if hasattr(d.get("element"), "_asdict"):
    d["element"] = d["element"]._asdict()
  elif isinstance(d.get("element"), bytes):
    d["element"] = d["element"].decode("utf-8", "backslashreplace")
  return d


def run_write(args, beam_args, elements, element_type, **config):
  """Runs one pipeline writing elements; returns its error rows and counters."""
  out_dir = tempfile.mkdtemp(prefix="xlang-errors-")
  options = PipelineOptions(beam_args)
  p = beam.Pipeline(options=options)
  errors = (
      p | beam.Create(elements).with_output_types(element_type)
      | sink(args, error_handling={"output": "errors"}, **config))
  (
      errors | beam.Map(lambda r: json.dumps(as_dict(r), sort_keys=True))
      | beam.io.WriteToText(os.path.join(out_dir, "errors"), shard_name_template=""))
  result = p.run()
  result.wait_until_finish()
  rows = []
  for path in glob.glob(os.path.join(out_dir, "errors*")):
    with open(path) as f:
      rows += [json.loads(line) for line in f if line.strip()]
  try:
    metrics = counters(result)
  except Exception as e:  # pylint: disable=broad-except
    metrics = {"error": str(e)[:300]}
  return {"errors": rows, "metrics": metrics}


def case_rows(args, beam_args):
  return run_write(
      args,
      beam_args,
      orders(args.n),
      Order,
      task_id_field="id",
      url_field="url",
      schedule_time_field="at",
      http_headers={"X-Source": "python"},
      sink_in_flight_max_tasks=200)


def case_replay(args, beam_args):
  """Writes the failed elements of a previous run again, fixed: a missing id gets one, a bad URL
  is left out (http_url applies)."""
  with open(args.errors) as f:
    failed = json.load(f)["errors"]
  fixed = []
  for row in failed:
    e = row["element"]
    fixed.append(
        Order(
            id=e["id"] or "fixed-%04d" % e["amount"],
            amount=e["amount"],
            url=None if e["url"] == "not a url" else e["url"],
            at=e["at"]))
  return run_write(
      args,
      beam_args,
      fixed,
      Order,
      task_id_field="id",
      url_field="url",
      schedule_time_field="at",
      http_headers={"X-Source": "python"})


def case_bytes(args, beam_args):
  elements = [("payload-%d" % i).encode() for i in range(args.n)]
  return run_write(args, beam_args, elements, bytes, http_headers={"Content-Type": "text/plain"})


class Event(typing.NamedTuple):
  id: str
  at: Timestamp
  price: float
  tags: typing.List[str]


beam.coders.registry.register_coder(Event, beam.coders.RowCoder)


def case_timestamps(args, beam_args):
  """Rows with a Timestamp (logical type micros_instant), a float and a list; the Timestamp is
  the schedule time."""
  soon = Timestamp.of(int(time.time()) + 3600)
  events = [Event("event-%d" % i, soon, i + 0.5, ["a", "b"][:i]) for i in range(3)]
  return run_write(
      args, beam_args, events, Event, task_id_field="id", schedule_time_field="at")


def case_plain_external(args, beam_args):
  """The transform as a plain external transform: its URN and an implicit-schema payload of the
  configuration, what Beam YAML sends to a service that does not list it in discovery."""
  from apache_beam.transforms.external import ExternalTransform
  from apache_beam.transforms.external import ImplicitSchemaPayloadBuilder
  config = dict(
      QUEUE,
      emulator_endpoint=args.emulator,
      http_url="http://127.0.0.1:9/orders",
      task_id_field="id",
      error_handling={"output": "failed"})
  out_dir = tempfile.mkdtemp(prefix="xlang-errors-")
  p = beam.Pipeline(options=PipelineOptions(beam_args))
  errors = (
      p | beam.Create(orders(10)).with_output_types(Order)
      | ExternalTransform(
          "beam:schematransform:beam-cloudtasks:cloudtasks_write:v1",
          ImplicitSchemaPayloadBuilder(config).payload(),
          args.service))
  (
      errors | beam.Map(lambda r: json.dumps(as_dict(r), sort_keys=True))
      | beam.io.WriteToText(os.path.join(out_dir, "errors"), shard_name_template=""))
  p.run().wait_until_finish()
  rows = []
  for path in glob.glob(os.path.join(out_dir, "errors*")):
    with open(path) as f:
      rows += [json.loads(line) for line in f if line.strip()]
  return {"errors": rows, "metrics": {}}


def case_construction_errors(args, beam_args):
  """Builds pipelines the service must refuse; returns each error's text."""
  def attempt(elements, element_type, **config):
    p = beam.Pipeline(options=PipelineOptions(beam_args))
    try:
      _ = p | beam.Create(elements).with_output_types(element_type) | sink(args, **config)
    except Exception as e:  # pylint: disable=broad-except
      return "%s: %s" % (type(e).__name__, e)
    return "no error"

  def unserved_release():
    import beam_cloudtasks
    try:
      beam_cloudtasks.check_beam_version("2.60.0")
    except ValueError as e:
      return "%s: %s" % (type(e).__name__, e)
    return "no error"

  rows = orders(3)
  return {
      "unserved Beam release": unserved_release(),
      "unknown field":
      attempt(rows, Order, http_ur="https://example.com"),
      "wrong type":
      attempt(rows, Order, sink_in_flight_max_tasks="many"),
      "missing required field":
      attempt(rows, Order, queue=None, project=None),
      "input neither rows nor bytes":
      attempt(["a", "b"], str),
      "field missing from the schema":
      attempt(rows, Order, task_id_field="order_id"),
      "secret header with a bad value":
      attempt(rows, Order, http_headers={"Authorization": "Bearer SECRET-TOKEN"},
              sink_recovery_max_attempts=0),
  }


def case_dataflow(args, beam_args):
  """Translates a pipeline for Dataflow, offline: Beam's DataflowRunner builds the portable
  pipeline and the job, and stages the job's files (the Go worker binary among them) under the
  staging location; the case stops it where it would submit the job
  (DataflowApplicationClient.create_job) and returns what it built."""
  from apache_beam.internal.gcp import auth
  from apache_beam.portability.api import beam_runner_api_pb2
  from apache_beam.runners.dataflow.internal import apiclient

  # No credentials: connect anonymously at once, as Beam does once its lookup of default
  # credentials has failed (it retries for about 20 s first).
  auth._Credentials._credentials_init = True  # pylint: disable=protected-access
  auth._Credentials._credentials = None  # pylint: disable=protected-access

  captured = []

  class Stop(Exception):
    pass

  def create_job(self, job):
    self.create_job_description(job)
    captured.append(job)
    raise Stop()

  apiclient.DataflowApplicationClient.create_job = create_job
  p = beam.Pipeline(options=PipelineOptions(beam_args))
  _ = p | beam.Create(orders(5)).with_output_types(Order) | sink(args, task_id_field="id")
  try:
    p.run()
  except Stop:
    pass
  job = captured[0]
  environments = {}
  for env_id, env in job.proto_pipeline.components.environments.items():
    image = ""
    if env.urn == "beam:env:docker:v1":
      image = beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image
    environments[env_id] = {
        "urn": env.urn,
        "image": image,
        "roles": [d.role_urn for d in env.dependencies],
    }
  transforms = [{
      "name": t.unique_name, "urn": t.spec.urn, "environment": t.environment_id
  } for t in job.proto_pipeline.components.transforms.values()]
  environment = type(job.proto.environment).to_dict(job.proto.environment)
  return {"environments": environments, "transforms": transforms, "job_environment": environment}


CASES = {
    "dataflow": case_dataflow,
    "rows": case_rows,
    "replay": case_replay,
    "bytes": case_bytes,
    "timestamps": case_timestamps,
    "plain-external": case_plain_external,
    "construction-errors": case_construction_errors,
}


def main(argv):
  if "--" in argv:
    i = argv.index("--")
    argv, beam_args = argv[:i], argv[i + 1:]
  else:
    beam_args = []
  parser = argparse.ArgumentParser()
  parser.add_argument("case", choices=sorted(CASES))
  parser.add_argument("--out", required=True)
  parser.add_argument("--emulator", required=True)
  parser.add_argument("--service")
  parser.add_argument("--binary")
  parser.add_argument("--binary-arg", action="append")
  parser.add_argument("--errors")
  parser.add_argument("-n", type=int, default=100)
  args = parser.parse_args(argv)
  result = CASES[args.case](args, beam_args)
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
  main(sys.argv[1:])
