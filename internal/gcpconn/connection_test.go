package gcpconn

import (
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/auth"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
)

var testNames = SettingNames{Emulator: "EmulatorEndpoint", KeyFile: "ServiceAccountKeyFile", ImpersonateServiceAccount: "Client.ImpersonateServiceAccount"}

func TestCheckCredentialsNamesTheSettingAtFault(t *testing.T) {
	for _, c := range []struct {
		conn       Connection
		name, want string
	}{
		{Connection{Emulator: "localhost"}, "EmulatorEndpoint", "is not host:port"},
		{Connection{Emulator: "localhost:8085", KeyFile: "/keys/sa.json"}, "ServiceAccountKeyFile", "cannot be used with EmulatorEndpoint, whose plaintext connection carries no credentials"},
		{Connection{KeyFile: "  "}, "ServiceAccountKeyFile", "is blank"},
	} {
		err := c.conn.CheckCredentials(testNames)
		var se *SettingError
		require.ErrorAs(t, err, &se, "%+v", c.conn)
		assert.Equal(t, c.name, se.Name, "%+v", c.conn)
		assert.Contains(t, se.Reason, c.want, "%+v", c.conn)
	}
	for _, ok := range []Connection{{}, {Emulator: "[::1]:8085"}, {KeyFile: "/keys/sa.json"}} {
		assert.NoError(t, ok.CheckCredentials(testNames), "%+v", ok)
	}
}

func optionKinds(opts []option.ClientOption) []string {
	var out []string
	for _, o := range opts {
		out = append(out, fmt.Sprintf("%T", o))
	}
	return out
}

func TestAnEmulatorConnectionCarriesNoCredentials(t *testing.T) {
	loaded := false
	load := func(string, []string) (*auth.Credentials, error) { loaded = true; return nil, nil }
	opts, err := Connection{Emulator: "127.0.0.1:8085", Settings: ClientSettings{DisableTelemetry: true}}.Options(testNames, nil, load)
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithEndpoint("127.0.0.1:8085"))
	assert.Contains(t, opts, option.WithoutAuthentication())
	assert.Contains(t, opts, option.WithTelemetryDisabled())
	for _, kind := range optionKinds(opts) {
		assert.NotContains(t, kind, "Credentials", "no credentials over plaintext")
	}
	assert.False(t, loaded, "no key is read for an emulator")
}

func TestAKeyFileConnectionUsesTheKeysCredentials(t *testing.T) {
	base := &auth.Credentials{}
	var scopes []string
	load := func(_ string, s []string) (*auth.Credentials, error) { scopes = s; return base, nil }
	opts, err := Connection{KeyFile: "/keys/sa.json"}.Options(testNames, []string{"scope"}, load)
	require.NoError(t, err)
	assert.Equal(t, []string{"scope"}, scopes)
	assert.Contains(t, opts, option.WithAuthCredentials(base))
	assert.NotContains(t, opts, option.WithoutAuthentication())
}

func TestAKeyThatCannotBeReadIsNamedBySetting(t *testing.T) {
	load := func(string, []string) (*auth.Credentials, error) {
		return nil, errors.New("the file does not exist on this worker")
	}
	_, err := Connection{KeyFile: "/keys/secret-path.json"}.Options(testNames, nil, load)
	require.Error(t, err)
	assert.Equal(t, "ServiceAccountKeyFile: the file does not exist on this worker", err.Error())
}
