package cloudtaskstest

import (
	"log/slog"
	"net/http"
	"time"
)

// This file holds the options NewServer and NewServerWithAddress take; WithCreateQuota lives
// beside the quota it sets, in quota.go.

// DefaultMaxConcurrentStreams is the number of concurrent calls a Server
// accepts on one client connection unless WithMaxConcurrentStreams says
// otherwise. Cloud Tasks front ends allow 100 streams per HTTP/2 connection.
const DefaultMaxConcurrentStreams = 100

// Option configures a Server at construction.
type Option func(*config)

type config struct {
	maxStreams uint32
	noBeta     bool
	now        func() time.Time
	noDispatch bool
	anyHost    bool
	appEngine  string
	issuer     string
	keyFile    string
	log        *slog.Logger
	hardReset  bool
	transport  http.RoundTripper
	quotas     []quotaSetting
}

// WithMaxConcurrentStreams caps how many calls the server serves at once on
// one client connection (the HTTP/2 MAX_CONCURRENT_STREAMS setting). Calls
// beyond the cap wait in the client until a stream frees up. The default is
// DefaultMaxConcurrentStreams; n = 0 keeps the default.
func WithMaxConcurrentStreams(n uint32) Option {
	return func(c *config) {
		if n > 0 {
			c.maxStreams = n
		}
	}
}

// WithoutV2Beta3 leaves the v2beta3 API unregistered, so a client of it gets
// UNIMPLEMENTED, as it does from external emulators that serve only v2.
func WithoutV2Beta3() Option {
	return func(c *config) { c.noBeta = true }
}

// WithClock replaces time.Now for everything the server stamps or compares:
// create and schedule times, the 30-day schedule limit, tombstone expiry,
// token times and dispatch pacing. Dispatch still waits with real timers, so
// a clock that does not advance holds back scheduled tasks and paced
// dispatches (use WithoutDispatch with a frozen clock). A nil function keeps
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}

// WithoutDispatch keeps every task stored until it is deleted or purged: the
// server never sends a task to its target, even from a running queue, and
// RunTask answers FAILED_PRECONDITION. Use it when a test asserts what was
// stored and must not race a dispatch.
func WithoutDispatch() Option {
	return func(c *config) { c.noDispatch = true }
}

// WithDispatchToAnyHost lets dispatch reach any host. By default only
// loopback targets (localhost, *.localhost, 127.0.0.0/8, ::1) are contacted:
// an attempt for any other host fails without a connection, as an
// unreachable target would, and is retried per the queue's retry
// configuration. The standalone emulator uses this option.
func WithDispatchToAnyHost() Option {
	return func(c *config) { c.anyHost = true }
}

// WithAppEngineURL sets where App Engine tasks go: baseURL (for example
// "http://127.0.0.1:8080") followed by the task's relative URI. The routing
// (service, version, instance; the queue's override first) reaches the
// handler as the Host header "<instance>.<version>.<service>.<base host>",
// with only the parts that are set. Without this option App Engine tasks are
// stored but never dispatched. NewServer panics on a base URL that is not an
// absolute http(s) URL.
func WithAppEngineURL(baseURL string) Option {
	return func(c *config) { c.appEngine = baseURL }
}

// WithOIDCIssuer sets the iss claim of the OIDC tokens the server signs, and
// the issuer that OpenIDHandler advertises. The default is
// DefaultOIDCIssuer.
func WithOIDCIssuer(issuer string) Option {
	return func(c *config) {
		if issuer != "" {
			c.issuer = issuer
		}
	}
}

// WithOIDCKeyFile makes the server sign OIDC tokens with the RSA private key
// (at least 2048 bits) in the PEM file at path, PKCS #1 ("RSA PRIVATE KEY")
// or PKCS #8 ("PRIVATE KEY"), instead of a key of its own. A service that
// verifies tokens can then pin the public key, and every server started with
// the file signs alike (same key id). The file is read when the server is
// built: NewServerWithAddress reports a missing, oversized or unusable file
// (naming the file, never its contents), and NewServer panics with that
// error.
func WithOIDCKeyFile(path string) Option {
	return func(c *config) { c.keyFile = path }
}

// WithLogger makes the server log queue creations and one line per dispatch
// attempt (at Info) to l. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithHardResetOnPurge makes PurgeQueue release the purged task names at
// once instead of keeping them taken for the tombstone window; names freed
// earlier in the queue are forgotten too. It mirrors the community
// emulator's -hard-reset-on-purge-queue flag.
func WithHardResetOnPurge() Option {
	return func(c *config) { c.hardReset = true }
}
