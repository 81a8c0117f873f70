package pubsubdl

import (
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials/impersonate"
	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

const targetSA = "dlq-writer@my-project.iam.gserviceaccount.com"

func TestClientOptionsThatCannotWorkNameTheField(t *testing.T) {
	emu := "127.0.0.1:8085"
	for _, c := range []struct {
		name string
		cfg  PubSubConfig
		want string
	}{
		{"endpoint with emulator", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: emu, Client: ClientOptions{Endpoint: "pubsub.example.com:443"}},
			"Client.Endpoint cannot be combined with EmulatorEndpoint"},
		{"quota project with emulator", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: emu, Client: ClientOptions{QuotaProject: "billing"}},
			"Client.QuotaProject cannot be combined with EmulatorEndpoint"},
		{"impersonation with emulator", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: emu, Client: ClientOptions{ImpersonateServiceAccount: targetSA}},
			"Client.ImpersonateServiceAccount cannot be combined with EmulatorEndpoint"},
		{"universe with emulator", PubSubConfig{Topic: goodTopic, EmulatorEndpoint: emu, Client: ClientOptions{UniverseDomain: "example.com"}},
			"Client.UniverseDomain cannot be combined with EmulatorEndpoint"},
		{"delegates without a target", PubSubConfig{Topic: goodTopic, Client: ClientOptions{ImpersonateDelegates: []string{targetSA}}},
			"Client.ImpersonateDelegates needs Client.ImpersonateServiceAccount"},
		{"bad endpoint", PubSubConfig{Topic: goodTopic, Client: ClientOptions{Endpoint: "pubsub.googleapis.com"}}, "Client.Endpoint"},
		{"unknown telemetry", PubSubConfig{Topic: goodTopic, Client: ClientOptions{Telemetry: 9}}, "Client.Telemetry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			err := TryToPubSub(s, c.cfg, beam.Create(s, deadletter.FailedElement{}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestClientSettingsReachThePublisherOptions(t *testing.T) {
	saved := gcpconn.Impersonate
	t.Cleanup(func() { gcpconn.Impersonate = saved })
	impersonated := auth.NewCredentials(&auth.CredentialsOptions{})
	var asked *impersonate.CredentialsOptions
	gcpconn.Impersonate = func(o *impersonate.CredentialsOptions) (*auth.Credentials, error) {
		asked = o
		return impersonated, nil
	}
	s, err := ClientOptions{Endpoint: "us-central1-pubsub.googleapis.com:443", QuotaProject: "billing-project",
		ImpersonateServiceAccount: targetSA, ImpersonateDelegates: []string{"relay@my-project.iam.gserviceaccount.com"},
		UniverseDomain: "googleapis.com", Telemetry: TelemetryOff}.settings("")
	require.NoError(t, err)
	opts, err := clientOptions(clientKey{topic: goodTopic, settings: s})
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithEndpoint("us-central1-pubsub.googleapis.com:443"))
	assert.Contains(t, opts, option.WithQuotaProject("billing-project"))
	assert.Contains(t, opts, option.WithUniverseDomain("googleapis.com"))
	assert.Contains(t, opts, option.WithTelemetryDisabled())
	require.NotNil(t, asked)
	assert.Equal(t, targetSA, asked.TargetPrincipal)
	assert.Equal(t, []string{"relay@my-project.iam.gserviceaccount.com"}, asked.Delegates)
	assert.Equal(t, []string{pubsub.ScopePubSub}, asked.Scopes)
	assert.Nil(t, asked.Credentials, "without a key file the base is application-default credentials")
	assert.True(t, opts[len(opts)-1] == option.WithAuthCredentials(impersonated))

	// On an emulator only the telemetry switch applies.
	s, err = ClientOptions{Telemetry: TelemetryOff}.settings("127.0.0.1:8085")
	require.NoError(t, err)
	opts, err = clientOptions(clientKey{topic: goodTopic, endpoint: "127.0.0.1:8085", settings: s})
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithTelemetryDisabled())

	s, err = ClientOptions{}.settings("")
	require.NoError(t, err)
	assert.False(t, s.DisableTelemetry, "the publisher keeps the instrumentation by default")
}
