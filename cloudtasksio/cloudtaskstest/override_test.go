package cloudtaskstest_test

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// These tests set a queue's overrides through UpdateQueue, as an operator
// would, and dispatch to a loopback receiver to see what it gets.

// setHTTPTarget replaces the queue's http_target over the API.
func setHTTPTarget(t *testing.T, client *cloudtasks.Client, queue string, ht *cloudtaskspb.HttpTarget) *cloudtaskspb.Queue {
	t.Helper()
	q, err := client.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: queue, HttpTarget: ht}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"http_target"}}})
	require.NoError(t, err)
	return q
}

// queueWithReceiver starts a server and client, creates queueA and starts a
// loopback receiver that answers 200.
func queueWithReceiver(t *testing.T) (*cloudtaskstest.Server, *cloudtasks.Client, *httptest.Server, <-chan received) {
	t.Helper()
	srv, c := start(t)
	ts, got := target(t, 200)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	return srv, c, ts, got
}

func portOf(t *testing.T, rawURL string) int64 {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	p, err := strconv.ParseInt(u.Port(), 10, 64)
	require.NoError(t, err)
	return p
}

func TestURIOverrideAlwaysReplacesThePartsItSets(t *testing.T) {
	srv, c, ts, got := queueWithReceiver(t)
	var err error
	ctx := context.Background()

	// Scheme, host, port, path and query all replaced: the task's own URL
	// (an unreachable port) is never contacted.
	setHTTPTarget(t, c, queueA, &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{
		Scheme: cloudtaskspb.UriOverride_HTTP.Enum(), Host: proto.String("127.0.0.1"), Port: proto.Int64(portOf(t, ts.URL)),
		PathOverride: &cloudtaskspb.PathOverride{Path: "/routed"}, QueryOverride: &cloudtaskspb.QueryOverride{QueryParams: "via=queue"},
		UriOverrideEnforceMode: cloudtaskspb.UriOverride_ALWAYS,
	}})
	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("https://localhost:1/own?mine=1", []byte("{}"))})
	require.NoError(t, err)
	r := next(t, got)
	assert.Equal(t, "/routed", r.path)
	assert.Equal(t, "via=queue", r.query)
	assert.Equal(t, "{}", r.body)

	// Only the port set (mode unspecified = ALWAYS): the task keeps its path
	// and query; an empty path override clears the path.
	setHTTPTarget(t, c, queueA, &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{
		Port: proto.Int64(portOf(t, ts.URL)), PathOverride: &cloudtaskspb.PathOverride{}}})
	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/own?mine=1", nil)})
	require.NoError(t, err)
	r = next(t, got)
	assert.Equal(t, "/", r.path, "an empty path override clears the path")
	assert.Equal(t, "mine=1", r.query, "no query override: the task's query")
	waitIdle(t, srv)
	assert.Empty(t, srv.Tasks(queueA))
}

func TestURIOverrideIfNotExistsFillsOnlyMissingParts(t *testing.T) {
	srv, c, ts, got := queueWithReceiver(t)
	var err error
	ctx := context.Background()
	setHTTPTarget(t, c, queueA, &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{
		// Were scheme or host applied, the attempt would fail (TLS to a
		// plain server, or a host that is not loopback).
		Scheme: cloudtaskspb.UriOverride_HTTPS.Enum(), Host: proto.String("elsewhere.example.com"),
		Port:         proto.Int64(portOf(t, ts.URL)),
		PathOverride: &cloudtaskspb.PathOverride{Path: "/default"}, QueryOverride: &cloudtaskspb.QueryOverride{QueryParams: "d=1"},
		UriOverrideEnforceMode: cloudtaskspb.UriOverride_IF_NOT_EXISTS,
	}})

	// A URL without port, path or query gets all three.
	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1", nil)})
	require.NoError(t, err)
	r := next(t, got)
	assert.Equal(t, "/default", r.path)
	assert.Equal(t, "d=1", r.query)
	assert.Equal(t, ts.Listener.Addr().String(), r.host, "the port came from the queue")

	// A URL with its own keeps them.
	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL+"/own?mine=1", nil)})
	require.NoError(t, err)
	r = next(t, got)
	assert.Equal(t, "/own", r.path)
	assert.Equal(t, "mine=1", r.query)
	waitIdle(t, srv)
	assert.Empty(t, srv.Tasks(queueA))
}

func TestQueueMethodHeaderAndTokenOverridesApplyToHTTPTasks(t *testing.T) {
	srv, c, ts, got := queueWithReceiver(t)
	var err error
	ctx := context.Background()
	header := func(k, v string) *cloudtaskspb.HttpTarget_HeaderOverride {
		return &cloudtaskspb.HttpTarget_HeaderOverride{Header: &cloudtaskspb.HttpTarget_Header{Key: k, Value: v}}
	}
	setHTTPTarget(t, c, queueA, &cloudtaskspb.HttpTarget{
		HttpMethod:      cloudtaskspb.HttpMethod_GET,
		HeaderOverrides: []*cloudtaskspb.HttpTarget_HeaderOverride{header("x-tenant", "queue"), header("X-Added", "yes"), header("User-Agent", "mine")},
		AuthorizationHeader: &cloudtaskspb.HttpTarget_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: "queue@p.iam.gserviceaccount.com", Audience: "https://queue-audience"}},
	})
	task := httpTask(ts.URL+"/hook", []byte(`{"a":1}`))
	task.GetHttpRequest().Headers = map[string]string{"X-Tenant": "task", "Authorization": "Bearer task-secret", "X-Kept": "k"}
	task.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{ServiceAccountEmail: "task@p.iam.gserviceaccount.com"}}
	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
	require.NoError(t, err)

	r := next(t, got)
	assert.Equal(t, "GET", r.method, "the queue's method")
	assert.Empty(t, r.body, "a GET override drops the body")
	assert.Equal(t, "queue", r.header.Get("X-Tenant"), "header names compare case-insensitively")
	assert.Equal(t, "yes", r.header.Get("X-Added"))
	assert.Equal(t, "k", r.header.Get("X-Kept"))
	assert.Equal(t, "Google-Cloud-Tasks", r.header.Get("User-Agent"), "reserved headers stay the service's")
	claims, err := srv.VerifyOIDCToken(r.header.Get("Authorization"))
	require.NoError(t, err, "the queue's OIDC token replaces the task's OAuth token and header")
	assert.Equal(t, "https://queue-audience", claims.Audience)
	assert.Equal(t, "queue@p.iam.gserviceaccount.com", claims.Email)

	// An OAuth override, and a body method override keeps the body.
	setHTTPTarget(t, c, queueA, &cloudtaskspb.HttpTarget{HttpMethod: cloudtaskspb.HttpMethod_PUT,
		AuthorizationHeader: &cloudtaskspb.HttpTarget_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{
			ServiceAccountEmail: "queue@p.iam.gserviceaccount.com", Scope: "https://www.googleapis.com/auth/pubsub"}}})
	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL+"/hook", []byte(`{"a":2}`))})
	require.NoError(t, err)
	r = next(t, got)
	assert.Equal(t, "PUT", r.method)
	assert.Equal(t, `{"a":2}`, r.body)
	grant, err := srv.VerifyOAuthToken(r.header.Get("Authorization"))
	require.NoError(t, err)
	assert.Equal(t, "https://www.googleapis.com/auth/pubsub", grant.Scope)
	waitIdle(t, srv)
}

func TestAppEngineRoutingOverrideReplacesTheTasksRouting(t *testing.T) {
	ts, got := target(t, 200)
	srv, c := start(t, cloudtaskstest.WithAppEngineURL(ts.URL))
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	ctx := context.Background()
	q, err := c.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: queueA,
			AppEngineRoutingOverride: &cloudtaskspb.AppEngineRouting{Service: "billing", Version: "v3", Host: "ignored.example.com"},
			// An HTTP target override leaves App Engine tasks alone.
			HttpTarget: &cloudtaskspb.HttpTarget{HttpMethod: cloudtaskspb.HttpMethod_DELETE}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"app_engine_routing_override", "http_target"}}})
	require.NoError(t, err)
	assert.Empty(t, q.GetAppEngineRoutingOverride().GetHost(), "host is output only")

	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
			RelativeUri: "/work", Body: []byte("b"),
			AppEngineRouting: &cloudtaskspb.AppEngineRouting{Service: "worker", Instance: "i1"}}}}})
	require.NoError(t, err)
	r := next(t, got)
	assert.Equal(t, "v3.billing."+ts.Listener.Addr().String(), r.host, "the queue's routing, not the task's")
	assert.Equal(t, "POST", r.method)
	assert.Equal(t, "/work", r.path)
	waitIdle(t, srv)
}

func TestUpdateQueueHTTPTargetHonoursTheMask(t *testing.T) {
	srv, c := start(t)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	ctx := context.Background()
	setHTTPTarget(t, c, queueA, &cloudtaskspb.HttpTarget{
		UriOverride: &cloudtaskspb.UriOverride{Host: proto.String("a.example.com"), UriOverrideEnforceMode: cloudtaskspb.UriOverride_ALWAYS},
		HttpMethod:  cloudtaskspb.HttpMethod_PUT})

	// A sub-field path changes that field only.
	q, err := c.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
		Queue:      &cloudtaskspb.Queue{Name: queueA, HttpTarget: &cloudtaskspb.HttpTarget{UriOverride: &cloudtaskspb.UriOverride{Host: proto.String("b.example.com")}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"http_target.uri_override.host"}}})
	require.NoError(t, err)
	assert.Equal(t, "b.example.com", q.GetHttpTarget().GetUriOverride().GetHost())
	assert.Equal(t, cloudtaskspb.UriOverride_ALWAYS, q.GetHttpTarget().GetUriOverride().GetUriOverrideEnforceMode())
	assert.Equal(t, cloudtaskspb.HttpMethod_PUT, q.GetHttpTarget().GetHttpMethod())

	got, err := c.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.True(t, proto.Equal(q.GetHttpTarget(), got.GetHttpTarget()), "GetQueue returns the override")

	// The mask "http_target" with an empty queue removes queue-level routing,
	// as the service documents.
	q, err = c.UpdateQueue(ctx, &cloudtaskspb.UpdateQueueRequest{
		Queue: &cloudtaskspb.Queue{Name: queueA}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"http_target"}}})
	require.NoError(t, err)
	assert.Nil(t, q.GetHttpTarget())
}

func TestUpdateQueueRejectsBadHTTPTargets(t *testing.T) {
	srv, c := start(t)
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	uri := func(o *cloudtaskspb.UriOverride) *cloudtaskspb.HttpTarget {
		return &cloudtaskspb.HttpTarget{UriOverride: o}
	}
	scheme := cloudtaskspb.UriOverride_Scheme(7)
	cases := map[string]struct {
		ht   *cloudtaskspb.HttpTarget
		want string
	}{
		"empty host":         {uri(&cloudtaskspb.UriOverride{Host: proto.String("")}), "uri_override.host"},
		"host with port":     {uri(&cloudtaskspb.UriOverride{Host: proto.String("a.example.com:8080")}), "uri_override.host"},
		"host with path":     {uri(&cloudtaskspb.UriOverride{Host: proto.String("a.example.com/x")}), "uri_override.host"},
		"host with scheme":   {uri(&cloudtaskspb.UriOverride{Host: proto.String("https://a.example.com")}), "uri_override.host"},
		"negative port":      {uri(&cloudtaskspb.UriOverride{Port: proto.Int64(-1)}), "uri_override.port"},
		"port too large":     {uri(&cloudtaskspb.UriOverride{Port: proto.Int64(65536)}), "uri_override.port"},
		"relative path":      {uri(&cloudtaskspb.UriOverride{PathOverride: &cloudtaskspb.PathOverride{Path: "users"}}), "path_override.path"},
		"path with query":    {uri(&cloudtaskspb.UriOverride{PathOverride: &cloudtaskspb.PathOverride{Path: "/u?x=1"}}), "path_override.path"},
		"query fragment":     {uri(&cloudtaskspb.UriOverride{QueryOverride: &cloudtaskspb.QueryOverride{QueryParams: "a=1#f"}}), "query_override.query_params"},
		"unknown scheme":     {uri(&cloudtaskspb.UriOverride{Scheme: &scheme}), "uri_override.scheme"},
		"unknown mode":       {uri(&cloudtaskspb.UriOverride{UriOverrideEnforceMode: 9}), "uri_override_enforce_mode"},
		"unknown method":     {&cloudtaskspb.HttpTarget{HttpMethod: 42}, "http_target.http_method"},
		"header without key": {&cloudtaskspb.HttpTarget{HeaderOverrides: []*cloudtaskspb.HttpTarget_HeaderOverride{{Header: &cloudtaskspb.HttpTarget_Header{Value: "v"}}}}, "header_overrides[0].header.key"},
		"OIDC without audience": {&cloudtaskspb.HttpTarget{AuthorizationHeader: &cloudtaskspb.HttpTarget_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: "sa@p.iam.gserviceaccount.com"}}}, "oidc_token"},
		"OAuth without scope": {&cloudtaskspb.HttpTarget{AuthorizationHeader: &cloudtaskspb.HttpTarget_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{
			ServiceAccountEmail: "sa@p.iam.gserviceaccount.com"}}}, "oauth_token"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.UpdateQueue(context.Background(), &cloudtaskspb.UpdateQueueRequest{
				Queue: &cloudtaskspb.Queue{Name: queueA, HttpTarget: tc.ht}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"http_target"}}})
			requireCode(t, codes.InvalidArgument, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = c.CreateQueue(context.Background(), &cloudtaskspb.CreateQueueRequest{Parent: location, Queue: &cloudtaskspb.Queue{Name: queueB, HttpTarget: tc.ht}})
			requireCode(t, codes.InvalidArgument, err)
		})
	}
	q, err := c.GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Nil(t, q.GetHttpTarget(), "the rejected updates changed nothing")
}

func TestDisabledQueueKeepsTasksUntilResumed(t *testing.T) {
	srv, c, ts, got := queueWithReceiver(t)
	var err error
	require.NoError(t, srv.DisableQueue(queueA))
	ctx := context.Background()
	q, err := c.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.Queue_DISABLED, q.GetState())

	_, err = c.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask(ts.URL+"/hook", nil)})
	require.NoError(t, err, "a disabled queue accepts tasks")
	waitIdle(t, srv)
	assert.Len(t, srv.Tasks(queueA), 1, "and dispatches none")
	assert.Zero(t, srv.Stats().DispatchAttempts)

	_, err = c.ResumeQueue(ctx, &cloudtaskspb.ResumeQueueRequest{Name: queueA})
	require.NoError(t, err)
	next(t, got)
	waitIdle(t, srv)
	assert.Empty(t, srv.Tasks(queueA))
	requireCode(t, codes.NotFound, srv.DisableQueue(queueB))
}
