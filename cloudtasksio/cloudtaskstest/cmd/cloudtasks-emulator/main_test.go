package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

const queue = "projects/dev/locations/here/queues/orders"

// logLines collects the emulator's log and reports when a line matches.
type logLines struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func newLogLines(r io.Reader) *logLines {
	l := &logLines{added: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			l.mu.Unlock()
			select {
			case l.added <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// wait returns the first submatch of re in the log, waiting up to 30s.
func (l *logLines) wait(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if m := re.FindStringSubmatch(line); m != nil {
				l.mu.Unlock()
				if len(m) > 1 {
					return m[1]
				}
				return m[0]
			}
		}
		all := strings.Join(l.lines, "\n")
		l.mu.Unlock()
		select {
		case <-l.added:
		case <-deadline:
			t.Fatalf("no log line matching %s in:\n%s", re, all)
		}
	}
}

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

func dial(t *testing.T, addr string) *cloudtasks.Client {
	t.Helper()
	c, err := cloudtasks.NewClient(context.Background(), option.WithEndpoint(addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startRun runs the emulator in-process and returns its address and log.
func startRun(t *testing.T, env map[string]string, args ...string) (string, *logLines) {
	t.Helper()
	pr, pw := io.Pipe()
	logs := newLogLines(pr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, func(k string) string { return env[k] }, pw, pw) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		_ = pw.Close()
	})
	return logs.wait(t, listening), logs
}

// recordingTarget is a loopback handler that forwards each request.
func recordingTarget(t *testing.T) (*httptest.Server, <-chan *http.Request) {
	t.Helper()
	ch := make(chan *http.Request, 10)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		ch <- r
	}))
	t.Cleanup(ts.Close)
	return ts, ch
}

func receive(t *testing.T, ch <-chan *http.Request) *http.Request {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no dispatch arrived")
		return nil
	}
}

func TestEmulatorServesInitialQueuesAndDispatches(t *testing.T) {
	addr, logs := startRun(t, nil, "-port", "0", "-queue", queue, "-initial-queue", queue+"-2")
	client := dial(t, addr)
	ts, got := recordingTarget(t)

	for _, q := range []string{queue, queue + "-2"} {
		got, err := client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: q})
		require.NoError(t, err)
		assert.Equal(t, cloudtaskspb.Queue_RUNNING, got.GetState())
	}
	logs.wait(t, regexp.MustCompile(`msg="queue created" queue=`+regexp.QuoteMeta(queue)+` `))

	_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: ts.URL + "/hook", Body: []byte("hello"),
		}},
	}})
	require.NoError(t, err)
	r := receive(t, got)
	body, _ := io.ReadAll(r.Body)
	assert.Equal(t, "hello", string(body))
	assert.Equal(t, "orders", r.Header.Get("X-CloudTasks-QueueName"))
	logs.wait(t, regexp.MustCompile(`msg=dispatch queue=orders .*result=200 outcome=done`))
}

func TestEmulatorCreateQuotaFlags(t *testing.T) {
	other := queue + "-2"
	addr, _ := startRun(t, nil, "-port", "0", "-queue", queue, "-queue", other,
		"-create-quota", "0.001/2", "-create-quota", other+"=0.001/1", "-create-quota-retry-info")
	client := dial(t, addr)
	create := func(q string) error {
		_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: q, Task: &cloudtaskspb.Task{
			MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://127.0.0.1:1/hook"}},
		}})
		return err
	}
	// At 0.001 creates per second no token comes back during the test.
	require.NoError(t, create(queue))
	require.NoError(t, create(queue))
	err := create(queue)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "every queue: burst 2, error %v", err)
	var ae *apierror.APIError
	require.ErrorAs(t, err, &ae)
	assert.NotNil(t, ae.Details().RetryInfo, "-create-quota-retry-info")

	require.NoError(t, create(other))
	require.Equal(t, codes.ResourceExhausted, status.Code(create(other)), "the queue's own quota: burst 1")
}

// -create-refuse refuses a share of the creates at random and -create-refuse-burst the N in a
// row from its delay on; both answer RESOURCE_EXHAUSTED and store nothing.
func TestEmulatorCreateRefuseFlags(t *testing.T) {
	createAll := func(addr string, n int) (refused []bool) {
		client := dial(t, addr)
		for range n {
			_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
				MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://127.0.0.1:1/hook"}},
			}})
			if err != nil {
				require.Equal(t, codes.ResourceExhausted, status.Code(err), "error %v", err)
			}
			refused = append(refused, err != nil)
		}
		return refused
	}
	count := func(bs []bool) (n int) {
		for _, b := range bs {
			if b {
				n++
			}
		}
		return n
	}
	const calls = 300
	addr, _ := startRun(t, nil, "-port", "0", "-queue", queue, "-no-dispatch", "-create-refuse-burst", "3", "-create-refuse", "25%")
	got := createAll(addr, calls)
	assert.Equal(t, []bool{true, true, true}, got[:3], "the burst: the first three")
	assert.InDelta(t, 0.25*(calls-3), count(got[3:]), 40, "then a quarter at random")

	addr, _ = startRun(t, nil, "-port", "0", "-queue", queue, "-no-dispatch", "-create-refuse", "0.1")
	assert.InDelta(t, 0.1*calls, count(createAll(addr, calls)), 20, "a share as a fraction")

	addr, _ = startRun(t, nil, "-port", "0", "-queue", queue, "-no-dispatch", "-create-refuse-burst", "5@1h", "-create-refuse", "0")
	assert.Zero(t, count(createAll(addr, 20)), "a burst an hour after the first create, and a share of zero, refuse nothing now")
}

func TestEmulatorCreateLatencyAndNoDispatchFlags(t *testing.T) {
	ts, got := recordingTarget(t)
	const latency = 150 * time.Millisecond
	addr, logs := startRun(t, nil, "-port", "0", "-queue", queue, "-create-latency", latency.String(), "-no-dispatch")
	client := dial(t, addr)
	began := time.Now()
	task, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: ts.URL + "/hook"}},
	}})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(began), latency, "-create-latency delays the answer")
	// A running queue dispatches a due task at once; with -no-dispatch the task stays
	// stored and undelivered.
	select {
	case r := <-got:
		t.Fatalf("-no-dispatch: the target was called: %s", r.URL)
	case <-time.After(300 * time.Millisecond):
	}
	stored, err := client.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: task.GetName()})
	require.NoError(t, err)
	assert.Zero(t, stored.GetDispatchCount())
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range logs.lines {
		assert.NotContains(t, l, "msg=dispatch")
	}
}

func TestEmulatorSendsAppEngineTasksToTheEnvironmentHost(t *testing.T) {
	ts, got := recordingTarget(t)
	addr, _ := startRun(t, map[string]string{"APP_ENGINE_EMULATOR_HOST": strings.TrimPrefix(ts.URL, "http://")}, "-port", "0", "-queue", queue)
	client := dial(t, addr)
	_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
			RelativeUri: "/worker/run", AppEngineRouting: &cloudtaskspb.AppEngineRouting{Service: "worker"},
		}},
	}})
	require.NoError(t, err)
	r := receive(t, got)
	assert.Equal(t, "/worker/run", r.URL.Path)
	assert.Equal(t, "worker."+strings.TrimPrefix(ts.URL, "http://"), r.Host)
	assert.Equal(t, "orders", r.Header.Get("X-AppEngine-QueueName"))
}

func TestEmulatorServesOpenIDDiscoveryOnTheIssuerPort(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuer := "http://" + lis.Addr().String()
	require.NoError(t, lis.Close())
	addr, _ := startRun(t, nil, "-port", "0", "-queue", queue, "-openid-issuer", issuer)
	client := dial(t, addr)
	ts, got := recordingTarget(t)

	resp, err := http.Get(issuer + "/.well-known/openid-configuration")
	require.NoError(t, err)
	var disco map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&disco))
	_ = resp.Body.Close()
	assert.Equal(t, issuer, disco["issuer"])

	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: ts.URL, AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "sa@dev.iam.gserviceaccount.com"}},
		}},
	}})
	require.NoError(t, err)
	authz := receive(t, got).Header.Get("Authorization")
	require.True(t, strings.HasPrefix(authz, "Bearer "))
	parts := strings.Split(strings.TrimPrefix(authz, "Bearer "), ".")
	require.Len(t, parts, 3)
	assert.Contains(t, decodeSegment(t, parts[1]), `"iss":"`+issuer+`"`)
}

// An issuer path is served as it is: characters that mean something in a
// ServeMux pattern ({, }, spaces) are plain path characters here.
func TestEmulatorServesDiscoveryUnderAnIssuerPathWithPatternCharacters(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + lis.Addr().String()
	require.NoError(t, lis.Close())
	issuer := base + "/{tenant}/x{"
	startRun(t, nil, "-port", "0", "-openid-issuer", issuer)

	var disco map[string]any
	getJSON(t, base+"/%7Btenant%7D/x%7B/.well-known/openid-configuration", &disco)
	assert.Equal(t, issuer, disco["issuer"])
	var keys struct{ Keys []map[string]any }
	getJSON(t, disco["jwks_uri"].(string), &keys)
	assert.Len(t, keys.Keys, 1)

	resp, err := http.Get(base + "/other/x%7B/.well-known/openid-configuration")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "{tenant} is not a wildcard")
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// freeIssuer returns an http issuer URL on a loopback port that was free a
// moment ago.
func freeIssuer(t *testing.T, path string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	return "http://" + lis.Addr().String() + path
}

// oidcTask creates an HTTP task with an OIDC token for audience on the
// emulator at addr and returns the bearer token its dispatch carried.
func oidcTask(t *testing.T, addr, audience string) string {
	t.Helper()
	client := dial(t, addr)
	ts, got := recordingTarget(t)
	_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: ts.URL, AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
				ServiceAccountEmail: "sa@dev.iam.gserviceaccount.com", Audience: audience}},
		}},
	}})
	require.NoError(t, err)
	authz := receive(t, got).Header.Get("Authorization")
	require.True(t, strings.HasPrefix(authz, "Bearer "), "Authorization %q", authz)
	return strings.TrimPrefix(authz, "Bearer ")
}

func TestEmulatorTokensVerifyWithGoOIDCAgainstItsDiscovery(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "oidc.key")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	issuer := freeIssuer(t, "")
	addr, _ := startRun(t, nil, "-port", "0", "-queue", queue, "-openid-issuer", issuer, "-oidc-key-file", keyFile)

	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, issuer)
	require.NoError(t, err)
	idt, err := provider.Verifier(&oidc.Config{ClientID: "https://handler.example.com"}).Verify(ctx, oidcTask(t, addr, "https://handler.example.com"))
	require.NoError(t, err)
	var claims struct{ Email string }
	require.NoError(t, idt.Claims(&claims))
	assert.Equal(t, "sa@dev.iam.gserviceaccount.com", claims.Email)

	var jwks struct{ Keys []struct{ N string } }
	getJSON(t, issuer+"/jwks", &jwks)
	require.Len(t, jwks.Keys, 1)
	assert.Equal(t, base64.RawURLEncoding.EncodeToString(key.PublicKey.N.Bytes()), jwks.Keys[0].N, "the JWKS publishes the pinned key")
	var certs map[string]string
	getJSON(t, issuer+"/certs", &certs)
	assert.Len(t, certs, 1, "the community emulator's /certs endpoint is served too")
}

func TestEmulatorDefaultIssuerIsTheCommunityEmulators(t *testing.T) {
	addr, _ := startRun(t, nil, "-port", "0", "-queue", queue)
	parts := strings.Split(oidcTask(t, addr, ""), ".")
	require.Len(t, parts, 3)
	assert.Contains(t, decodeSegment(t, parts[1]), `"iss":"http://cloud-tasks-emulator"`)
}

func TestEmulatorReadsTheCommunityEnvironmentVariables(t *testing.T) {
	issuer := freeIssuer(t, "")
	env := map[string]string{
		"HOST": "127.0.0.1", "PORT": "1", // -port 0 below wins over PORT
		"INITIAL_QUEUES":      queue + "," + queue + "-2",
		"OPENID_ISSUER":       issuer,
		"HARD_RESET_ON_PURGE": "true",
	}
	addr, logs := startRun(t, env, "-port", "0", "-queue", queue+"-3")
	client := dial(t, addr)
	for _, q := range []string{queue, queue + "-2", queue + "-3"} {
		_, err := client.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: q})
		require.NoError(t, err, q)
	}
	logs.wait(t, regexp.MustCompile(`msg="serving OpenID discovery" issuer=`+regexp.QuoteMeta(issuer)))
	var disco map[string]any
	getJSON(t, issuer+"/.well-known/openid-configuration", &disco)
	assert.Equal(t, issuer, disco["issuer"])

	// HARD_RESET_ON_PURGE: a purged name is free again at once.
	task := &cloudtaskspb.Task{Name: queue + "/tasks/again", MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://127.0.0.1:1/"}}}
	require.NoError(t, pauseAndCreate(client, task))
	_, err := client.PurgeQueue(context.Background(), &cloudtaskspb.PurgeQueueRequest{Name: queue})
	require.NoError(t, err)
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: task})
	require.NoError(t, err)
}

func pauseAndCreate(client *cloudtasks.Client, task *cloudtaskspb.Task) error {
	if _, err := client.PauseQueue(context.Background(), &cloudtaskspb.PauseQueueRequest{Name: queue}); err != nil {
		return err
	}
	_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: task})
	return err
}

func TestEmulatorPrintsItsAddressWhateverTheLogLevel(t *testing.T) {
	pr, pw := io.Pipe()
	lines := newLogLines(pr)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-port", "0", "-queue", queue, "-log-level", "error"}, func(string) string { return "" }, pw, &logs)
	}()
	addr := lines.wait(t, regexp.MustCompile(`^cloudtasks-emulator listening on (\S+)$`))
	_, err := dial(t, addr).GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queue})
	require.NoError(t, err)
	cancel()
	require.NoError(t, <-done)
	_ = pw.Close()
	assert.Empty(t, logs.String(), "nothing logged below the error level")
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// onFreePort returns args with "-port 0" in front unless args or env set the port: a value
// wrongly accepted must not take the default port 8123, which a user's emulator may hold.
func onFreePort(args []string, env map[string]string) []string {
	if _, ok := env["PORT"]; ok {
		return args
	}
	for _, a := range args {
		if a == "-port" || strings.HasPrefix(a, "-port=") || a == "--port" || strings.HasPrefix(a, "--port=") {
			return args
		}
	}
	return append([]string{"-port", "0"}, args...)
}

// withoutEmulatorVariables drops the variables the emulator reads from env,
// so that a PORT or HOST set where the tests run does not steer the binary.
func withoutEmulatorVariables(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := name == "APP_ENGINE_EMULATOR_HOST"
		for _, ef := range envFlags {
			drop = drop || name == ef.env
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

func decodeSegment(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err)
	return string(b)
}

func TestEmulatorRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string // the error or the usage output names the flag or argument at fault
		env  map[string]string
	}{
		"bad PORT":          {nil, "PORT", map[string]string{"PORT": "eighty"}},
		"bad HARD_RESET":    {nil, "HARD_RESET_ON_PURGE", map[string]string{"HARD_RESET_ON_PURGE": "sometimes"}},
		"bad key file":      {[]string{"-port", "0", "-oidc-key-file", "/nonexistent/oidc.key"}, "-oidc-key-file", nil},
		"unknown flag":      {[]string{"-nope"}, "-nope", nil},
		"bad queue":         {[]string{"-port", "0", "-queue", "projects/p/queues/q"}, "-queue", nil},
		"bad log level":     {[]string{"-log-level", "loud"}, "-log-level", nil},
		"bad issuer":        {[]string{"-openid-issuer", "localhost"}, "-openid-issuer", nil},
		"issuer query":      {[]string{"-port", "0", "-openid-issuer", "http://127.0.0.1:0/?tenant=a"}, "-openid-issuer", nil},
		"issuer fragment":   {[]string{"-port", "0", "-openid-issuer", "http://127.0.0.1:0/#a"}, "-openid-issuer", nil},
		"issuer port 0":     {[]string{"-port", "0", "-openid-issuer", "http://127.0.0.1:0"}, "-openid-issuer", nil},
		"issuer user info":  {[]string{"-port", "0", "-openid-issuer", "http://u:p@127.0.0.1:8980"}, "-openid-issuer", nil},
		"issuer bad escape": {[]string{"-port", "0", "-openid-issuer", "http://127.0.0.1:0/%zz"}, "-openid-issuer", nil},
		"port too large":    {[]string{"-port", "70000"}, "-port", nil},
		"stray argument":    {[]string{"-port", "0", "extra"}, `"extra"`, nil},
		"quota rate":        {[]string{"-port", "0", "-create-quota", "fast"}, "-create-quota", nil},
		"quota zero rate":   {[]string{"-port", "0", "-create-quota", "0"}, "-create-quota", nil},
		"quota burst":       {[]string{"-port", "0", "-create-quota", "10/0"}, "-create-quota", nil},
		"quota queue":       {[]string{"-port", "0", "-create-quota", "projects/p/queues/q=10"}, "-create-quota", nil},
		"negative latency":  {[]string{"-port", "0", "-create-latency", "-1ms"}, "-create-latency", nil},
		"latency too long":  {[]string{"-port", "0", "-create-latency", "1h"}, "-create-latency", nil},
		"latency no unit":   {[]string{"-port", "0", "-create-latency", "30"}, "-create-latency", nil},
		"retry info alone":  {[]string{"-port", "0", "-create-quota-retry-info"}, "-create-quota-retry-info", nil},
		"refuse word":       {[]string{"-port", "0", "-create-refuse", "some"}, "-create-refuse", nil},
		"refuse above one":  {[]string{"-port", "0", "-create-refuse", "1.5"}, "-create-refuse", nil},
		"refuse percent":    {[]string{"-port", "0", "-create-refuse", "150%"}, "-create-refuse", nil},
		"refuse negative":   {[]string{"-port", "0", "-create-refuse", "-0.1"}, "-create-refuse", nil},
		"refuse NaN":        {[]string{"-port", "0", "-create-refuse", "NaN"}, "-create-refuse", nil},
		"burst zero":        {[]string{"-port", "0", "-create-refuse-burst", "0"}, "-create-refuse-burst", nil},
		"burst word":        {[]string{"-port", "0", "-create-refuse-burst", "many"}, "-create-refuse-burst", nil},
		"burst delay":       {[]string{"-port", "0", "-create-refuse-burst", "40@soon"}, "-create-refuse-burst", nil},
		"burst negative":    {[]string{"-port", "0", "-create-refuse-burst", "40@-1s"}, "-create-refuse-burst", nil},
		"burst too late":    {[]string{"-port", "0", "-create-refuse-burst", "40@25h"}, "-create-refuse-burst", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			// Cancelled: a flag wrongly accepted returns nil at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := run(ctx, onFreePort(tc.args, tc.env), func(k string) string { return tc.env[k] }, &out, &out)
			require.Error(t, err)
			assert.ErrorIs(t, err, errUsage, "a bad flag is a usage error (exit status 2)")
			assert.Contains(t, err.Error()+"\n"+out.String(), tc.want)
			assert.NotContains(t, err.Error()+"\n"+out.String(), "u:p@", "a password in a flag is never echoed")
		})
	}
}

// TestBuiltEmulatorBinary builds the command and runs it as a separate
// process, the way a user of another language would.
func TestBuiltEmulatorBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	bin := filepath.Join(t.TempDir(), "cloudtasks-emulator")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", "0", "-queue", queue)
	cmd.Env = withoutEmulatorVariables(os.Environ())
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-exited:
			assert.NoError(t, err, "exits cleanly on SIGINT")
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("did not stop on SIGINT")
		}
	}()
	logs := newLogLines(stderr)
	addr := logs.wait(t, listening)

	client := dial(t, addr)
	ts, got := recordingTarget(t)
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
		Name: queue + "/tasks/first",
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: ts.URL + "/orders", HttpMethod: cloudtaskspb.HttpMethod_PUT, Body: []byte(`{"id":1}`),
		}},
	}})
	require.NoError(t, err)
	r := receive(t, got)
	assert.Equal(t, "PUT", r.Method)
	assert.Equal(t, "first", r.Header.Get("X-CloudTasks-TaskName"))
	logs.wait(t, regexp.MustCompile(`msg=dispatch queue=orders task=first`))

	t.Run("SIGTERM", func(t *testing.T) {
		// As a container runtime stops it: the address on stdout, a clean
		// exit (status 0) on SIGTERM, and the port free afterwards.
		cmd := exec.Command(bin, "-port", "0", "-queue", queue)
		cmd.Env = withoutEmulatorVariables(os.Environ())
		// Pipes of our own, not StdoutPipe: cmd.Wait then returns only once all
		// the output has been read, so the last log line cannot be lost.
		outR, outW := io.Pipe()
		errR, errW := io.Pipe()
		cmd.Stdout, cmd.Stderr = outW, errW
		require.NoError(t, cmd.Start())
		logs := newLogLines(errR)
		addr := newLogLines(outR).wait(t, regexp.MustCompile(`^cloudtasks-emulator listening on (\S+)$`))
		_, err := dial(t, addr).GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queue})
		require.NoError(t, err)

		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			require.NoError(t, err, "exit status 0 on SIGTERM")
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("did not stop on SIGTERM")
		}
		_ = outW.Close()
		_ = errW.Close()
		logs.wait(t, regexp.MustCompile(`msg="shutting down"`))
		lis, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the port is released")
		_ = lis.Close()
	})
}

// TestEmulatorServesGRPCReflection: grpcurl and other reflection clients list and describe the
// Cloud Tasks services without the proto files.
func TestEmulatorServesGRPCReflection(t *testing.T) {
	addr, _ := startRun(t, nil, "-port", "0")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	require.NoError(t, err)
	ask := func(req *reflectionpb.ServerReflectionRequest) *reflectionpb.ServerReflectionResponse {
		t.Helper()
		require.NoError(t, stream.Send(req))
		resp, err := stream.Recv()
		require.NoError(t, err)
		return resp
	}

	var services []string
	for _, s := range ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}).GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	assert.Contains(t, services, "google.cloud.tasks.v2.CloudTasks")
	assert.Contains(t, services, "google.cloud.tasks.v2beta3.CloudTasks")

	files := ask(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "google.cloud.tasks.v2.CloudTasks.CreateTask"}}).GetFileDescriptorResponse().GetFileDescriptorProto()
	require.NotEmpty(t, files, "the descriptor of the method's file, as grpcurl describe reads it")
	var names []string
	for _, raw := range files {
		fd := &descriptorpb.FileDescriptorProto{}
		require.NoError(t, proto.Unmarshal(raw, fd))
		names = append(names, fd.GetName())
	}
	assert.Contains(t, names, "google/cloud/tasks/v2/cloudtasks.proto")
}

// TestEmulatorErrorsNameWhereTheValueCameFrom: a bad value is reported under the environment
// variable or flag that set it, says what is accepted, repeats at most a short cut of the
// value, and shows no gRPC status text.
func TestEmulatorErrorsNameWhereTheValueCameFrom(t *testing.T) {
	huge := strings.Repeat("q", 100_000)
	cases := map[string]struct {
		args []string
		env  map[string]string
		want []string // all in the message
		not  []string // none in the message
	}{
		"INITIAL_QUEUES": {nil, map[string]string{"INITIAL_QUEUES": "projects/p/queues/q"},
			[]string{`INITIAL_QUEUES "projects/p/queues/q"`, "want a queue path projects/PROJECT/locations/LOCATION/queues/QUEUE"}, []string{"-queue"}},
		"INITIAL_QUEUES item": {nil, map[string]string{"INITIAL_QUEUES": queue + ",projects/p/locations/l/queues/bad_id"},
			[]string{"INITIAL_QUEUES (item 2)", "bad_id", "letters, digits or hyphens"}, []string{"-queue"}},
		"-queue":                 {[]string{"-queue", "projects/p/queues/q"}, nil, []string{`-queue "projects/p/queues/q"`, "want a queue path"}, []string{"INITIAL_QUEUES"}},
		"queue given twice":      {[]string{"-queue", queue}, map[string]string{"INITIAL_QUEUES": queue}, []string{"-queue", "given twice"}, nil},
		"PORT":                   {nil, map[string]string{"PORT": "abc"}, []string{`PORT "abc"`, "want a port number from 0 to 65535"}, []string{"-port", "parse error"}},
		"-port":                  {[]string{"-port", "abc"}, nil, []string{`-port "abc"`, "want a port number from 0 to 65535"}, []string{"parse error"}},
		"PORT range":             {nil, map[string]string{"PORT": "70000"}, []string{`PORT "70000"`, "0 to 65535"}, nil},
		"HARD_RESET_ON_PURGE":    {nil, map[string]string{"HARD_RESET_ON_PURGE": "sometimes"}, []string{`HARD_RESET_ON_PURGE "sometimes"`, "want true or false"}, []string{"parse error"}},
		"-hard-reset":            {[]string{"-hard-reset-on-purge-queue=maybe"}, nil, []string{`-hard-reset-on-purge-queue "maybe"`, "want true or false"}, nil},
		"OIDC_KEY_FILE":          {nil, map[string]string{"OIDC_KEY_FILE": "/nonexistent/oidc.key"}, []string{"OIDC_KEY_FILE"}, []string{"-oidc-key-file"}},
		"OIDC_KEY_FILE NUL":      {nil, map[string]string{"OIDC_KEY_FILE": "/tmp/a\x00b"}, []string{"OIDC_KEY_FILE", "NUL"}, nil},
		"OPENID_ISSUER":          {nil, map[string]string{"OPENID_ISSUER": "localhost"}, []string{`OPENID_ISSUER "localhost"`, "want an http(s) URL"}, []string{"-openid-issuer"}},
		"OPENID_ISSUER password": {nil, map[string]string{"OPENID_ISSUER": "http://u:secret@127.0.0.1:8980"}, []string{"OPENID_ISSUER", "user info"}, []string{"secret"}},
		"HOST":                   {nil, map[string]string{"HOST": "127.0.0.1/8"}, []string{`HOST "127.0.0.1/8"`, "want a host name or IP address"}, nil},
		"APP_ENGINE_EMULATOR_HOST": {[]string{"-port", "0"}, map[string]string{"APP_ENGINE_EMULATOR_HOST": "ftp://u:secret@x"},
			[]string{"APP_ENGINE_EMULATOR_HOST", "want host:port"}, []string{"secret"}},
		"huge -queue":          {[]string{"-queue", huge}, nil, []string{"-queue", "[truncated]"}, nil},
		"huge INITIAL":         {nil, map[string]string{"INITIAL_QUEUES": huge}, []string{"INITIAL_QUEUES", "[truncated]"}, nil},
		"huge -create-quota":   {[]string{"-create-quota", huge}, nil, []string{"-create-quota", "[truncated]"}, nil},
		"huge quota queue":     {[]string{"-create-quota", huge + "=10"}, nil, []string{"-create-quota"}, nil},
		"huge unknown flag":    {[]string{"-" + huge}, nil, []string{"flag provided but not defined", "[truncated]"}, nil},
		"huge PORT":            {nil, map[string]string{"PORT": huge}, []string{"PORT", "[truncated]"}, nil},
		"huge HOST":            {nil, map[string]string{"HOST": huge}, []string{"HOST", "[truncated]"}, nil},
		"huge -create-latency": {[]string{"-create-latency", huge}, nil, []string{"-create-latency", "[truncated]", "not a value of the flag's type"}, []string{"invalid value"}},
		"-loopback-only maybe": {[]string{"-loopback-only=maybe"}, nil, []string{`-loopback-only "maybe"`}, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a value wrongly accepted returns nil at once
			err := run(ctx, onFreePort(tc.args, tc.env), func(k string) string { return tc.env[k] }, &out, &out)
			require.Error(t, err)
			assert.ErrorIs(t, err, errUsage, "exit status 2")
			msg := err.Error()
			for _, w := range tc.want {
				assert.Contains(t, msg, w)
			}
			for _, n := range append(tc.not, "rpc error", "code = ", "desc = ") {
				assert.NotContains(t, msg, n)
			}
			assert.Less(t, len(msg), 1024, "the error repeats a cut of the value, not all of it")
			assert.Less(t, out.Len(), 8<<10, "nor does anything else printed (at most the usage)")
		})
	}
}

// TestABadIssuerIsShownWithoutItsQueryFragmentOrUserInfo: an -openid-issuer value may carry
// a credential in its query, fragment or user info (a URL pasted with ?token=...). Whatever is
// wrong with the value, the error names the flag or variable and repeats the rest of the URL,
// never those parts.
func TestABadIssuerIsShownWithoutItsQueryFragmentOrUserInfo(t *testing.T) {
	cases := map[string]struct {
		issuer string
		want   []string // all in the message
	}{
		"query":                    {"http://127.0.0.1:8980/?token=s3cr3t", []string{`"http://127.0.0.1:8980/?xxxxx"`, "a query is not allowed"}},
		"query and fragment":       {"http://127.0.0.1:8980/a?token=s3cr3t#s3cr3t", []string{`"http://127.0.0.1:8980/a?xxxxx"`, "a query is not allowed"}},
		"fragment":                 {"http://127.0.0.1:8980/#token=s3cr3t", []string{`"http://127.0.0.1:8980/#xxxxx"`, "a fragment is not allowed"}},
		"query and bad scheme":     {"ftp://127.0.0.1:8980/?token=s3cr3t", []string{`"ftp://127.0.0.1:8980/?xxxxx"`, "the scheme is not http or https"}},
		"query and bad escape":     {"http://127.0.0.1:8980/%zz?token=s3cr3t", []string{`"http://127.0.0.1:8980/%zz?xxxxx"`, "not a URL"}},
		"user info":                {"http://u:s3cr3t@127.0.0.1:8980", []string{`"http://xxxxx@127.0.0.1:8980"`, "user info is not allowed"}},
		"user info and bad escape": {"http://u:s3cr3t@127.0.0.1:8980/%zz", []string{`"http://xxxxx@127.0.0.1:8980/%zz"`, "not a URL"}},
		"user info with a slash":   {"http://u:s3/cr3t@127.0.0.1:8980/", []string{`"http://xxxxx@127.0.0.1:8980/"`}},
		"no scheme":                {"u:s3cr3t@127.0.0.1:8980?token=s3cr3t", []string{`"xxxxx@127.0.0.1:8980?xxxxx"`}},
	}
	for name, tc := range cases {
		for _, from := range []string{"-openid-issuer", "OPENID_ISSUER"} {
			t.Run(name+" "+from, func(t *testing.T) {
				args := []string{"-port", "0"}
				env := map[string]string{}
				if from == "OPENID_ISSUER" {
					env[from] = tc.issuer
				} else {
					args = append(args, from, tc.issuer)
				}
				var out bytes.Buffer
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // a value wrongly accepted returns nil at once
				err := run(ctx, args, func(k string) string { return env[k] }, &out, &out)
				require.Error(t, err)
				assert.ErrorIs(t, err, errUsage)
				msg := err.Error() + "\n" + out.String()
				assert.True(t, strings.HasPrefix(err.Error(), from+" "), "%s names where the value came from", err)
				for _, w := range tc.want {
					assert.Contains(t, msg, w)
				}
				assert.NotContains(t, msg, "s3")
				assert.NotContains(t, msg, "token")
			})
		}
	}
}

// -stats-on-exit prints the server's counters as one JSON line when the emulator stops, so a
// load test in another process can compare what the server decided with what its clients saw.
func TestEmulatorStatsOnExitFlag(t *testing.T) {
	pr, pw := io.Pipe()
	logs := newLogLines(pr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-port", "0", "-queue", queue, "-no-dispatch", "-create-quota", "0.001/1", "-stats-on-exit"},
			func(string) string { return "" }, pw, pw)
	}()
	t.Cleanup(func() { _ = pw.Close() })
	client := dial(t, logs.wait(t, listening))
	create := func() error {
		_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queue, Task: &cloudtaskspb.Task{
			MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://127.0.0.1:1/hook", Body: []byte("secret-payload")}},
		}})
		return err
	}
	require.NoError(t, create())
	require.Equal(t, codes.ResourceExhausted, status.Code(create()), "a bucket of one")
	cancel()
	require.NoError(t, <-done)

	line := logs.wait(t, regexp.MustCompile(regexp.QuoteMeta(statsPrefix)+`(\{.*\})`))
	var st cloudtaskstest.Stats
	require.NoError(t, json.Unmarshal([]byte(line), &st), line)
	assert.Equal(t, 2, st.CreateTaskCalls)
	assert.Equal(t, 1, st.TasksCreated)
	assert.Equal(t, 1, st.QuotaRejections)
	assert.NotContains(t, line, "secret-payload", "counters only")
}
