package gcpconn

import (
	"errors"
	"testing"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials/impersonate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
)

var names = SettingNames{Endpoint: "E", QuotaProject: "Q", ImpersonateServiceAccount: "I", ImpersonateDelegates: "D", UniverseDomain: "U", Emulator: "EMU"}

func TestCheckNamesTheSettingAtFault(t *testing.T) {
	sa := "a@p.iam.gserviceaccount.com"
	for _, c := range []struct {
		s         ClientSettings
		emulator  string
		delegates []string
		name      string
	}{
		{ClientSettings{Endpoint: "h:443"}, "127.0.0.1:1", nil, "E"},
		{ClientSettings{QuotaProject: "p"}, "127.0.0.1:1", nil, "Q"},
		{ClientSettings{ImpersonateServiceAccount: sa}, "127.0.0.1:1", nil, "I"},
		{ClientSettings{}, "127.0.0.1:1", []string{sa}, "D"},
		{ClientSettings{UniverseDomain: "u.com"}, "127.0.0.1:1", nil, "U"},
		{ClientSettings{Endpoint: "h"}, "", nil, "E"},
		{ClientSettings{Endpoint: "https://h:443"}, "", nil, "E"},
		{ClientSettings{QuotaProject: "-p"}, "", nil, "Q"},
		{ClientSettings{ImpersonateServiceAccount: "a@"}, "", nil, "I"},
		{ClientSettings{ImpersonateServiceAccount: "a b@p.com"}, "", nil, "I"},
		{ClientSettings{}, "", []string{sa}, "D"},
		{ClientSettings{ImpersonateServiceAccount: sa}, "", []string{"x,y@p.com"}, "D"},
		{ClientSettings{UniverseDomain: "u.com:443"}, "", nil, "U"},
	} {
		err := c.s.Check(names, c.emulator, c.delegates)
		var se *SettingError
		if assert.True(t, errors.As(err, &se), "%+v: %v", c, err) {
			assert.Equal(t, c.name, se.Name, "%+v: %v", c, err)
		}
	}
	ok := ClientSettings{Endpoint: "[::1]:443", QuotaProject: "example.com:billing-1", ImpersonateServiceAccount: sa, UniverseDomain: "googleapis.com", DisableTelemetry: true}
	assert.NoError(t, ok.Check(names, "", []string{sa}))
	assert.NoError(t, ClientSettings{DisableTelemetry: true}.Check(names, "127.0.0.1:1", nil), "the telemetry switch combines with an emulator")
	assert.NoError(t, ClientSettings{QuotaProject: "123456789"}.Check(names, "", nil))
}

func TestAFailedImpersonationSaysSoWithoutTheLibrarysMessage(t *testing.T) {
	saved := Impersonate
	t.Cleanup(func() { Impersonate = saved })
	Impersonate = func(*impersonate.CredentialsOptions) (*auth.Credentials, error) {
		return nil, errors.New("credentials file /home/u/s3cr3t.json: bad")
	}
	_, err := ClientSettings{ImpersonateServiceAccount: "a@p.iam.gserviceaccount.com"}.Options(nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "impersonating a@p.iam.gserviceaccount.com failed")
	assert.NotContains(t, err.Error(), "s3cr3t")
}

func TestZeroSettingsAddNothing(t *testing.T) {
	opts, err := ClientSettings{}.Options(nil, nil)
	require.NoError(t, err)
	assert.Empty(t, opts)
	base := auth.NewCredentials(&auth.CredentialsOptions{})
	opts, err = ClientSettings{}.Options(nil, base)
	require.NoError(t, err)
	require.Len(t, opts, 1)
	assert.True(t, opts[0] == option.WithAuthCredentials(base))
}
