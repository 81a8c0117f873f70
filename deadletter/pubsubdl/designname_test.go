package pubsubdl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

// deadletter.ToPubSub is pubsubdl.ToPubSub under the design contract's name: every field of
// deadletter.PubSubConfig reaches pubsubdl's checks, which answer as they answer pubsubdl's own
// PubSubConfig. (pubsubdl's TestToPubSubPipelineOnPrism runs a pipeline through both names;
// deadletter's own tests cover a program that does not link pubsubdl.)
func TestToPubSubChecksEveryFieldAsPubsubdlDoes(t *testing.T) {
	const topic = "projects/p/topics/dead-letters"
	for _, c := range []struct {
		name  string
		cfg   deadletter.PubSubConfig
		field string // named by the error; "" for a configuration that is accepted
	}{
		{"valid", deadletter.PubSubConfig{Topic: topic, MaxInFlightMessages: 1, FlushTimeout: time.Second, EmulatorEndpoint: "127.0.0.1:8085"}, ""},
		{"zero values are defaults", deadletter.PubSubConfig{Topic: topic}, ""},
		{"Topic", deadletter.PubSubConfig{Topic: "dead-letters"}, "Topic"},
		{"MaxInFlightMessages", deadletter.PubSubConfig{Topic: topic, MaxInFlightMessages: -2}, "MaxInFlightMessages"},
		{"FlushTimeout", deadletter.PubSubConfig{Topic: topic, FlushTimeout: -time.Second}, "FlushTimeout"},
		{"EmulatorEndpoint", deadletter.PubSubConfig{Topic: topic, EmulatorEndpoint: "no port"}, "EmulatorEndpoint"},
		{"ServiceAccountKeyFile", deadletter.PubSubConfig{Topic: topic, EmulatorEndpoint: "127.0.0.1:8085", ServiceAccountKeyFile: "/k.json"}, "ServiceAccountKeyFile"},
		{"Encoding", deadletter.PubSubConfig{Topic: topic, Encoding: "xml"}, "Encoding"},
		{"json-v1", deadletter.PubSubConfig{Topic: topic, Encoding: pubsubdl.EncodingJSONV1}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			failed := beam.Create(s, deadletter.FailedElement{Connector: "cloudtasks"})
			err := deadletter.TryToPubSub(s, c.cfg, failed)
			_, s2 := beam.NewPipelineWithRoot()
			failed2 := beam.Create(s2, deadletter.FailedElement{Connector: "cloudtasks"})
			want := pubsubdl.TryToPubSub(s2, pubsubdl.PubSubConfig{
				Topic:                 c.cfg.Topic,
				MaxInFlightMessages:   c.cfg.MaxInFlightMessages,
				FlushTimeout:          c.cfg.FlushTimeout,
				EmulatorEndpoint:      c.cfg.EmulatorEndpoint,
				ServiceAccountKeyFile: c.cfg.ServiceAccountKeyFile,
				Encoding:              c.cfg.Encoding,
			}, failed2)
			if c.field == "" {
				assert.NoError(t, err)
				assert.NoError(t, want)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.field)
			assert.EqualError(t, err, want.Error(), "the same answer as pubsubdl's")
			assert.True(t, strings.HasPrefix(err.Error(), "pubsubdl: "), "pubsubdl's prefix: %q", err)
			assert.Equal(t, 1, strings.Count(err.Error(), "pubsubdl:"), "once: %q", err)
			assert.NotContains(t, err.Error(), "deadletter:", "deadletter passes pubsubdl's error on without its own prefix")
			assert.PanicsWithError(t, err.Error(), func() { deadletter.ToPubSub(s, c.cfg, failed) })
		})
	}
	t.Run("an input of another type", func(t *testing.T) {
		_, s := beam.NewPipelineWithRoot()
		err := deadletter.TryToPubSub(s, deadletter.PubSubConfig{Topic: topic}, beam.Create(s, "not a dead letter"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "FailedElement")
		assert.True(t, strings.HasPrefix(err.Error(), "pubsubdl: ToPubSub: "), err.Error())
		assert.NotContains(t, err.Error(), "deadletter:")
	})
}
