package cloudtaskstest_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeKeyFile writes a fresh RSA key as PEM (PKCS #8 when pkcs8, else
// PKCS #1) and returns its path and the key.
func writeKeyFile(t *testing.T, pkcs8 bool) (string, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if pkcs8 {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	path := filepath.Join(t.TempDir(), "oidc.key")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(block), 0o600))
	return path, key
}

// startIssuer starts a server whose issuer is a loopback URL on which its
// OpenIDHandler is served, and returns both.
func startIssuer(t *testing.T, opts ...cloudtaskstest.Option) (*cloudtaskstest.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuer := "http://" + lis.Addr().String() + "/oidc"
	srv := cloudtaskstest.NewServer(append(opts, cloudtaskstest.WithOIDCIssuer(issuer))...)
	t.Cleanup(func() { srv.Close() })
	hs := &http.Server{Handler: srv.OpenIDHandler()}
	go func() { _ = hs.Serve(lis) }()
	t.Cleanup(func() { hs.Close() })
	return srv, issuer
}

// dispatchedToken creates an OIDC task on srv and returns the bearer token
// its dispatch carried.
func dispatchedToken(t *testing.T, srv *cloudtaskstest.Server, audience string) string {
	t.Helper()
	client := newClient(t, srv)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	ts, got := target(t, http.StatusOK)
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: ts.URL + "/hook",
			AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
				ServiceAccountEmail: "invoker@p.iam.gserviceaccount.com", Audience: audience}},
		}},
	}})
	require.NoError(t, err)
	authz := next(t, got).header.Get("Authorization")
	require.True(t, strings.HasPrefix(authz, "Bearer "), "Authorization %q", authz)
	return strings.TrimPrefix(authz, "Bearer ")
}

func TestGoOIDCVerifiesTokensSignedWithAPinnedKey(t *testing.T) {
	keyFile, key := writeKeyFile(t, false)
	srv, issuer := startIssuer(t, cloudtaskstest.WithOIDCKeyFile(keyFile))
	assert.True(t, key.PublicKey.Equal(srv.OIDCPublicKey()), "the server signs with the key from the file")

	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, issuer) // fetches <issuer>/.well-known/openid-configuration
	require.NoError(t, err)
	verifier := provider.Verifier(&oidc.Config{ClientID: "https://orders.example.com"})

	token := dispatchedToken(t, srv, "https://orders.example.com")
	idt, err := verifier.Verify(ctx, token)
	require.NoError(t, err)
	var claims struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	require.NoError(t, idt.Claims(&claims))
	assert.Equal(t, "invoker@p.iam.gserviceaccount.com", claims.Email)
	assert.True(t, claims.EmailVerified)
	assert.Equal(t, issuer, idt.Issuer)

	// A second server started with the same file signs tokens the first
	// verifier (which cached the first server's keys) accepts: the key is pinned.
	other := cloudtaskstest.NewServer(cloudtaskstest.WithOIDCIssuer(issuer), cloudtaskstest.WithOIDCKeyFile(keyFile))
	defer other.Close()
	_, err = verifier.Verify(ctx, dispatchedToken(t, other, "https://orders.example.com"))
	require.NoError(t, err)

	// A server with a key of its own does not.
	stranger := cloudtaskstest.NewServer(cloudtaskstest.WithOIDCIssuer(issuer))
	defer stranger.Close()
	_, err = verifier.Verify(ctx, dispatchedToken(t, stranger, "https://orders.example.com"))
	require.Error(t, err)
}

func TestCertsEndpointPublishesTheKeyAsACertificate(t *testing.T) {
	keyFile, key := writeKeyFile(t, true)
	_, issuer := startIssuer(t, cloudtaskstest.WithOIDCKeyFile(keyFile))
	var certs map[string]string
	getJSON(t, issuer+"/certs", &certs)
	require.Len(t, certs, 1)
	for kid, p := range certs {
		assert.NotEmpty(t, kid)
		block, _ := pem.Decode([]byte(p))
		require.NotNil(t, block)
		assert.Equal(t, "CERTIFICATE", block.Type)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		assert.True(t, key.PublicKey.Equal(cert.PublicKey))
	}
}

func TestBadOIDCKeyFilesAreReportedWithoutTheirContents(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	smallPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	cases := map[string]struct{ path, want string }{
		"missing":     {filepath.Join(dir, "nope.key"), "cannot be read"},
		"a directory": {dir, "not a regular file"},
		"not PEM":     {write("text.key", "SECRET-MATERIAL"), "no PEM"},
		"bad block":   {write("bad.key", "-----BEGIN RSA PRIVATE KEY-----\nU0VDUkVU\n-----END RSA PRIVATE KEY-----\n"), "does not parse"},
		"too small":   {write("small.key", smallPEM), "1024-bit"},
		"too large":   {write("large.key", strings.Repeat("x", 70<<10)), "larger than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := cloudtaskstest.NewServerWithAddress("127.0.0.1:0", cloudtaskstest.WithOIDCKeyFile(tc.path))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.path)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "SECRET")
			assert.NotContains(t, err.Error(), "U0VDUkVU")
		})
	}
}
