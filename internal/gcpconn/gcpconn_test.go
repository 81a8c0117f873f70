package gcpconn

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckEndpoint(t *testing.T) {
	for _, ok := range []string{"localhost:8123", "127.0.0.1:1", "[::1]:65535", "[2001:db8::1]:443", "emulator:443", "a:0080"} {
		assert.NoError(t, CheckEndpoint(ok), ok)
	}
	for _, bad := range []string{"", "localhost", ":8123", "localhost:", "localhost:0", "localhost:65536",
		"localhost:80x", "local host:80", "localhost:80 ", "[::1:80", "localhost:-1", "localhost:+80",
		"http://localhost:80/x", "localhost:123456", "host/x:80",
		"::1:8080", "a:b:80", "[]:80", "[[::1]]:80"} {
		err := CheckEndpoint(bad)
		if assert.Error(t, err, bad) {
			assert.Contains(t, err.Error(), "is not host:port")
		}
	}
}

func TestCheckEndpointSaysWhatToFixAndRepeatsNoSecret(t *testing.T) {
	for _, c := range []struct{ endpoint, want, not string }{
		{"http://127.0.0.1:8123", `drop the scheme: the endpoint is host:port only, here "127.0.0.1:8123"`, "bracket"},
		{"https://localhost:8443/", "drop the scheme", "bracket"},
		{"user:s3cr3t-token@host:443", "user info (user:password@) is not allowed", "s3cr3t-token"},
		{"http://user:s3cr3t-token@host:443", "drop the scheme", "s3cr3t-token"},
		{strings.Repeat("h", 1<<20) + ":443", "the host is 1048576 bytes long; a host name has at most 253", ""},
		{strings.Repeat("a", 64) + ".example.com:443", "a label of the host (a part between dots) is over 63 bytes", ""},
		{"local\x00host:443", "control character", ""},
		// A query, path or fragment may hold a token or an API key: never repeated.
		{"127.0.0.1:8080?access_token=ya29.FAKE-TOKEN", `"127.0.0.1:8080<path, query or fragment removed>"`, "FAKE-TOKEN"},
		{"https://127.0.0.1:8443/?key=AIzaFAKEKEY", `"https://127.0.0.1:8443<path, query or fragment removed>" is not host:port: drop the scheme`, "AIzaFAKEKEY"},
		{"http://127.0.0.1:8443?key=AIzaFAKEKEY", "drop the scheme", "AIzaFAKEKEY"},
		{"127.0.0.1:443/?key=AIzaFAKEKEY", "", "AIzaFAKEKEY"},
		{"emu#frag:8080", "the host may hold only letters", "frag:8080"},
		{"127.0.0.1:8123/?next=http://a&access_token=ya29.SECRET", "", "SECRET"},
		{"[::1]:8123/cb#state=x://y&token=SECRET", "", "SECRET"},
		// A host holds letters, digits, '-', '.' and '_' only.
		{"local%host:8080", "the host may hold only letters, digits, '-', '.' and '_'", ""},
	} {
		err := CheckEndpoint(c.endpoint)
		require.Error(t, err, c.endpoint)
		assert.Contains(t, err.Error(), c.want)
		if c.not != "" {
			assert.NotContains(t, err.Error(), c.not)
		}
		assert.Less(t, len(err.Error()), 512, "the endpoint is cut short")
	}
	assert.NoError(t, CheckEndpoint(strings.Repeat("a", 63)+".example.com:443"), "63-byte labels are fine")
	assert.NoError(t, CheckEndpoint("cloud_tasks-emulator.local:8123"), "a compose service name with '_'")
	assert.NoError(t, CheckEndpoint("[::1]:8123"))
	assert.NoError(t, CheckEndpoint("[fe80::1%eth0]:8080"), "a zoned IPv6 address")
}

func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"localhost:8123", "[::1]:80", "a:0", "a:65536", " a:1", "a/b:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckEndpoint(s) != nil {
			return
		}
		i := strings.LastIndexByte(s, ':')
		host, port := s[:i], s[i+1:]
		n, err := strconv.Atoi(port)
		bracketed := strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]")
		if host == "" || strings.ContainsAny(s, " \t\r\n/") || err != nil || n < 1 || n > 65535 ||
			(strings.Contains(host, ":") && !bracketed) {
			t.Fatalf("accepted %q", s)
		}
	})
}

func writeJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "key.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func TestLoadServiceAccountKey(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	good := writeJSON(t, map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "kid", "private_key": pemKey,
		"client_email": "sa@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token",
	})
	creds, err := LoadServiceAccountKey(good, []string{"https://www.googleapis.com/auth/cloud-platform"})
	require.NoError(t, err)
	require.NotNil(t, creds)

	user := writeJSON(t, map[string]string{"type": "authorized_user", "client_secret": "s3cr3t", "refresh_token": "r3fr3sh"})
	notJSON := filepath.Join(t.TempDir(), "key.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("-----BEGIN PRIVATE KEY----- s3cr3t"), 0o600))
	broken := writeJSON(t, map[string]string{"type": "service_account", "private_key": "s3cr3t"})
	for path, want := range map[string]string{
		filepath.Join(t.TempDir(), "missing.json"): "does not exist",
		user:    "not a service-account key",
		notJSON: "not a JSON key",
		broken:  "could not be parsed",
	} {
		_, err := LoadServiceAccountKey(path, nil)
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), want)
		assert.NotContains(t, err.Error(), "s3cr3t", "no key material in errors")
		assert.NotContains(t, err.Error(), path, "no path in errors")
	}
}

func TestAKeyFileLargerThanAnyKeyIsRefused(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	data, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "kid",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "sa@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token",
	})
	require.NoError(t, err)
	// A valid key padded with JSON whitespace beyond the bound: only the size is wrong.
	padded := append(data, bytes.Repeat([]byte(" "), MaxKeyFileBytes+1-len(data))...)
	path := filepath.Join(t.TempDir(), "key.json")
	require.NoError(t, os.WriteFile(path, padded, 0o600))
	_, err = LoadServiceAccountKey(path, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than")

	require.NoError(t, os.WriteFile(path, padded[:MaxKeyFileBytes], 0o600))
	_, err = LoadServiceAccountKey(path, nil)
	assert.NoError(t, err, "a key file at the bound is read")
}

func TestADirectoryKeyFileIsRefused(t *testing.T) {
	_, err := LoadServiceAccountKey(t.TempDir(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a regular file")
}
