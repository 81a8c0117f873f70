// Package cloudtaskstest runs an in-memory Cloud Tasks server for tests and
// local runs.
//
// A Server is a real gRPC server of the Cloud Tasks v2 API (plus GetQueue of
// the v2beta3 API, with the queue's stats) listening on a loopback port. Start it with one call, point
// the ordinary client at it, inspect what it stored, and close it:
//
//	srv := cloudtaskstest.NewServer()
//	defer srv.Close()
//	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
//	...
//	tasks := srv.Tasks("projects/p/locations/l/queues/q")
//
// It keeps queues (running or paused, with rate limits and retry
// configuration), stores tasks with the BASIC and FULL views, deduplicates
// named tasks (a deleted or completed name stays taken for the queue's
// tombstone window), and answers INVALID_ARGUMENT for the requests the service
// rejects. Fault injection (scripted error codes or whole status errors with
// details, reactors that answer by request, lost responses, latency, a
// per-connection stream cap) lets a test exercise a client's recovery paths,
// a per-queue create quota (WithCreateQuota) answers RESOURCE_EXHAUSTED above
// a set number of creates per second, as the service does, RefuseAtRandom and
// RefuseBurst answer it to a share of the calls whatever their rate or to a
// burst of them, and Observe shows every call and its answer without changing
// it.
//
// Like the service, it dispatches the tasks of running queues: it sends each
// task's HTTP request to its target with the headers Cloud Tasks adds (and a
// signed OIDC token or an OAuth token when the task asks for one), paced by
// the queue's rate limits, retrying non-2xx answers per the queue's retry
// configuration, and removes the task once it succeeds. A queue's
// overrides (http_target with its uri_override, method, headers and token;
// app_engine_routing_override), set by CreateQueue or UpdateQueue, apply to
// every attempt as they do in the service. Paused and disabled queues
// (DisableQueue) keep their tasks. By default only loopback targets are
// reachable. A test that asserts what was stored should use a paused queue
// or WithoutDispatch, so that no dispatch races its assertions; a test that
// asserts what was delivered calls Wait, which returns once nothing is left
// to send now.
//
// Nothing is global: every Server has its own state, port, clock and keys.
// The [testing guide] describes what is emulated and what is not, and opens
// with a complete pipeline test.
//
// [testing guide]: https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/testing.md
package cloudtaskstest

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	betapb "cloud.google.com/go/cloudtasks/apiv2beta3/cloudtaskspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Server is an in-memory Cloud Tasks server listening on a loopback port.
// Create it with NewServer (or NewUnstartedServer and Start), stop it with
// Close. All methods are safe for concurrent use, Start excepted.
type Server struct {
	// Addr is the "host:port" the server listens on, for option.WithEndpoint
	// or CLOUDTASKS_EMULATOR_HOST-style settings; empty until Start.
	Addr string

	cfg    config
	gsrv   *grpc.Server
	lis    net.Listener
	store  *store
	fault  *faults
	counts *counters
	auth   *authority
	disp   *dispatcher // nil with WithoutDispatch
	idle   broadcast   // signalled by changed

	closeOnce sync.Once
	served    chan struct{}
	startMu   sync.Mutex // guards gsrv and closed between Start and Close
	closed    bool
}

// NewServer starts a server on 127.0.0.1 with a port chosen by the system.
// It panics if it cannot listen, which only happens when the machine is out of
// ports or sockets, or on an invalid WithAppEngineURL.
func NewServer(opts ...Option) *Server {
	s, err := NewServerWithAddress("127.0.0.1:0", opts...)
	if err != nil {
		panic(fmt.Sprintf("cloudtaskstest.NewServer: %v", err))
	}
	return s
}

// NewServerWithAddress starts a server listening on addr ("host:port"; port 0
// picks a free one). Unlike NewServer it reports a listen failure as an error,
// which suits a long-running emulator with a configured port.
// It also reports an App Engine base URL (WithAppEngineURL) that is not an
// absolute http(s) URL.
func NewServerWithAddress(addr string, opts ...Option) (*Server, error) {
	s, err := NewUnstartedServer(opts...)
	if err != nil {
		return nil, err
	}
	if err := s.Start(addr); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// NewUnstartedServer returns a server that does not listen yet, as
// httptest.NewUnstartedServer does: its queues can be created and its faults
// set before Start makes it reachable, so that a command can check every
// value it was given before it takes a port. It reports an unusable option as
// NewServerWithAddress does. Close it, started or not.
func NewUnstartedServer(opts ...Option) (*Server, error) {
	return newBackend(opts...)
}

// Start makes a server from NewUnstartedServer listen on addr ("host:port";
// port 0 picks a free one) and serve; Addr is set when it returns. It fails
// when the server has started or was closed, or cannot listen. Call it
// before the server is used from other goroutines.
func (s *Server) Start(addr string) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	switch {
	case s.closed:
		return errors.New("cloudtaskstest: Start of a closed server")
	case s.gsrv != nil:
		return errors.New("cloudtaskstest: Start of a server that has started")
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %s", echo(addr), boundedtext.Cut(err.Error(), 300))
	}
	s.Addr = lis.Addr().String()
	s.lis = lis
	s.gsrv = grpc.NewServer(
		grpc.MaxConcurrentStreams(s.cfg.maxStreams),
		grpc.UnaryInterceptor(s.intercept),
	)
	v2 := &v2Service{store: s.store, run: runDisabled}
	if s.disp != nil {
		v2.run = s.disp.runNow
		s.disp.start()
	}
	cloudtaskspb.RegisterCloudTasksServer(s.gsrv, v2)
	if !s.cfg.noBeta {
		betapb.RegisterCloudTasksServer(s.gsrv, &v2beta3Service{store: s.store})
	}
	// gRPC server reflection: tools such as grpcurl list and call the services without
	// the proto files.
	reflection.Register(s.gsrv)
	go func() {
		defer close(s.served)
		_ = s.gsrv.Serve(lis)
	}()
	return nil
}

func runDisabled(context.Context, string, cloudtaskspb.Task_View) (*cloudtaskspb.Task, error) {
	return nil, status.Error(codes.FailedPrecondition, "cloudtaskstest: dispatch is turned off (WithoutDispatch)")
}

// OptionError is the error NewServer and NewServerWithAddress return when one of
// their options is unusable: Option names the option function ("WithCreateQuota",
// "WithOIDCKeyFile", "WithAppEngineURL"), so that a caller can tell which of its
// own settings to blame without reading the message.
type OptionError struct {
	Option string
	Err    error
}

// Error returns the underlying error's text, cut to maxOptionErrorText bytes: it may
// repeat the value the option was given.
func (e *OptionError) Error() string { return boundedtext.Cut(e.Err.Error(), maxOptionErrorText) }

// redactedURL returns u without the password of its user info, when it parses as a URL.
func redactedURL(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		return p.Redacted()
	}
	return u
}

// maxOptionErrorText bounds an OptionError's text.
const maxOptionErrorText = 1024

// Unwrap returns the underlying error.
func (e *OptionError) Unwrap() error { return e.Err }

// newBackend builds everything but the gRPC listener: the store, the fault
// and statistics state, the token authority and the dispatcher (not yet
// started). Tests of the dispatch core use it inside a synctest bubble.
func newBackend(opts ...Option) (*Server, error) {
	cfg := config{
		maxStreams: DefaultMaxConcurrentStreams,
		now:        time.Now,
		issuer:     DefaultOIDCIssuer,
		log:        slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	var aeURL *url.URL
	if cfg.appEngine != "" {
		u, err := url.Parse(cfg.appEngine)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &OptionError{"WithAppEngineURL", fmt.Errorf("cloudtaskstest: the App Engine base URL %s is not an absolute http or https URL", echo(redactedURL(cfg.appEngine)))}
		}
		aeURL = u
	}
	for _, qs := range cfg.quotas {
		if err := checkQuota("WithCreateQuota", qs.queue, qs.q); err != nil {
			return nil, &OptionError{"WithCreateQuota", err}
		}
	}
	var key *rsa.PrivateKey
	if cfg.keyFile != "" {
		k, err := loadSigningKey(cfg.keyFile)
		if err != nil {
			return nil, &OptionError{"WithOIDCKeyFile", err}
		}
		key = k
	}
	s := &Server{
		cfg:    cfg,
		fault:  newFaults(),
		counts: &counters{},
		auth:   newAuthority(cfg.issuer, cfg.now, key),
		served: make(chan struct{}),
	}
	s.store = newStore(storeConfig{now: cfg.now, log: cfg.log, hardReset: cfg.hardReset, changed: s.changed})
	for _, qs := range cfg.quotas {
		s.store.setQuota(qs.queue, qs.q)
	}
	if !cfg.noDispatch {
		s.disp = newDispatcher(s.store, s.counts, dispatchConfig{
			transport: cfg.transport,
			appEngine: aeURL,
			anyHost:   cfg.anyHost,
			log:       cfg.log,
			auth:      s.auth,
			changed:   s.idle.signal,
		})
	}
	return s, nil
}

// changed is called after anything that can start work or end it: a call
// answered, a task stored or removed, a queue paused, resumed or updated. It
// wakes the dispatcher and every Wait.
func (s *Server) changed() {
	if s.disp != nil {
		s.disp.poke()
	}
	s.idle.signal()
}

// Wait blocks until the server has nothing left to do now: no call of any
// method is being served (CreateTask included), no dispatch attempt is in
// flight, and no task that the server would send is due in a running
// queue. Tasks scheduled for later (a failed task waiting for its retry
// too), tasks of paused queues, App Engine tasks without a base URL
// (WithAppEngineURL) and, with WithoutDispatch, every stored task do not
// keep it waiting. After Close it returns at once.
//
// It returns nil when the server is idle, or ctx.Err() if ctx ends first.
// Use it in place of polling Stats:
//
//	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
//	defer cancel()
//	if err := srv.Wait(ctx); err != nil { t.Fatal(err) }
func (s *Server) Wait(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.counts.callsInFlight() == 0 && (s.disp == nil || !s.disp.busy()) })
}

// WaitUntil blocks until cond holds for the server's Stats. It checks cond
// at once and again after every change the counters can show (a call
// arriving or answered, a dispatch attempt starting or ending), never by
// polling. It returns nil once cond is true, or ctx.Err() if ctx ends
// first. Use it for what Wait does not cover, such as "n creates are being
// served now":
//
//	err := srv.WaitUntil(ctx, func(st cloudtaskstest.Stats) bool { return st.CreateTaskInFlight == n })
//
// cond runs on the caller's goroutine and must not call the Server.
func (s *Server) WaitUntil(ctx context.Context, cond func(Stats) bool) error {
	return s.waitFor(ctx, func() bool { return cond(s.counts.snapshot()) })
}

// waitFor returns when done reports true, checking it after every signal of
// s.idle, or ctx.Err().
func (s *Server) waitFor(ctx context.Context, done func() bool) error {
	for {
		woken := s.idle.next() // taken before the check, so no change is missed
		if done() {
			return nil
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// broadcast wakes every goroutine waiting on the channel next returned.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) signal() {
	b.mu.Lock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.mu.Unlock()
}

// Close stops the server: open calls and dispatch attempts in flight are
// cancelled, the dispatcher stops, and the port is released. Tasks keep
// their state (a cancelled attempt counts as failed). It is safe to call
// more than once; it always returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.startMu.Lock()
		s.closed = true
		gsrv := s.gsrv
		s.startMu.Unlock()
		if gsrv != nil {
			gsrv.Stop()
			<-s.served
		}
		if s.disp != nil {
			s.disp.close()
		}
		s.idle.signal()
	})
	return nil
}

// OIDCPublicKey returns the public half of the key that signs the OIDC
// tokens (RS256) of this server's dispatches: the key of WithOIDCKeyFile, or
// else one created on first use that lives as long as the Server.
func (s *Server) OIDCPublicKey() *rsa.PublicKey {
	key, err := s.auth.signer()
	if err != nil {
		panic(fmt.Sprintf("cloudtaskstest: create OIDC signing key: %v", err))
	}
	return &key.PublicKey
}

// VerifyOIDCToken checks an OIDC token from a dispatched request's
// Authorization header (with or without the "Bearer " prefix): an RS256 JWT
// signed by this server, with this server's issuer, not expired by the
// server's clock. It returns the token's claims; the caller checks Audience
// and Email against what it expects.
func (s *Server) VerifyOIDCToken(token string) (*OIDCClaims, error) {
	return s.auth.verifyOIDC(token)
}

// VerifyOAuthToken checks an OAuth access token from a dispatched request's
// Authorization header (with or without the "Bearer " prefix). The server's
// OAuth tokens are opaque strings beginning with "ya29.cloudtaskstest."; only
// the server that issued one can verify it. It returns the service account
// and scope the token stands for.
func (s *Server) VerifyOAuthToken(token string) (*OAuthGrant, error) {
	return s.auth.verifyOAuth(token)
}

// OpenIDHandler serves this server's OpenID discovery document at
// <issuer path>/.well-known/openid-configuration, its signing key as a JWKS
// at <issuer path>/jwks, and the same key as a self-signed PEM certificate
// keyed by key id at <issuer path>/certs (the form of Google's v1 certs
// endpoint, which some auth libraries fetch), for handlers that verify
// tokens the way they would against Google. Serve it on the host and port of
// the issuer URL (WithOIDCIssuer); a standard OIDC client such as
// github.com/coreos/go-oidc then verifies the tokens through discovery.
func (s *Server) OpenIDHandler() http.Handler {
	return s.auth.handler()
}

// ClientOptions returns the options that point a Cloud Tasks client
// (cloudtasks.NewClient from cloud.google.com/go/cloudtasks/apiv2 or
// apiv2beta3) at this server: its endpoint, a plaintext channel and no
// credentials.
func (s *Server) ClientOptions() []option.ClientOption {
	return gcpconn.EmulatorOptions(s.Addr)
}

// CreateQueue creates a RUNNING queue at path
// ("projects/P/locations/L/queues/Q") with the service's default rate limits
// and retry configuration, as CreateQueue over the API would. It fails with
// the same status errors (INVALID_ARGUMENT for a bad path, ALREADY_EXISTS).
func (s *Server) CreateQueue(path string) (*cloudtaskspb.Queue, error) {
	return s.store.createQueue(&cloudtaskspb.Queue{Name: path})
}

// PauseQueue pauses the queue at path: it keeps accepting tasks but dispatches
// none until ResumeQueue. It answers NOT_FOUND for an unknown queue.
func (s *Server) PauseQueue(path string) error {
	_, err := s.store.setQueueState(path, cloudtaskspb.Queue_PAUSED)
	return err
}

// ResumeQueue sets the queue at path RUNNING again. It answers NOT_FOUND for
// an unknown queue.
func (s *Server) ResumeQueue(path string) error {
	_, err := s.store.setQueueState(path, cloudtaskspb.Queue_RUNNING)
	return err
}

// DisableQueue sets the queue at path DISABLED, the state a queue takes in
// the service when a queue.yaml upload leaves it out (no API call can
// disable a queue). Like a paused queue it keeps accepting tasks and
// dispatches none; ResumeQueue sets it RUNNING again. It answers NOT_FOUND
// for an unknown queue.
func (s *Server) DisableQueue(path string) error {
	_, err := s.store.setQueueState(path, cloudtaskspb.Queue_DISABLED)
	return err
}

// Tasks returns copies of the tasks stored now in the queue at queuePath, in
// FULL view (bodies and headers included), in creation order. It returns nil
// for an unknown queue. Dispatched tasks that succeeded, deleted and purged
// tasks are not included.
func (s *Server) Tasks(queuePath string) []*cloudtaskspb.Task {
	return s.store.snapshotTasks(queuePath)
}

// Task returns a FULL-view copy of the stored task with the given full name
// ("projects/P/locations/L/queues/Q/tasks/T"), or false when no such task is
// stored now.
func (s *Server) Task(name string) (*cloudtaskspb.Task, bool) {
	return s.store.snapshotTask(name)
}

// SetTombstoneTTL sets the name retention of the queue at queuePath: how long
// the name of a deleted, purged or completed task stays taken (a CreateTask
// with it answers ALREADY_EXISTS), and the tombstone_ttl that v2beta3 GetQueue
// reports. d <= 0 clears the setting: v2beta3 GetQueue then reports no
// tombstone_ttl (which clients read as the service default) and names are
// retained for DefaultTombstoneTTL. The setting applies to names released
// after the call; it may be made before the queue exists.
func (s *Server) SetTombstoneTTL(queuePath string, d time.Duration) {
	s.store.setTombstoneTTL(queuePath, d)
}
