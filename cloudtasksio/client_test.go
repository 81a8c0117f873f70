package cloudtasksio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"cloud.google.com/go/auth"
	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
)

func optionTypes(opts []option.ClientOption) []string {
	var out []string
	for _, o := range opts {
		out = append(out, fmt.Sprintf("%T", o))
	}
	return out
}

func TestChannelPoolSizeBecomesTheClientsConnectionPool(t *testing.T) {
	opts, err := clientSpec{ChannelPoolSize: 8}.options()
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithGRPCConnectionPool(8))

	opts, err = clientSpec{}.options()
	require.NoError(t, err)
	assert.Empty(t, opts, "the default is the client's own single connection and application-default credentials")
}

func TestTheEmulatorGetsNoCredentials(t *testing.T) {
	opts, err := clientSpec{EmulatorEndpoint: "127.0.0.1:8123"}.options()
	require.NoError(t, err)
	assert.Contains(t, opts, option.WithEndpoint("127.0.0.1:8123"))
	assert.Contains(t, opts, option.WithoutAuthentication())
	for _, typ := range optionTypes(opts) {
		assert.NotContains(t, typ, "Credentials", "no credentials over plaintext")
	}
}

func TestAKeyFileThatIsNotAServiceAccountKeyIsRefusedOnTheWorker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "user.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"type":"authorized_user","refresh_token":"s3cr3t"}`), 0o600))
	_, err := sharedClient(t.Context(), clientSpec{ServiceAccountKeyFile: path})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Config.ServiceAccountKeyFile")
	assert.Contains(t, err.Error(), "not a service-account key")
	assert.NotContains(t, err.Error(), "s3cr3t")
	assert.NotContains(t, err.Error(), path)
}

func TestClientsAreSharedPerSetting(t *testing.T) {
	a, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:1"})
	require.NoError(t, err)
	b, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:1"})
	require.NoError(t, err)
	c, err := sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:2"})
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.NotSame(t, a, c)
}

func TestTheKeyFileIsReadOutsideTheSharedClientLock(t *testing.T) {
	// That the cache's shared lock is free while a value is created is checked where the lock
	// lives (gcpconn's TestCreatingAValueDoesNotHoldTheCacheLock); here, that the key file is
	// read inside that creation, so another setting gets its client meanwhile.
	saved := loadKey
	t.Cleanup(func() { loadKey = saved })
	var other *cloudtasks.Client
	var otherErr error
	loadKey = func(string, []string) (*auth.Credentials, error) {
		other, otherErr = sharedClient(t.Context(), clientSpec{EmulatorEndpoint: "127.0.0.1:3"})
		return nil, errors.New("the test's key cannot be read")
	}
	// A key file of this run alone: the failure of an earlier run is remembered for
	// gcpconn.FailureTTL, and would answer without reading the key again.
	_, err := sharedClient(t.Context(), clientSpec{ServiceAccountKeyFile: ownSetting("/keys/slow") + ".json"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the test's key cannot be read")
	require.NoError(t, otherErr)
	assert.NotNil(t, other)
}
