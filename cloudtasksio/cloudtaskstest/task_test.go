package cloudtaskstest_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCreateTaskStampsTimesAndGeneratesNames(t *testing.T) {
	clock := newFakeClock()
	srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch())
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)

	task := httpTask("https://127.0.0.1/hook", []byte(`{"a":1}`))
	task.GetHttpRequest().HttpMethod = cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED
	got, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(queueA)+`/tasks/[0-9]{1,20}$`), got.GetName())
	assert.Equal(t, clock.Now().Truncate(time.Second), got.GetCreateTime().AsTime())
	assert.Equal(t, clock.Now().Truncate(time.Microsecond), got.GetScheduleTime().AsTime())
	assert.Equal(t, cloudtaskspb.HttpMethod_POST, got.GetHttpRequest().GetHttpMethod(), "unspecified means POST")
	assert.Equal(t, cloudtaskspb.Task_BASIC, got.GetView())

	other, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("https://127.0.0.1/hook", nil)})
	require.NoError(t, err)
	assert.NotEqual(t, got.GetName(), other.GetName(), "each unnamed task gets its own name")

	when := clock.Now().Add(time.Hour + 1234*time.Nanosecond)
	task = httpTask("https://127.0.0.1/hook", nil)
	task.ScheduleTime = timestamppb.New(when)
	got, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
	require.NoError(t, err)
	assert.Equal(t, when.Truncate(time.Microsecond), got.GetScheduleTime().AsTime())

	stored := srv.Tasks(queueA)
	require.Len(t, stored, 3)
	assert.Equal(t, []byte(`{"a":1}`), stored[0].GetHttpRequest().GetBody(), "creation order, FULL view")
	assert.Equal(t, cloudtaskspb.Task_FULL, stored[0].GetView())
	one, ok := srv.Task(stored[1].GetName())
	require.True(t, ok)
	assert.Equal(t, other.GetName(), one.GetName())
	_, ok = srv.Task(queueA + "/tasks/none")
	assert.False(t, ok)
}

func TestTaskViewsOmitBodyAndHeadersUnlessFull(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	appEngine := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
		HttpMethod: cloudtaskspb.HttpMethod_PUT, RelativeUri: "/work", Body: []byte("ae-body"), Headers: map[string]string{"X-A": "1"},
	}}}
	for _, task := range []*cloudtaskspb.Task{httpTask("http://127.0.0.1:1/x", []byte("http-body")), appEngine} {
		basic, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
		require.NoError(t, err)
		full, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task, ResponseView: cloudtaskspb.Task_FULL})
		require.NoError(t, err)
		assertView(t, cloudtaskspb.Task_BASIC, basic)
		assertView(t, cloudtaskspb.Task_FULL, full)

		for view, want := range map[cloudtaskspb.Task_View]cloudtaskspb.Task_View{
			cloudtaskspb.Task_VIEW_UNSPECIFIED: cloudtaskspb.Task_BASIC, cloudtaskspb.Task_BASIC: cloudtaskspb.Task_BASIC, cloudtaskspb.Task_FULL: cloudtaskspb.Task_FULL,
		} {
			got, err := client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: full.GetName(), ResponseView: view})
			require.NoError(t, err)
			assertView(t, want, got)
		}
	}
	for view, want := range map[cloudtaskspb.Task_View]cloudtaskspb.Task_View{
		cloudtaskspb.Task_VIEW_UNSPECIFIED: cloudtaskspb.Task_BASIC, cloudtaskspb.Task_FULL: cloudtaskspb.Task_FULL,
	} {
		it := client.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: queueA, ResponseView: view})
		n := 0
		for {
			got, err := it.Next()
			if err == iterator.Done {
				break
			}
			require.NoError(t, err)
			assertView(t, want, got)
			n++
		}
		assert.Equal(t, 4, n)
	}
}

func assertView(t *testing.T, want cloudtaskspb.Task_View, task *cloudtaskspb.Task) {
	t.Helper()
	require.Equal(t, want, task.GetView())
	body, headers := task.GetHttpRequest().GetBody(), task.GetHttpRequest().GetHeaders()
	if task.GetAppEngineHttpRequest() != nil {
		body, headers = task.GetAppEngineHttpRequest().GetBody(), task.GetAppEngineHttpRequest().GetHeaders()
		assert.Equal(t, "/work", task.GetAppEngineHttpRequest().GetRelativeUri())
	} else {
		assert.Equal(t, "http://127.0.0.1:1/x", task.GetHttpRequest().GetUrl())
	}
	if want == cloudtaskspb.Task_FULL {
		assert.NotEmpty(t, body)
		assert.NotEmpty(t, headers)
	} else {
		assert.Empty(t, body)
		assert.Empty(t, headers)
	}
}

func TestListTasksPagesInCreationOrder(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	var want []string
	for i := range 25 {
		task, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", []byte{byte(i)})})
		require.NoError(t, err)
		want = append(want, task.GetName())
	}
	var got []string
	token := ""
	pages := 0
	for {
		var page []*cloudtaskspb.Task
		token, err = iterator.NewPager(client.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: queueA}), 10, token).NextPage(&page)
		require.NoError(t, err)
		pages++
		for _, task := range page {
			got = append(got, task.GetName())
		}
		if token == "" {
			break
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, 3, pages)

	_, err = client.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: queueA, PageToken: "not-a-token"}).Next()
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.ListTasks(ctx, &cloudtaskspb.ListTasksRequest{Parent: queueA, PageSize: -1}).Next()
	requireCode(t, codes.InvalidArgument, err)
}

func TestDeleteTask(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	ctx := context.Background()
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	task, err := client.CreateTask(ctx, &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
	require.NoError(t, err)
	require.NoError(t, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}))
	_, err = client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: task.GetName()})
	requireCode(t, codes.NotFound, err)
	requireCode(t, codes.NotFound, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: task.GetName()}))
	requireCode(t, codes.InvalidArgument, client.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: queueA + "/tasks/a.b"}))
	_, err = client.GetTask(ctx, &cloudtaskspb.GetTaskRequest{Name: queueA})
	requireCode(t, codes.InvalidArgument, err)
	assert.Empty(t, srv.Tasks(queueA))
}

func TestNamedTasksAreDeduplicatedWithinTheTombstoneWindow(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		ttl       time.Duration // 0: default
		retention time.Duration
		release   func(t *testing.T, srv *cloudtaskstest.Server, c *cloudtasks.Client, name string)
	}{
		{"deleted, default window", 0, time.Hour, func(t *testing.T, _ *cloudtaskstest.Server, c *cloudtasks.Client, name string) {
			require.NoError(t, c.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: name}))
		}},
		{"purged, default window", 0, time.Hour, func(t *testing.T, _ *cloudtaskstest.Server, c *cloudtasks.Client, _ string) {
			_, err := c.PurgeQueue(ctx, &cloudtaskspb.PurgeQueueRequest{Name: queueA})
			require.NoError(t, err)
		}},
		{"deleted, 10 minute window", 10 * time.Minute, 10 * time.Minute, func(t *testing.T, _ *cloudtaskstest.Server, c *cloudtasks.Client, name string) {
			require.NoError(t, c.DeleteTask(ctx, &cloudtaskspb.DeleteTaskRequest{Name: name}))
		}},
		{"queue deleted and recreated", 0, time.Hour, func(t *testing.T, srv *cloudtaskstest.Server, c *cloudtasks.Client, _ string) {
			require.NoError(t, c.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: queueA}))
			_, err := srv.CreateQueue(queueA)
			require.NoError(t, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch())
			_, err := srv.CreateQueue(queueA)
			require.NoError(t, err)
			if tc.ttl > 0 {
				srv.SetTombstoneTTL(queueA, tc.ttl)
			}
			name := queueA + "/tasks/order-42"
			req := &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: named(httpTask("http://127.0.0.1:1/x", nil), name)}

			_, err = client.CreateTask(ctx, req)
			require.NoError(t, err)
			_, err = client.CreateTask(ctx, req)
			requireCode(t, codes.AlreadyExists, err)

			tc.release(t, srv, client, name)
			clock.Advance(tc.retention - time.Second)
			_, err = client.CreateTask(ctx, req)
			requireCode(t, codes.AlreadyExists, err)

			clock.Advance(time.Second)
			_, err = client.CreateTask(ctx, req)
			require.NoError(t, err, "the name is free again once the window has passed")

			st := srv.Stats()
			assert.Equal(t, 2, st.TasksCreated)
			assert.Equal(t, 2, st.AlreadyExists)
			assert.Equal(t, 4, st.CreateTaskCalls)
		})
	}
}

func TestCreateTaskRejectsWhatTheServiceRejects(t *testing.T) {
	clock := newFakeClock()
	srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch())
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	_, err = srv.CreateQueue(queueB)
	require.NoError(t, err)

	const secret = "SECRET-BODY-MARKER"
	body := []byte(secret)
	withHTTP := func(f func(r *cloudtaskspb.HttpRequest)) *cloudtaskspb.Task {
		task := httpTask("https://127.0.0.1/hook", body)
		f(task.GetHttpRequest())
		return task
	}
	appEngine := func(f func(r *cloudtaskspb.AppEngineHttpRequest)) *cloudtaskspb.Task {
		r := &cloudtaskspb.AppEngineHttpRequest{HttpMethod: cloudtaskspb.HttpMethod_POST, RelativeUri: "/x", Body: body}
		f(r)
		return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: r}}
	}
	withDeadline := func(task *cloudtaskspb.Task, d time.Duration) *cloudtaskspb.Task {
		task.DispatchDeadline = durationpb.New(d)
		return task
	}
	noop := func(*cloudtaskspb.HttpRequest) {}
	noopAE := func(*cloudtaskspb.AppEngineHttpRequest) {}

	cases := []struct {
		name   string
		parent string
		task   *cloudtaskspb.Task
	}{
		{"no task", queueA, nil},
		{"no target", queueA, &cloudtaskspb.Task{}},
		{"malformed parent", "projects/p/queues/q", httpTask("https://127.0.0.1/", nil)},
		{"task name without tasks segment", queueA, named(httpTask("https://127.0.0.1/", nil), queueA+"/t1")},
		{"task id with a dot", queueA, named(httpTask("https://127.0.0.1/", nil), queueA+"/tasks/a.b")},
		{"task id too long", queueA, named(httpTask("https://127.0.0.1/", nil), queueA+"/tasks/"+strings.Repeat("x", 501))},
		{"task in another queue", queueA, named(httpTask("https://127.0.0.1/", nil), queueB+"/tasks/t1")},
		{"task over the size limit", queueA, httpTask("https://127.0.0.1/", make([]byte, cloudtaskstest.MaxTaskSize))},
		{"HTTP deadline under 15s", queueA, withDeadline(withHTTP(noop), 14*time.Second)},
		{"HTTP deadline over 30m", queueA, withDeadline(withHTTP(noop), 30*time.Minute+time.Second)},
		{"negative deadline", queueA, withDeadline(withHTTP(noop), -time.Minute)},
		{"App Engine deadline under 15s", queueA, withDeadline(appEngine(noopAE), 5*time.Second)},
		{"App Engine deadline over 24h15s", queueA, withDeadline(appEngine(noopAE), 24*time.Hour+16*time.Second)},
		{"schedule over 30 days ahead", queueA, func() *cloudtaskspb.Task {
			task := withHTTP(noop)
			task.ScheduleTime = timestamppb.New(clock.Now().Add(30*24*time.Hour + time.Second))
			return task
		}()},
		{"HTTP GET with a body", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_GET })},
		{"HTTP DELETE with a body", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_DELETE })},
		{"HTTP HEAD with a body", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_HEAD })},
		{"HTTP OPTIONS with a body", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_OPTIONS })},
		{"App Engine PATCH with a body", queueA, appEngine(func(r *cloudtaskspb.AppEngineHttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_PATCH })},
		{"App Engine GET with a body", queueA, appEngine(func(r *cloudtaskspb.AppEngineHttpRequest) { r.HttpMethod = cloudtaskspb.HttpMethod_GET })},
		{"App Engine relative URI without slash", queueA, appEngine(func(r *cloudtaskspb.AppEngineHttpRequest) { r.RelativeUri = "x" })},
		{"App Engine relative URI with a space", queueA, appEngine(func(r *cloudtaskspb.AppEngineHttpRequest) { r.RelativeUri = "/a b" })},
		{"unknown method", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.HttpMethod = 42 })},
		{"missing URL", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.Url = "" })},
		{"relative URL", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.Url = "/hook" })},
		{"ftp URL", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.Url = "ftp://127.0.0.1/x" })},
		{"URL without host", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.Url = "https:///x" })},
		{"URL over 2083 chars", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) { r.Url = "https://127.0.0.1/" + strings.Repeat("a", 2066) })},
		{"headers of 80KB", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) {
			r.Headers = map[string]string{"X-Big": strings.Repeat("h", 80*1024)}
		})},
		{"OIDC without service account", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) {
			r.AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{Audience: "a"}}
		})},
		{"OAuth without service account", queueA, withHTTP(func(r *cloudtaskspb.HttpRequest) {
			r.AuthorizationHeader = &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{Scope: "s"}}
		})},
		{"task retry config with max attempts -2", queueA, func() *cloudtaskspb.Task {
			task := withHTTP(noop)
			task.RetryConfig = &cloudtaskspb.RetryConfig{MaxAttempts: -2}
			return task
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: tc.parent, Task: tc.task})
			requireCode(t, codes.InvalidArgument, err)
			assert.NotContains(t, err.Error(), secret, "messages never echo the body")
		})
	}
	assert.Empty(t, srv.Tasks(queueA))
	assert.Equal(t, 0, srv.Stats().TasksCreated)
}

func TestCreateTaskAcceptsTheEdgesOfEveryRange(t *testing.T) {
	clock := newFakeClock()
	srv, client := start(t, cloudtaskstest.WithClock(clock.Now), cloudtaskstest.WithoutDispatch())
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	ae := func(m cloudtaskspb.HttpMethod, body []byte) *cloudtaskspb.Task {
		return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{HttpMethod: m, Body: body}}}
	}
	deadline := func(task *cloudtaskspb.Task, d time.Duration) *cloudtaskspb.Task {
		task.DispatchDeadline = durationpb.New(d)
		return task
	}
	get := httpTask("http://localhost:8080/x", nil)
	get.GetHttpRequest().HttpMethod = cloudtaskspb.HttpMethod_GET
	scheduled := httpTask("http://127.0.0.1/x", nil)
	scheduled.ScheduleTime = timestamppb.New(clock.Now().Add(30 * 24 * time.Hour))
	past := httpTask("http://127.0.0.1/x", nil)
	past.ScheduleTime = timestamppb.New(clock.Now().Add(-time.Hour))
	oidc := httpTask("https://127.0.0.1/x", []byte("b"))
	oidc.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "sa@p.iam.gserviceaccount.com"}}

	for name, task := range map[string]*cloudtaskspb.Task{
		"HTTP deadline 15s":             deadline(httpTask("http://127.0.0.1/x", nil), 15*time.Second),
		"HTTP deadline 30m":             deadline(httpTask("http://127.0.0.1/x", nil), 30*time.Minute),
		"HTTP deadline 0 (default)":     deadline(httpTask("http://127.0.0.1/x", nil), 0),
		"App Engine deadline 24h15s":    deadline(ae(cloudtaskspb.HttpMethod_POST, nil), 24*time.Hour+15*time.Second),
		"App Engine PUT body":           ae(cloudtaskspb.HttpMethod_PUT, []byte("x")),
		"App Engine empty relative URI": ae(cloudtaskspb.HttpMethod_GET, nil),
		"HTTP PATCH body": func() *cloudtaskspb.Task {
			t := httpTask("http://127.0.0.1/x", []byte("x"))
			t.GetHttpRequest().HttpMethod = cloudtaskspb.HttpMethod_PATCH
			return t
		}(),
		"HTTP GET without body":    get,
		"schedule exactly 30 days": scheduled,
		"schedule in the past":     past,
		"OIDC token":               oidc,
		"task id of 500 chars":     named(httpTask("http://127.0.0.1/x", nil), queueA+"/tasks/"+strings.Repeat("A_-9", 125)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: task})
			require.NoError(t, err)
		})
	}
}

func TestTaskSizeLimitIsExact(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	// Find the body length that makes the task exactly MaxTaskSize bytes.
	sized := func(n int) *cloudtaskspb.Task {
		return named(httpTask("http://127.0.0.1/x", make([]byte, n)), queueA+"/tasks/sized")
	}
	n := cloudtaskstest.MaxTaskSize - proto.Size(sized(0))
	for proto.Size(sized(n)) > cloudtaskstest.MaxTaskSize {
		n--
	}
	require.Equal(t, cloudtaskstest.MaxTaskSize, proto.Size(sized(n)))
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: sized(n + 1)})
	requireCode(t, codes.InvalidArgument, err)
	_, err = client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: sized(n)})
	require.NoError(t, err)
}
