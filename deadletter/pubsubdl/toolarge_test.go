package pubsubdl

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// pstest, like any gRPC server with default settings, refuses a request over 4 MiB, which the
// Pub/Sub service would take. The client retried the refusal (RESOURCE_EXHAUSTED) until the
// flush timeout ended the bundle with "context deadline exceeded", naming no size: the bundle
// now fails at once, and the error gives the message's size and the server's limit.
func TestAMessageTheServerRefusesForItsSizeFailsAtOnceWithTheSizeAndTheLimit(t *testing.T) {
	srv := newPubSub(t, true)
	fn := &publishFn{Topic: testTopic, MaxInFlightMessages: 1000, FlushTimeout: 20 * time.Second, EmulatorEndpoint: srv.Addr}
	fe := deadletter.FailedElement{Connector: "cloudtasks", Code: "INVALID_ARGUMENT", Error: "rejected",
		Element: bytes.Repeat([]byte{'e'}, 5<<20), ElementType: "string"}
	size := messageSize(message(fe, 0, workerID(), strings.Repeat("b", 16))) // a bundle id is 16 hex digits
	start := time.Now()
	err := runBundle(t.Context(), fn, 0, fe)
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("a message of %d bytes", size), "the size")
	assert.Contains(t, err.Error(), "4194304", "the server's limit")
	assert.NotContains(t, err.Error(), "deadline exceeded")
	assert.Less(t, took, fn.FlushTimeout/2, "no retries until the flush timeout")
	assert.Empty(t, srv.Messages())
}
