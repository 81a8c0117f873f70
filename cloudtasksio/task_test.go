package cloudtasksio

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// scheduledOrder carries a per-element method and schedule time for an HTTP target.
type scheduledOrder struct {
	ID     string    `json:"id"`
	Method string    `cloudtasks:"http-method"`
	When   time.Time `cloudtasks:"schedule-time"`
}

// routedAppEngineOrder carries a per-element relative URI and version for an App Engine target.
type routedAppEngineOrder struct {
	ID      string  `json:"id"`
	URI     string  `cloudtasks:"relative-uri"`
	Version *string `cloudtasks:"app-engine-version"`
}

// builderFor compiles cfg for the type of elem and returns its task builder with a fixed clock.
func builderFor(t *testing.T, cfg Config, elem any, now time.Time) *taskBuilder {
	t.Helper()
	cfg.Queue = Queue{Project: "p", Location: "l", Name: "q"}
	spec, err := compile(cfg, reflect.TypeOf(elem))
	require.NoError(t, err)
	b, err := newTaskBuilder(spec, reflect.TypeOf(elem))
	require.NoError(t, err)
	b.now = func() time.Time { return now }
	return b
}

func TestPerElementMethodAndScheduleTimeShapeTheHTTPTask(t *testing.T) {
	now := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	b := builderFor(t, Config{HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}}, scheduledOrder{}, now)

	task, _, err := b.build(scheduledOrder{ID: "1"})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.HttpMethod_POST, task.GetHttpRequest().GetHttpMethod(), "no method field value: the fixed method")
	assert.Equal(t, `{"id":"1"}`, string(task.GetHttpRequest().GetBody()))
	assert.Nil(t, task.GetScheduleTime(), "a zero schedule time means now")

	later := now.Add(2 * time.Hour)
	task, _, err = b.build(scheduledOrder{ID: "2", Method: "get", When: later})
	require.NoError(t, err)
	assert.Equal(t, cloudtaskspb.HttpMethod_GET, task.GetHttpRequest().GetHttpMethod())
	assert.Empty(t, task.GetHttpRequest().GetBody(), "GET carries no body")
	assert.Equal(t, later, task.GetScheduleTime().AsTime())

	_, _, err = b.build(scheduledOrder{ID: "3", Method: "FETCH"})
	var ef *elementFailure
	require.True(t, errors.As(err, &ef), "an unusable method field reaches the failure policy: %v", err)
	assert.Equal(t, CodeSerialization, ef.code)
	assert.Nil(t, ef.task)

	_, _, err = b.build(scheduledOrder{ID: "4", When: now.Add(31 * 24 * time.Hour)})
	require.True(t, errors.As(err, &ef), "a schedule time too far ahead reaches the failure policy: %v", err)
	assert.Equal(t, CodeInvalidArgument, ef.code)
	require.NotNil(t, ef.task, "with the task it would have sent")
	assert.Contains(t, ef.err.Error(), "30 days ahead")
}

func TestPerElementRelativeURIAndVersionShapeTheAppEngineTask(t *testing.T) {
	v1 := "v1"
	b := builderFor(t, Config{AppEngine: &AppEngineTarget{RelativeURI: "/orders", Body: formats.JSON(),
		Routing: &AppEngineRouting{Service: "worker", Version: "v2"}}}, routedAppEngineOrder{}, time.Now())

	task, _, err := b.build(routedAppEngineOrder{ID: "1"})
	require.NoError(t, err)
	req := task.GetAppEngineHttpRequest()
	assert.Equal(t, "/orders", req.GetRelativeUri())
	assert.Equal(t, "worker", req.GetAppEngineRouting().GetService())
	assert.Equal(t, "v2", req.GetAppEngineRouting().GetVersion())

	task, _, err = b.build(routedAppEngineOrder{ID: "2", URI: "/orders/2?rush=1", Version: &v1})
	require.NoError(t, err)
	req = task.GetAppEngineHttpRequest()
	assert.Equal(t, "/orders/2?rush=1", req.GetRelativeUri())
	assert.Equal(t, "v1", req.GetAppEngineRouting().GetVersion())
	assert.Equal(t, "worker", req.GetAppEngineRouting().GetService(), "the other parts keep the fixed routing")

	_, _, err = b.build(routedAppEngineOrder{ID: "3", URI: "orders#top"})
	var ef *elementFailure
	require.True(t, errors.As(err, &ef), "a bad relative-uri field reaches the failure policy: %v", err)
	assert.Equal(t, CodeInvalidArgument, ef.code)
}

func TestTheOAuthTokenIsSetOnTheTask(t *testing.T) {
	b := builderFor(t, Config{HTTP: &HTTPTarget{URL: "https://tasks.googleapis.com/v2/x",
		OAuth: &OAuthToken{ServiceAccountEmail: "caller@p.iam.gserviceaccount.com", Scope: "https://www.googleapis.com/auth/cloud-tasks"}}}, eoPlainOrder{}, time.Now())
	task, _, err := b.build(eoPlainOrder{ID: "1"})
	require.NoError(t, err)
	req := task.GetHttpRequest()
	require.NotNil(t, req.GetOauthToken(), "the task asks Cloud Tasks for an OAuth token")
	assert.Equal(t, "caller@p.iam.gserviceaccount.com", req.GetOauthToken().GetServiceAccountEmail())
	assert.Equal(t, "https://www.googleapis.com/auth/cloud-tasks", req.GetOauthToken().GetScope())
	assert.Nil(t, req.GetOidcToken(), "at most one token")
}

func TestABlankOAuthServiceAccountIsRejectedAtConstruction(t *testing.T) {
	for _, email := range []string{"", "  "} {
		_, err := compile(Config{Queue: Queue{Project: "p", Location: "l", Name: "q"},
			HTTP: &HTTPTarget{URL: "https://example.com/", OAuth: &OAuthToken{ServiceAccountEmail: email}}}, typeOf(eoPlainOrder{}))
		require.Error(t, err, "%q", email)
		assert.Contains(t, err.Error(), "HTTPTarget.OAuth.ServiceAccountEmail is blank")
	}
}

func TestAllEmptyAppEngineRoutingIsLeftUnset(t *testing.T) {
	b := builderFor(t, Config{AppEngine: &AppEngineTarget{RelativeURI: "/orders", Routing: &AppEngineRouting{}}}, eoPlainOrder{}, time.Now())
	task, _, err := b.build(eoPlainOrder{ID: "1"})
	require.NoError(t, err)
	assert.Nil(t, task.GetAppEngineHttpRequest().GetAppEngineRouting(), "an empty routing is not sent: App Engine routes by its defaults")

	cleared := ""
	b = builderFor(t, Config{AppEngine: &AppEngineTarget{RelativeURI: "/orders", Routing: &AppEngineRouting{Version: "v2"}}}, routedAppEngineOrder{}, time.Now())
	task, _, err = b.build(routedAppEngineOrder{ID: "2", Version: &cleared})
	require.NoError(t, err)
	assert.Nil(t, task.GetAppEngineHttpRequest().GetAppEngineRouting(), "a routing whose every part the element cleared is not sent either")
}

// deadlineOrder carries a per-element dispatch deadline; it fits both target families.
type deadlineOrder struct {
	ID       string        `json:"id"`
	Deadline time.Duration `cloudtasks:"dispatch-deadline"`
}

func TestPerElementDispatchDeadlineOverridesTheFixedOneWithinTheFamilyBounds(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name     string
		cfg      Config
		max      time.Duration // the family's upper bound, accepted
		tooLong  time.Duration // just above it
		isFamily func(*cloudtaskspb.Task) bool
	}{
		{"http", Config{HTTP: &HTTPTarget{URL: "https://example.com/orders", DispatchDeadline: time.Minute}},
			30 * time.Minute, 30*time.Minute + time.Second, func(t *cloudtaskspb.Task) bool { return t.GetHttpRequest() != nil }},
		{"app-engine", Config{AppEngine: &AppEngineTarget{RelativeURI: "/orders", DispatchDeadline: time.Minute}},
			24*time.Hour + 15*time.Second, 24*time.Hour + 16*time.Second, func(t *cloudtaskspb.Task) bool { return t.GetAppEngineHttpRequest() != nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := builderFor(t, c.cfg, deadlineOrder{}, now)
			for _, ok := range []struct{ field, want time.Duration }{
				{0, time.Minute}, // zero keeps the target's fixed deadline
				{15 * time.Second, 15 * time.Second},
				{c.max, c.max},
			} {
				task, _, err := b.build(deadlineOrder{ID: "1", Deadline: ok.field})
				require.NoError(t, err, "field %v", ok.field)
				assert.True(t, c.isFamily(task), "a %s task", c.name)
				assert.Equal(t, ok.want, task.GetDispatchDeadline().AsDuration(), "field %v", ok.field)
			}
			for _, bad := range []time.Duration{14 * time.Second, c.tooLong, -time.Minute} {
				_, _, err := b.build(deadlineOrder{ID: "2", Deadline: bad})
				var ef *elementFailure
				require.True(t, errors.As(err, &ef), "an out-of-bounds dispatch-deadline field %v reaches the failure policy: %v", bad, err)
				assert.Equal(t, CodeSerialization, ef.code, "like every other unusable metadata value")
				assert.Nil(t, ef.task)
				assert.ErrorContains(t, ef, "dispatch-deadline field")
				assert.ErrorContains(t, ef, "outside [15s, "+c.max.String()+"]")
			}
		})
	}
}

func TestWithoutAnyDispatchDeadlineTheTaskLeavesItToTheService(t *testing.T) {
	for _, cfg := range []Config{
		{HTTP: &HTTPTarget{URL: "https://example.com/orders"}},
		{AppEngine: &AppEngineTarget{RelativeURI: "/orders"}},
	} {
		task, _, err := builderFor(t, cfg, deadlineOrder{}, time.Now()).build(deadlineOrder{ID: "1"})
		require.NoError(t, err)
		assert.Nil(t, task.GetDispatchDeadline(), "no field value and no fixed deadline: the service default")
	}
}

func TestTheFixedAppEngineDispatchDeadlineIsSetAndCheckedAtConstruction(t *testing.T) {
	b := builderFor(t, Config{AppEngine: &AppEngineTarget{RelativeURI: "/orders", DispatchDeadline: 2 * time.Hour}}, eoPlainOrder{}, time.Now())
	task, _, err := b.build(eoPlainOrder{ID: "1"})
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, task.GetDispatchDeadline().AsDuration(), "App Engine allows more than the HTTP 30m")

	for _, d := range []time.Duration{time.Second, 25 * time.Hour, -time.Minute} {
		_, err := compile(Config{Queue: Queue{Project: "p", Location: "l", Name: "q"},
			AppEngine: &AppEngineTarget{RelativeURI: "/orders", DispatchDeadline: d}}, typeOf(eoPlainOrder{}))
		require.Error(t, err, "%v", d)
		assert.Contains(t, err.Error(), "AppEngineTarget.DispatchDeadline")
		assert.Contains(t, err.Error(), "outside [15s, 24h0m15s]")
	}
}

// headedOrder carries per-element headers, which may set the Content-Type.
type headedOrder struct {
	ID      string            `json:"id"`
	Headers map[string]string `cloudtasks:"headers"`
}

// Each format but raw sends its media type when no header sets a Content-Type; a header of the
// user's, fixed or per element and in any letter case, always wins; a method without a body
// sends none.
func TestFormatsSendTheirMediaTypeUnlessAHeaderSetsOne(t *testing.T) {
	now := time.Now()
	http := func(body formats.Format, headers map[string]string) Config {
		return Config{HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: body, Headers: headers}}
	}
	headersOf := func(t *testing.T, cfg Config, elem headedOrder) map[string]string {
		t.Helper()
		task, _, err := builderFor(t, cfg, elem, now).build(elem)
		require.NoError(t, err)
		if req := task.GetAppEngineHttpRequest(); req != nil {
			return req.GetHeaders()
		}
		return task.GetHttpRequest().GetHeaders()
	}
	for _, c := range []struct {
		name string
		cfg  Config
		elem headedOrder
		want map[string]string
	}{
		{"json", http(formats.JSON(), nil), headedOrder{ID: "1"}, map[string]string{"Content-Type": "application/json"}},
		{"csv", http(formats.CSV(), nil), headedOrder{ID: "1"}, map[string]string{"Content-Type": "text/csv"}},
		{"raw sends none", Config{HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.Raw()}}, headedOrder{ID: "1"}, nil},
		{"form owns its own", http(formats.FormURLEncoded(), nil), headedOrder{ID: "1"}, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		{"no body format", http(formats.Format{}, nil), headedOrder{ID: "1"}, nil},
		{"fixed header wins", http(formats.JSON(), map[string]string{"content-type": "application/vnd.orders+json"}), headedOrder{ID: "1"},
			map[string]string{"content-type": "application/vnd.orders+json"}},
		{"element header wins", http(formats.JSON(), map[string]string{"X-Trace": "t"}), headedOrder{ID: "1", Headers: map[string]string{"CONTENT-TYPE": "text/plain"}},
			map[string]string{"X-Trace": "t", "CONTENT-TYPE": "text/plain"}},
		{"other headers are kept", http(formats.CSV(), map[string]string{"X-Trace": "t"}), headedOrder{ID: "1"},
			map[string]string{"X-Trace": "t", "Content-Type": "text/csv"}},
		{"app engine too", Config{AppEngine: &AppEngineTarget{RelativeURI: "/orders", Body: formats.JSON()}}, headedOrder{ID: "1"},
			map[string]string{"Content-Type": "application/json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, headersOf(t, c.cfg, c.elem))
		})
	}
	t.Run("a method without a body sends none", func(t *testing.T) {
		cfg := Config{HTTP: &HTTPTarget{URL: "https://example.com/orders", Method: "GET", Body: formats.JSON()}}
		assert.Empty(t, headersOf(t, cfg, headedOrder{ID: "1"}))
	})
}

// A string element under the json format is a JSON document: sent unchanged, with the json
// media type; one that is not a JSON value goes to the failure policy without its text.
func TestPlainStringElementIsSentAsAJSONDocument(t *testing.T) {
	b := builderFor(t, Config{HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}}, "", time.Now())
	task, _, err := b.build(`{"id": "1", "items": [2, 3]}`)
	require.NoError(t, err)
	assert.Equal(t, `{"id": "1", "items": [2, 3]}`, string(task.GetHttpRequest().GetBody()), "not encoded again as a JSON string")
	assert.Equal(t, map[string]string{"Content-Type": "application/json"}, task.GetHttpRequest().GetHeaders())

	_, _, err = b.build(`{"id": "secret"`)
	var ef *elementFailure
	require.True(t, errors.As(err, &ef), "%v", err)
	assert.Equal(t, CodeSerialization, ef.code)
	assert.ErrorContains(t, ef.err, "not a JSON document")
	assert.NotContains(t, ef.err.Error(), "secret")
}
