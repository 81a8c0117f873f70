package cloudtaskstest

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultOIDCIssuer is the iss claim of OIDC tokens unless WithOIDCIssuer
// sets another: the issuer of Google-signed ID tokens, so handler code that
// checks it behaves as in production. The tokens are signed by the server's
// own key, never by Google's.
const DefaultOIDCIssuer = "https://accounts.google.com"

// DefaultOAuthScope is the scope of an OAuth token whose task names none.
const DefaultOAuthScope = "https://www.googleapis.com/auth/cloud-platform"

const (
	tokenLifetime = time.Hour
	oauthPrefix   = "ya29.cloudtaskstest."
)

// OIDCClaims are the claims of an OIDC token the server attached to a
// dispatched request, as VerifyOIDCToken returns them.
type OIDCClaims struct {
	Issuer        string    // iss: the server's issuer
	Audience      string    // aud: the task's audience, or else its URL
	Email         string    // email: the task's service account
	EmailVerified bool      // email_verified: always true
	Subject       string    // sub (and azp): a numeric id derived from the email
	IssuedAt      time.Time // iat: when the attempt was sent
	Expiry        time.Time // exp: one hour after IssuedAt
}

// OAuthGrant is what an OAuth access token the server attached stands for,
// as VerifyOAuthToken returns it.
type OAuthGrant struct {
	Email  string    // the task's service account
	Scope  string    // the task's scope, or DefaultOAuthScope
	Expiry time.Time // one hour after the attempt was sent
}

// authority mints and checks the tokens attached to dispatched requests.
type authority struct {
	issuer string
	now    func() time.Time
	mac    []byte

	once   sync.Once
	key    *rsa.PrivateKey // set at construction when pinned (WithOIDCKeyFile)
	kid    string
	cert   []byte // PEM of a self-signed certificate for key, for /certs
	keyErr error
}

// newAuthority returns an authority signing with key, or with a key of its
// own, created on first use, when key is nil.
func newAuthority(issuer string, now func() time.Time, key *rsa.PrivateKey) *authority {
	mac := make([]byte, 32)
	_, _ = rand.Read(mac) // crypto/rand.Read never fails on supported platforms
	return &authority{issuer: issuer, now: now, mac: mac, key: key}
}

// signer returns the RSA key, created on first use (it takes a moment) unless
// it was given. Its key id is derived from the public key, so a pinned key
// keeps its kid across servers and restarts.
func (a *authority) signer() (*rsa.PrivateKey, error) {
	a.once.Do(func() {
		if a.key == nil {
			a.key, a.keyErr = rsa.GenerateKey(rand.Reader, 2048)
			if a.keyErr != nil {
				return
			}
		}
		sum := sha256.Sum256(a.key.PublicKey.N.Bytes())
		a.kid = fmt.Sprintf("%x", sum[:8])
		a.cert, a.keyErr = selfSigned(a.key, a.now())
	})
	return a.key, a.keyErr
}

// selfSigned makes the certificate /certs publishes for key, the form some
// OIDC clients (Google's auth libraries among them) fetch keys in.
func selfSigned(key *rsa.PrivateKey, now time.Time) ([]byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "cloudtaskstest OIDC signing key"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cloudtaskstest: certificate for the OIDC signing key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// maxKeyFileSize bounds what loadSigningKey reads: a PEM RSA key of 8192
// bits is under 7 KB.
const maxKeyFileSize = 64 << 10

// loadSigningKey reads an RSA private key (PEM, PKCS #1 "RSA PRIVATE KEY" or
// PKCS #8 "PRIVATE KEY") of at least 2048 bits from a regular file. Its
// errors name the file, never its contents.
func loadSigningKey(path string) (*rsa.PrivateKey, error) {
	bad := func(why string) error {
		return fmt.Errorf("cloudtaskstest: OIDC signing key file %s: %s", echo(path), why)
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, bad("cannot be read: " + pe.Err.Error())
		}
		return nil, bad("cannot be read")
	case !fi.Mode().IsRegular():
		return nil, bad("is not a regular file")
	case fi.Size() > maxKeyFileSize:
		return nil, bad(fmt.Sprintf("is larger than %d bytes", maxKeyFileSize))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, bad("cannot be read")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil || len(data) > maxKeyFileSize {
		return nil, bad("cannot be read whole")
	}
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, bad("holds no PEM \"RSA PRIVATE KEY\" or \"PRIVATE KEY\" block")
		}
		var key any
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			continue // a certificate or parameters beside the key
		}
		if err != nil {
			return nil, bad("its " + block.Type + " block does not parse")
		}
		rk, ok := key.(*rsa.PrivateKey)
		if !ok {
			return nil, bad(fmt.Sprintf("holds a %T key; RS256 tokens need an RSA key", key))
		}
		if rk.N.BitLen() < 2048 {
			return nil, bad(fmt.Sprintf("holds a %d-bit RSA key; want at least 2048 bits", rk.N.BitLen()))
		}
		return rk, nil
	}
}

var b64 = base64.RawURLEncoding

type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

type jwtClaims struct {
	Aud           string `json:"aud"`
	Azp           string `json:"azp"`
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
	Exp           int64  `json:"exp"`
	Iat           int64  `json:"iat"`
	Iss           string `json:"iss"`
	Sub           string `json:"sub"`
}

// subjectFor derives a stable numeric account id from an email, shaped like
// the ids Google puts in sub.
func subjectFor(email string) string {
	sum := sha256.Sum256([]byte(email))
	return "1" + strconv.FormatUint(binary.BigEndian.Uint64(sum[:8])%1e19, 10)
}

func (a *authority) oidcToken(email, audience string) (string, error) {
	key, err := a.signer()
	if err != nil {
		return "", fmt.Errorf("cloudtaskstest: create OIDC signing key: %w", err)
	}
	now := a.now()
	h, _ := json.Marshal(jwtHeader{Alg: "RS256", Kid: a.kid, Typ: "JWT"})
	c, _ := json.Marshal(jwtClaims{
		Aud: audience, Azp: subjectFor(email), Email: email, EmailVerified: true,
		Exp: now.Add(tokenLifetime).Unix(), Iat: now.Unix(), Iss: a.issuer, Sub: subjectFor(email),
	})
	signed := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("cloudtaskstest: sign OIDC token: %w", err)
	}
	return signed + "." + b64.EncodeToString(sig), nil
}

func (a *authority) verifyOIDC(token string) (*OIDCClaims, error) {
	token = strings.TrimPrefix(strings.TrimSpace(token), "Bearer ")
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("OIDC token: not a JWT (want three dot-separated parts)")
	}
	key, err := a.signer()
	if err != nil {
		return nil, err
	}
	var h jwtHeader
	if err := decodeJSON(parts[0], &h); err != nil {
		return nil, fmt.Errorf("OIDC token header: %w", err)
	}
	if h.Alg != "RS256" || h.Kid != a.kid {
		return nil, fmt.Errorf("OIDC token header: alg %q kid %q, want RS256 and this server's key %q", h.Alg, h.Kid, a.kid)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, errors.New("OIDC token signature: not base64url")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return nil, errors.New("OIDC token signature: does not verify with this server's key")
	}
	var c jwtClaims
	if err := decodeJSON(parts[1], &c); err != nil {
		return nil, fmt.Errorf("OIDC token claims: %w", err)
	}
	if c.Iss != a.issuer {
		return nil, fmt.Errorf("OIDC token claims: iss %q, want %q", c.Iss, a.issuer)
	}
	now := a.now()
	if now.Unix() >= c.Exp {
		return nil, errors.New("OIDC token claims: expired")
	}
	if c.Iat > now.Add(time.Minute).Unix() {
		return nil, errors.New("OIDC token claims: issued in the future")
	}
	return &OIDCClaims{
		Issuer: c.Iss, Audience: c.Aud, Email: c.Email, EmailVerified: c.EmailVerified, Subject: c.Sub,
		IssuedAt: time.Unix(c.Iat, 0), Expiry: time.Unix(c.Exp, 0),
	}, nil
}

func decodeJSON(part string, v any) error {
	b, err := b64.DecodeString(part)
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("not JSON")
	}
	return nil
}

type oauthPayload struct {
	Email string `json:"email"`
	Scope string `json:"scope"`
	Exp   int64  `json:"exp"`
}

// oauthToken returns an opaque-looking bearer token that only this server
// can verify (an HMAC over the grant).
func (a *authority) oauthToken(email, scope string) string {
	if scope == "" {
		scope = DefaultOAuthScope
	}
	p, _ := json.Marshal(oauthPayload{Email: email, Scope: scope, Exp: a.now().Add(tokenLifetime).Unix()})
	body := b64.EncodeToString(p)
	m := hmac.New(sha256.New, a.mac)
	m.Write([]byte(body))
	return oauthPrefix + body + "." + b64.EncodeToString(m.Sum(nil))
}

func (a *authority) verifyOAuth(token string) (*OAuthGrant, error) {
	token = strings.TrimPrefix(strings.TrimSpace(token), "Bearer ")
	rest, ok := strings.CutPrefix(token, oauthPrefix)
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return nil, errors.New("OAuth token: not issued by cloudtaskstest")
	}
	m := hmac.New(sha256.New, a.mac)
	m.Write([]byte(body))
	want := b64.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return nil, errors.New("OAuth token: not issued by this server")
	}
	var p oauthPayload
	if err := decodeJSON(body, &p); err != nil {
		return nil, fmt.Errorf("OAuth token: %w", err)
	}
	if a.now().Unix() >= p.Exp {
		return nil, errors.New("OAuth token: expired")
	}
	return &OAuthGrant{Email: p.Email, Scope: p.Scope, Expiry: time.Unix(p.Exp, 0)}, nil
}

// handler serves the OpenID discovery document and the key set, under the
// issuer URL's path. Paths are compared as they are, never turned into
// ServeMux patterns: an issuer path may hold any character.
func (a *authority) handler() http.Handler {
	prefix := ""
	if u, err := url.Parse(a.issuer); err == nil {
		prefix = strings.TrimSuffix(u.Path, "/")
	}
	discovery, jwks, certs := prefix+"/.well-known/openid-configuration", prefix+"/jwks", prefix+"/certs"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != discovery && r.URL.Path != jwks && r.URL.Path != certs {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == discovery {
			writeJSON(w, map[string]any{
				"issuer":                                a.issuer,
				"jwks_uri":                              strings.TrimSuffix(a.issuer, "/") + "/jwks",
				"id_token_signing_alg_values_supported": []string{"RS256"},
				"response_types_supported":              []string{"id_token"},
				"subject_types_supported":               []string{"public"},
				"claims_supported":                      []string{"aud", "azp", "email", "email_verified", "exp", "iat", "iss", "sub"},
			})
			return
		}
		key, err := a.signer()
		if err != nil {
			http.Error(w, "no signing key", http.StatusInternalServerError)
			return
		}
		if r.URL.Path == certs {
			writeJSON(w, map[string]string{a.kid: string(a.cert)})
			return
		}
		writeJSON(w, map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "alg": "RS256", "use": "sig", "kid": a.kid,
			"n": b64.EncodeToString(key.PublicKey.N.Bytes()),
			"e": b64.EncodeToString(big.NewInt(int64(key.PublicKey.E)).Bytes()),
		}}})
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
