package cloudtasksio

import (
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials/impersonate"
	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

func TestClientSettingsBecomeClientOptions(t *testing.T) {
	s, err := Config{Client: ClientOptions{Endpoint: "us-central1-cloudtasks.googleapis.com:443", QuotaProject: "billing-project",
		UniverseDomain: "googleapis.com", Telemetry: TelemetryOff}, EmulatorEndpoint: ""}.clientSettings()
	require.NoError(t, err)
	opts, err := clientSpec{ChannelPoolSize: 4, Settings: s}.options()
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithGRPCConnectionPool(4))
	assert.Contains(t, opts, option.WithEndpoint("us-central1-cloudtasks.googleapis.com:443"))
	assert.Contains(t, opts, option.WithQuotaProject("billing-project"))
	assert.Contains(t, opts, option.WithUniverseDomain("googleapis.com"))
	assert.Contains(t, opts, option.WithTelemetryDisabled())

	s, err = Config{Client: ClientOptions{Telemetry: TelemetryOn}, EmulatorEndpoint: ""}.clientSettings()
	require.NoError(t, err)
	opts, err = clientSpec{Settings: s}.options()
	require.NoError(t, err)
	assert.NotContains(t, opts, option.WithTelemetryDisabled())
}

func TestTheTelemetrySwitchAppliesToTheEmulator(t *testing.T) {
	s, err := Config{Client: ClientOptions{Telemetry: TelemetryOff}, EmulatorEndpoint: "127.0.0.1:8123"}.clientSettings()
	require.NoError(t, err)
	opts, err := clientSpec{EmulatorEndpoint: "127.0.0.1:8123", Settings: s}.options()
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithTelemetryDisabled())
	assert.Contains(t, opts, option.WithoutAuthentication())
}

func TestTheInstrumentationIsOffByDefault(t *testing.T) {
	s, err := Config{}.clientSettings()
	require.NoError(t, err)
	opts, err := clientSpec{Settings: s}.options()
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithTelemetryDisabled(), "docs/configuration.md: the default is off")
}

func TestImpersonationWrapsTheKeyFilesCredentials(t *testing.T) {
	savedKey, savedImp := loadKey, gcpconn.Impersonate
	t.Cleanup(func() { loadKey, gcpconn.Impersonate = savedKey, savedImp })
	base := auth.NewCredentials(&auth.CredentialsOptions{})
	loadKey = func(string, []string) (*auth.Credentials, error) { return base, nil }
	impersonated := auth.NewCredentials(&auth.CredentialsOptions{})
	var asked *impersonate.CredentialsOptions
	gcpconn.Impersonate = func(o *impersonate.CredentialsOptions) (*auth.Credentials, error) {
		asked = o
		return impersonated, nil
	}
	s, err := Config{Client: ClientOptions{ImpersonateServiceAccount: "writer@p.iam.gserviceaccount.com",
		ImpersonateDelegates: []string{"a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"}}, EmulatorEndpoint: ""}.clientSettings()
	require.NoError(t, err)
	opts, err := clientSpec{ServiceAccountKeyFile: "/keys/base.json", Settings: s}.options()
	require.NoError(t, err)

	require.NotNil(t, asked, "impersonation was not asked for")
	assert.Equal(t, "writer@p.iam.gserviceaccount.com", asked.TargetPrincipal)
	assert.Equal(t, []string{"a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"}, asked.Delegates)
	assert.Equal(t, cloudtasks.DefaultAuthScopes(), asked.Scopes)
	assert.Same(t, base, asked.Credentials, "the key file's identity asks for the target's tokens")
	// Interface equality compares the credentials by pointer: the impersonated ones reach the
	// client, the base ones do not.
	has := func(c *auth.Credentials) bool {
		for _, o := range opts {
			if o == option.WithAuthCredentials(c) {
				return true
			}
		}
		return false
	}
	assert.True(t, has(impersonated), "the client gets the impersonated credentials")
	assert.False(t, has(base), "the base credentials do not reach the client")
}

func TestEachClientSettingHasItsOwnClient(t *testing.T) {
	on, err := Config{Client: ClientOptions{Telemetry: TelemetryOn}, EmulatorEndpoint: "127.0.0.1:1"}.clientSettings()
	require.NoError(t, err)
	off, err := Config{Client: ClientOptions{Telemetry: TelemetryOff}, EmulatorEndpoint: "127.0.0.1:1"}.clientSettings()
	require.NoError(t, err)
	a, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:1", Settings: on})
	require.NoError(t, err)
	b, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:1", Settings: off})
	require.NoError(t, err)
	c, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:1", Settings: off})
	require.NoError(t, err)
	assert.NotSame(t, a, b)
	assert.Same(t, b, c)
}
