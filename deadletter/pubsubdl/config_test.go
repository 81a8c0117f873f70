package pubsubdl

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

const goodTopic = "projects/my-project/topics/dead-letters"

func failedInput(t *testing.T) (beam.Scope, beam.PCollection) {
	t.Helper()
	_, s := beam.NewPipelineWithRoot()
	return s, beam.Create(s, deadletter.FailedElement{Connector: "cloudtasks"})
}

func TestTryToPubSubRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name  string
		cfg   PubSubConfig
		field string // the error must name it
	}{
		{"empty topic", PubSubConfig{}, "Topic"},
		{"topic id only", PubSubConfig{Topic: "dead-letters"}, "Topic"},
		{"subscription path", PubSubConfig{Topic: "projects/p1-x/subscriptions/dead"}, "Topic"},
		{"extra segment", PubSubConfig{Topic: goodTopic + "/x"}, "Topic"},
		{"empty project", PubSubConfig{Topic: "projects//topics/dead-letters"}, "Topic"},
		{"uppercase project", PubSubConfig{Topic: "projects/My-Project/topics/dead-letters"}, "Topic"},
		{"project ends with hyphen", PubSubConfig{Topic: "projects/my-project-/topics/dead-letters"}, "Topic"},
		{"space in project", PubSubConfig{Topic: "projects/my project/topics/dead-letters"}, "Topic"},
		{"short topic id", PubSubConfig{Topic: "projects/my-project/topics/dl"}, "Topic"},
		{"topic id starts with digit", PubSubConfig{Topic: "projects/my-project/topics/1dead"}, "Topic"},
		{"topic id starts with goog", PubSubConfig{Topic: "projects/my-project/topics/google-dl"}, "Topic"},
		{"topic id with space", PubSubConfig{Topic: "projects/my-project/topics/dead letters"}, "Topic"},
		{"topic id too long", PubSubConfig{Topic: "projects/my-project/topics/d" + strings.Repeat("x", 255)}, "Topic"},
		{"in-flight below -1", PubSubConfig{Topic: goodTopic, MaxInFlightMessages: -2}, "MaxInFlightMessages"},
		{"negative flush timeout", PubSubConfig{Topic: goodTopic, FlushTimeout: -time.Second}, "FlushTimeout"},
		{"endpoint without port", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost"}, "EmulatorEndpoint"},
		{"endpoint empty port", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:"}, "EmulatorEndpoint"},
		{"endpoint empty host", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: ":8085"}, "EmulatorEndpoint"},
		{"endpoint port zero", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:0"}, "EmulatorEndpoint"},
		{"endpoint port too big", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:65536"}, "EmulatorEndpoint"},
		{"endpoint signed port", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:+80"}, "EmulatorEndpoint"},
		{"endpoint port not a number", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:http"}, "EmulatorEndpoint"},
		{"endpoint with whitespace", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: " localhost:8085"}, "EmulatorEndpoint"},
		{"endpoint with inner space", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "local host:8085"}, "EmulatorEndpoint"},
		{"endpoint with scheme", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "http://localhost:8085"}, "EmulatorEndpoint"},
		{"endpoint half bracketed", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "[::1:8085"}, "EmulatorEndpoint"},
		{"emulator with key file", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:8085", ServiceAccountKeyFile: "/keys/sa.json"}, "ServiceAccountKeyFile"},
		{"blank key file", PubSubConfig{Topic: goodTopic, ServiceAccountKeyFile: "  "}, "ServiceAccountKeyFile"},
		{"unknown encoding", PubSubConfig{Topic: goodTopic, Encoding: "xml"}, "Encoding"},
		{"client endpoint with emulator", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: "localhost:8085", Client: ClientOptions{Endpoint: "pubsub.example.com:443"}}, "Client.Endpoint"},
		{"unknown telemetry", PubSubConfig{Topic: goodTopic, Client: ClientOptions{Telemetry: 7}}, "Client.Telemetry"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, col := failedInput(t)
			err := TryToPubSub(s, tc.cfg, col)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce, "a program tells the field by its type")
			assert.Equal(t, tc.field, ce.Field)
			assert.Panics(t, func() { ToPubSub(s, tc.cfg, col) })
		})
	}
}

func TestTryToPubSubAcceptsGoodConfig(t *testing.T) {
	cases := []PubSubConfig{
		DefaultPubSubConfig(goodTopic),
		{Topic: goodTopic},
		{Topic: goodTopic, MaxInFlightMessages: -1, FlushTimeout: time.Millisecond},
		{Topic: "projects/example.com:my-project/topics/Dead_Letters.v1~x+y%z"},
		{Topic: "projects/123456789/topics/dlq"},
		{Topic: goodTopic, EmulatorEndpoint: "localhost:8085"},
		{Topic: goodTopic, EmulatorEndpoint: "[::1]:65535"},
		{Topic: goodTopic, ServiceAccountKeyFile: "/keys/sa.json"},
	}
	for _, cfg := range cases {
		s, col := failedInput(t)
		assert.NoError(t, TryToPubSub(s, cfg, col), "%+v", cfg)
	}
}

func TestZeroFieldsMeanTheDefaults(t *testing.T) {
	cfg := DefaultPubSubConfig(goodTopic)
	assert.Equal(t, PubSubConfig{Topic: goodTopic, MaxInFlightMessages: 1000, FlushTimeout: 60 * time.Second}, cfg)

	got, err := PubSubConfig{Topic: goodTopic}.validate()
	require.NoError(t, err)
	assert.Equal(t, DefaultFlushTimeout, got.FlushTimeout)
	assert.Equal(t, DefaultMaxInFlightMessages, got.MaxInFlightMessages, "zero means the default bound")
	assert.Equal(t, cfg, got, "a literal config with only a topic equals the default config")

	for _, n := range []int{-1, 1, 7} {
		got, err := PubSubConfig{Topic: goodTopic, MaxInFlightMessages: n}.validate()
		require.NoError(t, err)
		assert.Equal(t, n, got.MaxInFlightMessages, "an explicit bound is kept")
	}
}

func TestTryToPubSubRejectsOtherElementTypes(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	for _, col := range []beam.PCollection{
		beam.Create(s, "not a failed element"),
		beam.Create(s, &deadletter.FailedElement{}),
		beam.ParDo(s, func(fe deadletter.FailedElement) (string, deadletter.FailedElement) { return fe.Code, fe }, beam.Create(s, deadletter.FailedElement{})),
	} {
		err := TryToPubSub(s, DefaultPubSubConfig(goodTopic), col)
		require.Error(t, err, "%v", col.Type())
		assert.Contains(t, err.Error(), "deadletter.FailedElement")
	}
	assert.Error(t, TryToPubSub(s, DefaultPubSubConfig(goodTopic), beam.PCollection{}))
}

func FuzzParseTopic(f *testing.F) {
	for _, s := range []string{goodTopic, "projects/example.com:p/topics/Dead_Letters.v1~x+y%z", "projects/123/topics/dlq",
		"projects//topics/x", "projects/p/topics/goog-x", "projects/p/subscriptions/s", "", "projects/p/topics/a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tn, err := parseTopic(name)
		if err != nil {
			if !strings.Contains(err.Error(), "Topic") {
				t.Fatalf("error %q does not name the Topic field", err)
			}
			return
		}
		if got := "projects/" + tn.project + "/topics/" + tn.topic; got != name {
			t.Fatalf("parseTopic(%q) accepted it as %q", name, got)
		}
		if !gcpconn.ValidProject(tn.project) || !validTopicID(tn.topic) {
			t.Fatalf("parseTopic(%q) accepted an invalid part", name)
		}
	})
}
