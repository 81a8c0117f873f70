"""Write Apache Beam PCollections as Google Cloud Tasks, from Python and Beam YAML.

``WriteToCloudTasks`` is beam-cloudtasks' Go sink (``cloudtasksio.Write``) as a Python
transform. It is expanded by the Go expansion service ``cloudtasks-expansion-service``, either
one you run (``expansion_service="host:port"``) or one this package starts from the program's
path (``binary=...``), as Beam starts Java expansion-service jars.
"""

import atexit
import logging
import subprocess
import threading

import apache_beam as beam
from apache_beam.transforms.external import ExpansionAndArtifactRetrievalStub
from apache_beam.transforms.external import SchemaAwareExternalTransform
from apache_beam.utils import subprocess_server
import grpc

__all__ = ["WriteToCloudTasks", "ExpansionServiceBinary", "IDENTIFIER", "SERVED_BEAM_RELEASES"]

#: The schema transform's identifier, also its URN as a plain external transform.
IDENTIFIER = "beam:schematransform:beam-cloudtasks:cloudtasks_write:v1"

#: The Beam releases the expansion service serves: from the first to the second minor release,
#: any patch release (the Go package's MinBeamVersion and its Beam Go SDK's release).
SERVED_BEAM_RELEASES = ("2.73.0", "2.77")

_LOGGER = logging.getLogger(__name__)


def _release(version):
  parts = []
  for piece in version.split(".")[:3]:
    digits = ""
    for ch in piece:
      if not ch.isdigit():
        break
      digits += ch
    parts.append(int(digits or 0))
  return tuple(parts + [0] * (3 - len(parts)))


def check_beam_version(version=None):
  """Raises ValueError when this Beam release is not one the expansion service serves."""
  version = version or beam.__version__
  low, high = _release(SERVED_BEAM_RELEASES[0]), _release(SERVED_BEAM_RELEASES[1])
  got = _release(version)
  if not (low <= got and got[:2] <= high[:2]):
    raise ValueError(
        "beam-cloudtasks: apache-beam %s is not served by this expansion service, which serves "
        "Beam %s to %s.x; install a release in that range" %
        (version, SERVED_BEAM_RELEASES[0], SERVED_BEAM_RELEASES[1]))


class ExpansionServiceBinary(object):
  """The expansion service started from the ``cloudtasks-expansion-service`` program.

  It can be passed wherever Beam takes an expansion service. The program is started once per
  path and arguments in this Python process, on a free loopback port, and stays up until the
  process exits (or ``stop()``): by default it also runs the Go worker pool in which the
  expanded steps run, which the pipeline needs until it has finished, not only while it is
  built.
  """

  _lock = threading.Lock()
  _running = {}

  def __init__(self, path, extra_args=()):
    self._path = path
    self._args = tuple(extra_args)
    self._channel = None

  @property
  def address(self):
    """The host:port the service listens on, starting it first if needed."""
    return self._process()[1]

  def _process(self):
    key = (self._path, self._args)
    with self._lock:
      running = self._running.get(key)
      if running is not None and running[0].poll() is None:
        return running
      port, = subprocess_server.pick_port(None)
      address = "127.0.0.1:%d" % port
      cmd = [self._path, "--port", str(port)] + list(self._args)
      _LOGGER.info("starting the expansion service: %s", " ".join(cmd))
      process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
      ready = threading.Event()

      def copy_output():
        for line in iter(process.stdout.readline, b""):
          text = line.decode(errors="backslashreplace").rstrip()
          if "serving" in text and address in text:
            ready.set()
          _LOGGER.info("%s", text)
        ready.set()

      threading.Thread(target=copy_output, daemon=True).start()
      if not ready.wait(120) or process.poll() is not None:
        process.kill()
        raise RuntimeError(
            "beam-cloudtasks: the expansion service %s did not start (exit status %s); its "
            "output is in this program's log" % (self._path, process.poll()))
      self._running[key] = (process, address)
      atexit.register(_stop_process, process)
      return process, address

  def stop(self):
    """Stops the service this object started."""
    with self._lock:
      running = self._running.pop((self._path, self._args), None)
    if running is not None:
      _stop_process(running[0])

  def __enter__(self):
    channel = grpc.insecure_channel(
        self.address,
        options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)])
    self._channel = channel
    return ExpansionAndArtifactRetrievalStub(channel)

  def __exit__(self, *unused):
    if self._channel is not None:
      self._channel.close()
      self._channel = None


def _stop_process(process):
  if process.poll() is None:
    process.terminate()
    try:
      process.wait(15)
    except subprocess.TimeoutExpired:
      process.kill()


class WriteToCloudTasks(beam.PTransform):
  """Writes each element as a Google Cloud Task, with beam-cloudtasks' Go sink.

  The input is a PCollection of schema rows (``beam.Row``, a registered NamedTuple), each
  sent as the task's JSON body (or in the configured ``format``), or of bytes, each sent as
  the body as it is. The output is a PCollection of error rows (``element``, ``msg``,
  ``stack``, ``code``, ``destination``): the failed elements when ``error_handling`` is given,
  else empty.

  Args:
    expansion_service: the ``host:port`` of a running ``cloudtasks-expansion-service``.
    binary: instead, the path of the ``cloudtasks-expansion-service`` program to start.
    binary_args: more flags for the started program, such as
      ``["--environment", "docker"]`` for Dataflow.
    **config: the transform's configuration fields: every option key of the Go sink's
      ConfigFromOptions with ``.`` and ``-`` written ``_`` (``project``, ``location``,
      ``queue``, ``http_url``, ``format``, ``sink_in_flight_max_tasks``, ...), ``http_headers``
      (a dict), ``task_id_field``, ``url_field``, ``schedule_time_field``, ``on_failure``
      (``fail``, ``log_and_drop``, ``dead_letter``) and ``error_handling``
      (``{"output": NAME}``). A value of None leaves the field out. The expansion service
      checks them while the pipeline is built: an unknown field, a wrong type or a bad value is
      a RuntimeError naming the field.
  """
  def __init__(self, expansion_service=None, *, binary=None, binary_args=(), **config):
    super().__init__()
    if (expansion_service is None) == (binary is None):
      raise ValueError(
          "beam-cloudtasks: give either expansion_service='host:port' or binary='path of "
          "cloudtasks-expansion-service'")
    check_beam_version()
    if binary is not None:
      expansion_service = ExpansionServiceBinary(binary, binary_args)
    self._expansion_service = expansion_service
    self._config = {k: v for k, v in config.items() if v is not None}

  def expand(self, pcoll):
    return pcoll | SchemaAwareExternalTransform(
        IDENTIFIER, self._expansion_service, **self._config)

  def default_label(self):
    return "WriteToCloudTasks"

