// Package integration runs pipelines on Beam's prism runner against an in-process
// cloudtaskstest server, or against an external Cloud Tasks emulator when
// CLOUDTASKS_EMULATOR_HOST=host:port is set, and asserts what the service stores and what the
// targets receive.
package integration

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

func TestMain(m *testing.M) { ptest.Main(m) }

func init() { log.LogLevel = "warn" }
