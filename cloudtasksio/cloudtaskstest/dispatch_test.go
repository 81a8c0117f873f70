package cloudtaskstest_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
)

// These tests dispatch over real loopback HTTP to httptest servers.

type received struct {
	method, path, query, host string
	header                    http.Header
	body                      string
}

// target starts a loopback HTTP server that records every request and
// answers status.
func target(t *testing.T, status int) (*httptest.Server, <-chan received) {
	t.Helper()
	ch := make(chan received, 100)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- received{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, host: r.Host, header: r.Header.Clone(), body: string(b)}
		w.WriteHeader(status)
	}))
	t.Cleanup(ts.Close)
	return ts, ch
}

func next(t *testing.T, ch <-chan received) received {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no dispatch arrived")
		return received{}
	}
}

// waitIdle waits until the server has nothing left to do now (Server.Wait),
// for at most 10 seconds.
func waitIdle(t *testing.T, srv *cloudtaskstest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Wait(ctx))
}

// waitGone waits until the server is idle and checks that the task is no
// longer stored (it succeeded).
func waitGone(t *testing.T, srv *cloudtaskstest.Server, name string) {
	t.Helper()
	waitIdle(t, srv)
	_, ok := srv.Task(name)
	require.False(t, ok, "task %s is still stored", name)
}

func TestDispatchDeliversTheTaskToItsHandler(t *testing.T) {
	srv, client := start(t)
	ctx := context.Background()
	ts, got := target(t, http.StatusOK)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)

	cases := []struct {
		method cloudtaskspb.HttpMethod
		body   string
	}{
		{cloudtaskspb.HttpMethod_POST, `{"order":1}`},
		{cloudtaskspb.HttpMethod_PUT, `{"order":2}`},
		{cloudtaskspb.HttpMethod_PATCH, `{"order":3}`},
		{cloudtaskspb.HttpMethod_GET, ""},
		{cloudtaskspb.HttpMethod_DELETE, ""},
	}
	for _, tc := range cases {
		t.Run(tc.method.String(), func(t *testing.T) {
			name := queueA + "/tasks/order-" + strings.ToLower(tc.method.String())
			task, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: &cloudtaskspb.Task{
				Name: name,
				MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
					Url: ts.URL + "/orders?src=test", HttpMethod: tc.method, Body: []byte(tc.body),
					Headers: map[string]string{"Content-Type": "application/json", "X-Tenant": "t1"},
				}},
			}})
			require.NoError(t, err)
			r := next(t, got)
			assert.Equal(t, tc.method.String(), r.method)
			assert.Equal(t, "/orders", r.path)
			assert.Equal(t, "src=test", r.query)
			assert.Equal(t, tc.body, r.body)
			assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			assert.Equal(t, "t1", r.header.Get("X-Tenant"))
			assert.Equal(t, "Google-Cloud-Tasks", r.header.Get("User-Agent"))
			assert.Equal(t, "queue-a", r.header.Get("X-CloudTasks-QueueName"))
			assert.Equal(t, "order-"+strings.ToLower(tc.method.String()), r.header.Get("X-CloudTasks-TaskName"))
			assert.Equal(t, "0", r.header.Get("X-CloudTasks-TaskRetryCount"))
			assert.Equal(t, "0", r.header.Get("X-CloudTasks-TaskExecutionCount"))
			assert.Regexp(t, `^[0-9]+\.[0-9]{6}$`, r.header.Get("X-CloudTasks-TaskETA"))
			waitGone(t, srv, task.GetName())
		})
	}
	st := srv.Stats()
	assert.Equal(t, len(cases), st.TasksSucceeded)
	assert.Equal(t, len(cases), st.DispatchAttempts)

	// A succeeded task's name stays taken.
	_, err = client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: &cloudtaskspb.Task{
		Name:        queueA + "/tasks/order-post",
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: ts.URL}},
	}})
	requireCode(t, codes.AlreadyExists, err)
}

func TestFailedDispatchIsRecordedOnTheTask(t *testing.T) {
	srv, client := start(t)
	ts, got := target(t, http.StatusServiceUnavailable)
	_, err := client.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{
		Name: queueA, RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Hour), MaxBackoff: durationpb.New(time.Hour)},
	}})
	require.NoError(t, err)
	task, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL, []byte("x"))})
	require.NoError(t, err)
	next(t, got)
	waitIdle(t, srv) // the retry is an hour away: idle once the first attempt is recorded
	stored, err := client.GetTask(context.Background(), &cloudtaskspb.GetTaskRequest{Name: task.GetName()})
	require.NoError(t, err)
	assert.Equal(t, int32(1), stored.GetDispatchCount())
	assert.Equal(t, int32(codes.Unavailable), stored.GetLastAttempt().GetResponseStatus().GetCode())
	assert.NotNil(t, stored.GetFirstAttempt().GetDispatchTime())
	assert.WithinDuration(t, time.Now().Add(time.Hour), stored.GetScheduleTime().AsTime(), time.Minute, "waits min_backoff for its retry")
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	srv, client := start(t)
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/from", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/to", http.StatusFound) })
	mux.HandleFunc("/to", func(http.ResponseWriter, *http.Request) { followed.Add(1) })
	ts := httptest.NewServer(mux)
	defer ts.Close()
	_, err := client.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{
		Name: queueA, RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 1},
	}})
	require.NoError(t, err)
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL+"/from", nil)})
	require.NoError(t, err)
	waitIdle(t, srv)
	assert.Equal(t, 1, srv.Stats().TasksExhausted)
	assert.Equal(t, int32(0), followed.Load())
	assert.Equal(t, 0, srv.Stats().TasksSucceeded, "a 302 is not a success")
}

func TestOIDCTokenIsASignedJWTWithTheTaskClaims(t *testing.T) {
	const issuer = "http://127.0.0.1:8980"
	srv, client := start(t, cloudtaskstest.WithOIDCIssuer(issuer))
	ts, got := target(t, http.StatusOK)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	const email = "invoker@my-project.iam.gserviceaccount.com"

	for _, audience := range []string{"https://my-service.example", ""} {
		task := httpTask(ts.URL+"/secure", []byte("{}"))
		task.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: email, Audience: audience,
		}}
		_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
		require.NoError(t, err)
		r := next(t, got)
		authz := r.header.Get("Authorization")
		require.True(t, strings.HasPrefix(authz, "Bearer "), "Authorization: %.20s", authz)

		claims, err := srv.VerifyOIDCToken(authz)
		require.NoError(t, err)
		wantAud := audience
		if wantAud == "" {
			wantAud = ts.URL + "/secure"
		}
		assert.Equal(t, wantAud, claims.Audience)
		assert.Equal(t, email, claims.Email)
		assert.True(t, claims.EmailVerified)
		assert.Equal(t, issuer, claims.Issuer)
		assert.WithinDuration(t, time.Now(), claims.IssuedAt, time.Minute)
		assert.Equal(t, time.Hour, claims.Expiry.Sub(claims.IssuedAt))

		// The token is a standard RS256 JWT: check it with the public key
		// alone, the way a handler would.
		verifyRS256(t, srv.OIDCPublicKey(), strings.TrimPrefix(authz, "Bearer "))
	}

	// Tampering breaks it; another server's tokens do not verify.
	other := cloudtaskstest.NewServer()
	defer other.Close()
	task := httpTask(ts.URL+"/secure", nil)
	task.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: email}}
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
	require.NoError(t, err)
	tok := next(t, got).header.Get("Authorization")
	_, err = other.VerifyOIDCToken(tok)
	assert.Error(t, err)
	parts := strings.Split(strings.TrimPrefix(tok, "Bearer "), ".")
	forged, _ := json.Marshal(map[string]any{"aud": "x", "email": "attacker@example.com", "iss": issuer, "exp": time.Now().Add(time.Hour).Unix()})
	_, err = srv.VerifyOIDCToken(parts[0] + "." + base64.RawURLEncoding.EncodeToString(forged) + "." + parts[2])
	assert.Error(t, err)
}

func verifyRS256(t *testing.T, key *rsa.PublicKey, jwt string) {
	t.Helper()
	parts := strings.Split(jwt, ".")
	require.Len(t, parts, 3)
	var header map[string]string
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &header))
	assert.Equal(t, "RS256", header["alg"])
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	require.NoError(t, rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig))
}

func TestOpenIDHandlerPublishesTheSigningKey(t *testing.T) {
	const issuer = "http://127.0.0.1:8980"
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithOIDCIssuer(issuer))
	defer srv.Close()
	ts := httptest.NewServer(srv.OpenIDHandler())
	defer ts.Close()

	var disco struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	getJSON(t, ts.URL+"/.well-known/openid-configuration", &disco)
	assert.Equal(t, issuer, disco.Issuer)
	assert.Equal(t, issuer+"/jwks", disco.JWKSURI)

	var jwks struct {
		Keys []struct{ Kty, Alg, Kid, N, E string } `json:"keys"`
	}
	getJSON(t, ts.URL+"/jwks", &jwks)
	require.Len(t, jwks.Keys, 1)
	k := jwks.Keys[0]
	assert.Equal(t, "RSA", k.Kty)
	assert.Equal(t, "RS256", k.Alg)
	n, err := base64.RawURLEncoding.DecodeString(k.N)
	require.NoError(t, err)
	e, err := base64.RawURLEncoding.DecodeString(k.E)
	require.NoError(t, err)
	pub := srv.OIDCPublicKey()
	assert.Equal(t, 0, pub.N.Cmp(new(big.Int).SetBytes(n)))
	assert.Equal(t, int64(pub.E), new(big.Int).SetBytes(e).Int64())
}

func TestOpenIDHandlerTakesAnyIssuerPath(t *testing.T) {
	const issuer = "http://127.0.0.1:8980/{tenant}/x{"
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithOIDCIssuer(issuer))
	defer srv.Close()
	ts := httptest.NewServer(srv.OpenIDHandler()) // used to panic: the path became a ServeMux pattern
	defer ts.Close()
	var disco struct {
		Issuer string `json:"issuer"`
	}
	getJSON(t, ts.URL+"/%7Btenant%7D/x%7B/.well-known/openid-configuration", &disco)
	assert.Equal(t, issuer, disco.Issuer)
	resp, err := http.Get(ts.URL + "/any/x%7B/jwks")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "{tenant} is not a wildcard")
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

func TestOAuthTokenIsAVerifiableBearerToken(t *testing.T) {
	srv, client := start(t)
	ts, got := target(t, http.StatusOK)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	for _, scope := range []string{"https://www.googleapis.com/auth/tasks", ""} {
		task := httpTask(ts.URL, []byte("{}"))
		task.GetHttpRequest().Headers["Authorization"] = "Bearer user-supplied"
		task.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{
			ServiceAccountEmail: "caller@p.iam.gserviceaccount.com", Scope: scope,
		}}
		_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
		require.NoError(t, err)
		authz := next(t, got).header.Get("Authorization")
		require.True(t, strings.HasPrefix(authz, "Bearer ya29."), "the token replaces the task's own Authorization header")
		grant, err := srv.VerifyOAuthToken(authz)
		require.NoError(t, err)
		assert.Equal(t, "caller@p.iam.gserviceaccount.com", grant.Email)
		want := scope
		if want == "" {
			want = cloudtaskstest.DefaultOAuthScope
		}
		assert.Equal(t, want, grant.Scope)
		_, err = srv.VerifyOAuthToken(authz + "x")
		assert.Error(t, err)
	}
}

func TestAppEngineRoutingIsVisibleToTheHandler(t *testing.T) {
	ts, got := target(t, http.StatusOK)
	srv, client := start(t, cloudtaskstest.WithAppEngineURL(ts.URL))
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
			HttpMethod: cloudtaskspb.HttpMethod_PUT, RelativeUri: "/work/items?id=3", Body: []byte("payload"),
			AppEngineRouting: &cloudtaskspb.AppEngineRouting{Service: "worker", Version: "v1"},
			Headers:          map[string]string{"Content-Type": "text/plain"},
		}},
	}})
	require.NoError(t, err)
	r := next(t, got)
	assert.Equal(t, "PUT", r.method)
	assert.Equal(t, "/work/items", r.path)
	assert.Equal(t, "id=3", r.query)
	assert.Equal(t, "payload", r.body)
	assert.Equal(t, "v1.worker."+strings.TrimPrefix(ts.URL, "http://"), r.host)
	assert.Equal(t, "text/plain", r.header.Get("Content-Type"))
	assert.Equal(t, "queue-a", r.header.Get("X-AppEngine-QueueName"))
	assert.NotEmpty(t, r.header.Get("X-AppEngine-TaskName"))
	assert.Equal(t, "0", r.header.Get("X-AppEngine-TaskRetryCount"))
	assert.Equal(t, "0", r.header.Get("X-AppEngine-TaskExecutionCount"))
	assert.NotEmpty(t, r.header.Get("X-AppEngine-TaskETA"))
}

func TestRunTaskDispatchesFromAPausedQueue(t *testing.T) {
	srv, client := start(t)
	ts, got := target(t, http.StatusOK)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	require.NoError(t, srv.PauseQueue(queueA))
	task, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL, []byte("run me"))})
	require.NoError(t, err)
	ran, err := client.RunTask(context.Background(), &cloudtaskspb.RunTaskRequest{Name: task.GetName()})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ran.GetDispatchCount())
	assert.Equal(t, "run me", next(t, got).body)
	waitGone(t, srv, task.GetName())
}

func TestWithoutDispatchNothingIsSent(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ts, got := target(t, http.StatusOK)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	task, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL, nil)})
	require.NoError(t, err)
	_, err = client.RunTask(context.Background(), &cloudtaskspb.RunTaskRequest{Name: task.GetName()})
	requireCode(t, codes.FailedPrecondition, err)
	require.NoError(t, srv.Close())
	assert.Empty(t, got)
	assert.Len(t, srv.Tasks(queueA), 1)
}

func TestInvalidAppEngineURLIsRejected(t *testing.T) {
	_, err := cloudtaskstest.NewServerWithAddress("127.0.0.1:0", cloudtaskstest.WithAppEngineURL("localhost:8080"))
	require.Error(t, err)
	assert.Panics(t, func() { cloudtaskstest.NewServer(cloudtaskstest.WithAppEngineURL("/relative")) })
}
