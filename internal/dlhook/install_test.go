package dlhook

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
)

func TestInstallPubSubTakesOneOutputOnce(t *testing.T) {
	t.Cleanup(func() { pubSub = nil })
	assert.PanicsWithValue(t, "dlhook: InstallPubSub(nil)", func() { InstallPubSub(nil) })
	var called PubSubSettings
	out := func(_ beam.Scope, cfg PubSubSettings, _ beam.PCollection) error { called = cfg; return nil }
	InstallPubSub(out)
	assert.NoError(t, PubSub()(beam.Scope{}, PubSubSettings{Topic: "t"}, beam.PCollection{}))
	assert.Equal(t, "t", called.Topic, "PubSub returns what was installed")
	assert.PanicsWithValue(t, "dlhook: InstallPubSub called twice", func() { InstallPubSub(out) })
}
