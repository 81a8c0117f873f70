// Package engines runs the sink's pipelines on real Beam engines that .ci/engines starts
// outside the test process, and asserts what an in-process cloudtaskstest server and a
// loopback receiver saw.
//
// Each engine is enabled by one environment variable holding its address:
//
//	BEAM_PRISM_ENDPOINT=host:port       the job endpoint of a prism job service in its own process
//	BEAM_WORKER_POOL=host:port          with it, the same cases again with EXTERNAL workers
//	                                    started by this worker pool (./workerpool)
//	BEAM_PYTHON_JOB_ENDPOINT=host:port  the job endpoint of the Python SDK's local job service
//	BEAM_FLINK_ENDPOINT=host:port       the job endpoint of Beam's Flink job server
//
// and the other suites by theirs: the Kafka suite's KAFKA_BOOTSTRAP_SERVERS and
// BEAM_EXPANSION_ADDR (kafka_test.go), the Dataflow dry runs' BEAM_EXAMPLE_BINARIES
// (dataflow_test.go).
//
// Without them every test skips with one line that says NOT RUN and names the variable, so a
// plain `go test ./...` stays hermetic and fast. Pipelines are submitted with Beam's standard
// job options: the runner ("prism", "universal" or "flink"), the endpoint and the environment
// type. With LOOPBACK the Go workers run inside this test process; with EXTERNAL the job stages
// this test binary (--worker_binary) and the worker pool runs it in worker mode in a process of
// its own (ptest.Main hands such a process to Beam's harness). Either way the workers reach the
// in-process servers on loopback.
package engines

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

func TestMain(m *testing.M) { ptest.Main(m) }

func init() { log.LogLevel = "warn" }
