// Package engines runs the sink's pipelines on real Beam engines that .ci/engines starts
// outside the test process, and asserts what an in-process cloudtaskstest server and a
// loopback receiver saw.
//
// Each engine is enabled by one environment variable holding its address:
//
//	BEAM_FLINK_ENDPOINT=host:port   the job endpoint of Beam's Flink job server
//	BEAM_PRISM_ENDPOINT=host:port   the job endpoint of a prism job service in its own process
//
// (and the Kafka suite's KAFKA_BOOTSTRAP_SERVERS and BEAM_EXPANSION_ADDR, see kafka_test.go).
//
// Without it every test that needs the engine skips with one line naming the variable, so a
// plain `go test ./...` stays hermetic and fast. Pipelines are submitted with Beam's standard
// job options (runner "flink" or "prism", the endpoint, environment type LOOPBACK): the Go workers run
// inside this test process, which is how they reach the in-process servers on loopback.
package engines

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

func TestMain(m *testing.M) { ptest.Main(m) }

func init() { log.LogLevel = "warn" }
