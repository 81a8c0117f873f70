package deadletter_test

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// This test binary does not link deadletter/pubsubdl (tools/layers keeps deadletter's tests
// from importing it): deadletter.ToPubSub must say what to import, at construction.
// (pubsubdl's tests cover the output under this name.)
func TestWithoutPubsubdlToPubSubSaysWhatToImport(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	failed := beam.Create(s, deadletter.FailedElement{Connector: "cloudtasks"})
	cfg := deadletter.PubSubConfig{Topic: "projects/p/topics/t"}
	err := deadletter.TryToPubSub(s, cfg, failed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl")
	assert.Contains(t, err.Error(), "import it")
	assert.PanicsWithError(t, err.Error(), func() { deadletter.ToPubSub(s, cfg, failed) })
}
