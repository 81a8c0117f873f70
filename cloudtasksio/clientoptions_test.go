package cloudtasksio_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

const targetSA = "writer@my-project.iam.gserviceaccount.com"

func TestClientOptionsThatCannotWorkAreConstructionErrors(t *testing.T) {
	emu := "127.0.0.1:8123"
	cases := []struct {
		name     string
		client   cloudtasksio.ClientOptions
		emulator string
		want     string
	}{
		{"endpoint with emulator", cloudtasksio.ClientOptions{Endpoint: "cloudtasks.example.com:443"}, emu,
			"Config.Client.Endpoint cannot be combined with Config.EmulatorEndpoint"},
		{"quota project with emulator", cloudtasksio.ClientOptions{QuotaProject: "billing-project"}, emu,
			"Config.Client.QuotaProject cannot be combined with Config.EmulatorEndpoint"},
		{"impersonation with emulator", cloudtasksio.ClientOptions{ImpersonateServiceAccount: targetSA}, emu,
			"Config.Client.ImpersonateServiceAccount cannot be combined with Config.EmulatorEndpoint"},
		{"delegates with emulator", cloudtasksio.ClientOptions{ImpersonateDelegates: []string{targetSA}}, emu,
			"Config.Client.ImpersonateDelegates cannot be combined with Config.EmulatorEndpoint"},
		{"universe with emulator", cloudtasksio.ClientOptions{UniverseDomain: "example-universe.com"}, emu,
			"Config.Client.UniverseDomain cannot be combined with Config.EmulatorEndpoint"},
		{"delegates without a target", cloudtasksio.ClientOptions{ImpersonateDelegates: []string{targetSA}}, "",
			"Config.Client.ImpersonateDelegates needs Config.Client.ImpersonateServiceAccount"},
		{"empty delegate", cloudtasksio.ClientOptions{ImpersonateServiceAccount: targetSA, ImpersonateDelegates: []string{targetSA, ""}}, "",
			"Config.Client.ImpersonateDelegates entry 1"},
		{"endpoint with a scheme", cloudtasksio.ClientOptions{Endpoint: "https://cloudtasks.googleapis.com:443"}, "",
			"Config.Client.Endpoint"},
		{"endpoint without a port", cloudtasksio.ClientOptions{Endpoint: "cloudtasks.googleapis.com"}, "",
			"Config.Client.Endpoint"},
		{"quota project not an id", cloudtasksio.ClientOptions{QuotaProject: "My Project"}, "",
			"Config.Client.QuotaProject"},
		{"target not an address", cloudtasksio.ClientOptions{ImpersonateServiceAccount: "writer"}, "",
			"Config.Client.ImpersonateServiceAccount"},
		{"universe with a scheme", cloudtasksio.ClientOptions{UniverseDomain: "https://googleapis.com"}, "",
			"Config.Client.UniverseDomain"},
		{"unknown telemetry", cloudtasksio.ClientOptions{Telemetry: 7}, "",
			"Config.Client.Telemetry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := cloudtasksio.Config{Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: c.emulator, Client: c.client}
			err := tryWrite(cfg, order{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestClientOptionsThatCanWorkConstruct(t *testing.T) {
	for name, cfg := range map[string]cloudtasksio.Config{
		"every setting": {Queue: testQueue, HTTP: validHTTP(), ServiceAccountKeyFile: "/secrets/key.json", Client: cloudtasksio.ClientOptions{
			Endpoint: "us-central1-cloudtasks.googleapis.com:443", QuotaProject: "billing-project",
			ImpersonateServiceAccount: targetSA, ImpersonateDelegates: []string{"relay@my-project.iam.gserviceaccount.com"},
			UniverseDomain: "googleapis.com", Telemetry: cloudtasksio.TelemetryOff}},
		// The instrumentation runs over the emulator's connection too, so the switch applies there.
		"telemetry off with the emulator": {Queue: testQueue, HTTP: validHTTP(), EmulatorEndpoint: "127.0.0.1:8123",
			Client: cloudtasksio.ClientOptions{Telemetry: cloudtasksio.TelemetryOff}},
	} {
		t.Run(name, func(t *testing.T) { require.NoError(t, tryWrite(cfg, order{})) })
	}
}

func TestConfigFromOptionsMapsEveryClientKey(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"http.url":                           "https://e.com/",
		"client.endpoint":                    "cloudtasks-psc.p.googleapis.com:443",
		"client.quota-project":               "billing-project",
		"client.impersonate-service-account": targetSA,
		"client.impersonate-delegates":       "a@p.iam.gserviceaccount.com, b@p.iam.gserviceaccount.com",
		"client.universe-domain":             "googleapis.com",
		"client.telemetry":                   "OFF",
	}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.ClientOptions{
		Endpoint: "cloudtasks-psc.p.googleapis.com:443", QuotaProject: "billing-project",
		ImpersonateServiceAccount: targetSA, ImpersonateDelegates: []string{"a@p.iam.gserviceaccount.com", "b@p.iam.gserviceaccount.com"},
		UniverseDomain: "googleapis.com", Telemetry: cloudtasksio.TelemetryOff,
	}, cfg.Client)

	cfg, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"http.url": "https://e.com/", "client.telemetry": "on"}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.TelemetryOn, cfg.Client.Telemetry)
}

func TestClientKeyErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		key  string
	}{
		{map[string]string{"client.endpoint": "cloudtasks.googleapis.com:443", "emulator-endpoint": "127.0.0.1:8123"}, "client.endpoint"},
		{map[string]string{"client.universe-domain": "googleapis.com", "emulator-endpoint": "127.0.0.1:8123"}, "client.universe-domain"},
		{map[string]string{"client.impersonate-delegates": targetSA}, "client.impersonate-delegates"},
		{map[string]string{"client.impersonate-service-account": targetSA, "client.impersonate-delegates": targetSA + ",,"}, "client.impersonate-delegates"},
		{map[string]string{"client.endpoint": "cloudtasks.googleapis.com"}, "client.endpoint"},
		{map[string]string{"client.quota-project": "Billing"}, "client.quota-project"},
		{map[string]string{"client.telemetry": "maybe"}, "client.telemetry"},
		{map[string]string{"client.telemetry": " "}, "client.telemetry"},
	} {
		c.opts["http.url"] = "https://e.com/"
		_, err := cloudtasksio.ConfigFromOptions(withQueue(c.opts))
		var oe *cloudtasksio.OptionError
		require.True(t, errors.As(err, &oe), "%v", err)
		assert.Equal(t, c.key, oe.Key, "%v", err)
	}
}
