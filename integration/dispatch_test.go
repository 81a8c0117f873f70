package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	for _, t := range []any{dispatchItem{}, routedItem{}, keyedItem{}, appEngineItem{}} {
		beam.RegisterType(reflect.TypeOf(t))
	}
	register.Function1x1(routedItemFor)
	register.Function1x1(appEngineItemFor)
}

// dispatchItem is a plain element: two JSON body fields.
type dispatchItem struct {
	ID  string `json:"id"`
	Qty int    `json:"qty"`
}

// routedItem carries its own URL and headers.
type routedItem struct {
	ID      string            `json:"id"`
	URL     string            `cloudtasks:"url"`
	Headers map[string]string `cloudtasks:"headers"`
}

// routedItemFor builds a routedItem from "<id> <url>". Beam cannot Create a struct with a map
// field, so the elements are made by this function on the worker.
func routedItemFor(spec string) routedItem {
	id, url, _ := strings.Cut(spec, " ")
	return routedItem{ID: id, URL: url, Headers: map[string]string{"x-trace": "trace-" + id}}
}

// keyedItem names its task.
type keyedItem struct {
	ID  string `json:"id"`
	Key string `cloudtasks:"task-id"`
}

// appEngineItem carries an App Engine handler path and service.
type appEngineItem struct {
	ID      string  `json:"id"`
	URI     string  `cloudtasks:"relative-uri"`
	Service *string `cloudtasks:"app-engine-service"`
}

// appEngineItemFor builds an appEngineItem from "<id>[ <relative uri> <service>]"; without the
// optional parts the target's fixed URI and routing apply.
func appEngineItemFor(spec string) appEngineItem {
	parts := strings.Fields(spec)
	item := appEngineItem{ID: parts[0]}
	if len(parts) == 3 {
		item.URI, item.Service = parts[1], &parts[2]
	}
	return item
}

// runWrites builds one pipeline with each of builds and runs them one after the other on the
// test runner (prism, or --runner=direct), returning the cloudtasksio counters by name, summed
// over the pipelines and their steps. A test whose counters cover several Writes gives each
// its own builder: the direct runner keys a counter by the DoFn's type and its name, not by
// step, so in one pipeline only the first Write's counters would be reported
// (docs/testing.md).
func runWrites(t *testing.T, builds ...func(s beam.Scope)) map[string]int64 {
	t.Helper()
	counters := map[string]int64{}
	for _, build := range builds {
		p, s := beam.NewPipelineWithRoot()
		build(s)
		pr, err := ptest.RunWithMetrics(p)
		require.NoError(t, err)
		for _, c := range pr.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == cloudtasksio.MetricsNamespace }).Counters() {
			counters[c.Name()] += c.Result()
		}
	}
	return counters
}

// assertCloudTasksHeaders checks the headers Cloud Tasks adds to the first attempt of an HTTP
// task in queue q.
func assertCloudTasksHeaders(t *testing.T, d delivery, q cloudtasksio.Queue) {
	t.Helper()
	h := d.Header
	assert.Equal(t, q.Name, h.Get("X-CloudTasks-QueueName"), "queue name header of %s", d.Path)
	assert.Regexp(t, `^[A-Za-z0-9_-]+$`, h.Get("X-CloudTasks-TaskName"), "task name header of %s", d.Path)
	assert.Equal(t, "0", h.Get("X-CloudTasks-TaskRetryCount"), "first attempt of %s", d.Path)
	assert.Equal(t, "0", h.Get("X-CloudTasks-TaskExecutionCount"), "first attempt of %s", d.Path)
	eta, err := strconv.ParseFloat(h.Get("X-CloudTasks-TaskETA"), 64)
	assert.NoError(t, err, "ETA header of %s", d.Path)
	assert.Greater(t, eta, 1e9, "the ETA is seconds since the epoch")
	assert.Contains(t, h.Get("User-Agent"), "Google-Cloud-Tasks")
}

func TestDispatchHTTPRequestsArriveAsBuilt(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	q := b.newQueue(t, nil)
	target := func(path, method string, headers map[string]string) *cloudtasksio.HTTPTarget {
		return &cloudtasksio.HTTPTarget{URL: rec.URL + path, Method: method, Headers: headers, Body: formats.JSON()}
	}
	items := []any{dispatchItem{ID: "a", Qty: 1}, dispatchItem{ID: "b", Qty: 2}}
	counters := runWrites(t, func(s beam.Scope) {
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
			HTTP: target("/post", "", map[string]string{"Content-Type": "application/json", "X-Custom": "custom-value"})},
			beam.Create(s, items...))
	}, func(s beam.Scope) {
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
			HTTP: target("/put", "PUT", nil)},
			beam.Create(s, dispatchItem{ID: "c", Qty: 3}))
	}, func(s beam.Scope) {
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
			HTTP: target("/get?view=full", "GET", nil)},
			beam.Create(s, dispatchItem{ID: "d", Qty: 4}))
	}, func(s beam.Scope) {
		routed := beam.ParDo(s, routedItemFor, beam.Create(s, "e "+rec.URL+"/items/e", "f "+rec.URL+"/items/f?page=2"))
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
			HTTP: &cloudtasksio.HTTPTarget{Headers: map[string]string{"X-Trace": "fixed", "X-Fixed": "kept"}, Body: formats.JSON()}},
			routed)
	})
	require.Equal(t, int64(6), counters[cloudtasksio.MetricRecordsSend])

	got := byPath(rec.waitFor(t, b, 6))
	b.waitQueueEmpty(t, q)
	require.Len(t, rec.deliveries(), 6, "one delivery per element")

	t.Run("POST body and custom headers", func(t *testing.T) {
		posts := got["/post"]
		require.Len(t, posts, 2)
		var bodies []string
		for _, d := range posts {
			assert.Equal(t, "POST", d.Method)
			assert.Equal(t, "application/json", d.Header.Get("Content-Type"))
			assert.Equal(t, "custom-value", d.Header.Get("X-Custom"))
			bodies = append(bodies, string(d.Body))
		}
		assert.ElementsMatch(t, []string{`{"id":"a","qty":1}`, `{"id":"b","qty":2}`}, bodies)
	})
	t.Run("PUT body, with the json format's media type", func(t *testing.T) {
		require.Len(t, got["/put"], 1)
		assert.Equal(t, "PUT", got["/put"][0].Method)
		assert.Equal(t, `{"id":"c","qty":3}`, string(got["/put"][0].Body))
		assert.Equal(t, "application/json", got["/put"][0].Header.Get("Content-Type"), "no header set it: the format sends its own")
	})
	t.Run("GET with an empty body", func(t *testing.T) {
		require.Len(t, got["/get"], 1)
		d := got["/get"][0]
		assert.Equal(t, "GET", d.Method)
		assert.Equal(t, "view=full", d.RawQuery)
		assert.Empty(t, d.Body, "a GET carries no body even with a body format configured")
		assert.Empty(t, d.Header.Get("Content-Type"), "nor a Content-Type")
	})
	t.Run("per-element URL and headers", func(t *testing.T) {
		e, f := got["/items/e"], got["/items/f"]
		require.Len(t, e, 1)
		require.Len(t, f, 1)
		assert.Equal(t, `{"id":"e"}`, string(e[0].Body), "metadata fields stay out of the body")
		assert.Equal(t, "page=2", f[0].RawQuery)
		assert.Equal(t, "trace-e", e[0].Header.Get("X-Trace"), "an element header replaces the fixed one of the same name")
		assert.Equal(t, "trace-f", f[0].Header.Get("X-Trace"))
		assert.Equal(t, "kept", e[0].Header.Get("X-Fixed"))
	})
	t.Run("Cloud Tasks headers", func(t *testing.T) {
		names := map[string]bool{}
		for _, d := range rec.deliveries() {
			assertCloudTasksHeaders(t, d, q)
			names[d.Header.Get("X-CloudTasks-TaskName")] = true
		}
		assert.Len(t, names, 6, "every unnamed task gets its own generated name")
	})
}

// jwtClaims decodes the claims of a bearer JWT without checking its signature.
func jwtClaims(t *testing.T, authorization string) map[string]any {
	t.Helper()
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	require.True(t, ok, "Authorization %q is not a bearer token", authorization)
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "a JWT has three parts")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(payload, &claims))
	return claims
}

func TestDispatchOIDCTokenCarriesServiceAccountAndAudience(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	q := b.newQueue(t, nil)
	const account = "invoker@integration.iam.gserviceaccount.com"
	runWrites(t, func(s beam.Scope) {
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr, HTTP: &cloudtasksio.HTTPTarget{
			URL: rec.URL + "/with-audience", OIDC: &cloudtasksio.OIDCToken{ServiceAccountEmail: account, Audience: "https://orders.example.com"}}},
			beam.Create(s, dispatchItem{ID: "a"}))
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr, HTTP: &cloudtasksio.HTTPTarget{
			URL: rec.URL + "/without-audience", OIDC: &cloudtasksio.OIDCToken{ServiceAccountEmail: account}}},
			beam.Create(s, dispatchItem{ID: "b"}))
	})
	got := byPath(rec.waitFor(t, b, 2))
	require.Len(t, got["/with-audience"], 1)
	require.Len(t, got["/without-audience"], 1)
	withAudience := got["/with-audience"][0].Header.Get("Authorization")
	withoutAudience := got["/without-audience"][0].Header.Get("Authorization")

	t.Run("claims", func(t *testing.T) {
		c := jwtClaims(t, withAudience)
		assert.Equal(t, account, c["email"])
		assert.Equal(t, "https://orders.example.com", c["aud"])
		c = jwtClaims(t, withoutAudience)
		assert.Equal(t, account, c["email"])
		assert.Equal(t, rec.URL+"/without-audience", c["aud"], "without an audience the token is for the URL")
	})
	t.Run("signature", func(t *testing.T) {
		needsCloudtaskstest(t, "OIDC signing key (Server.VerifyOIDCToken)")
		claims, err := b.Server.VerifyOIDCToken(withAudience)
		require.NoError(t, err)
		assert.Equal(t, account, claims.Email)
		assert.Equal(t, "https://orders.example.com", claims.Audience)
		claims, err = b.Server.VerifyOIDCToken(withoutAudience)
		require.NoError(t, err)
		assert.Equal(t, rec.URL+"/without-audience", claims.Audience)
	})
}

func TestDispatchAppEngineRelativeURIAndRouting(t *testing.T) {
	needsCloudtaskstest(t, "App Engine dispatch to a per-test base URL (WithAppEngineURL)")
	rec := newRecorder(t)
	b := newBackend(t, cloudtaskstest.WithAppEngineURL(rec.URL))
	q := b.newQueue(t, nil)
	runWrites(t, func(s beam.Scope) {
		items := beam.ParDo(s, appEngineItemFor, beam.Create(s, "fixed", "routed /billing/run?full=1 billing"))
		cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr, AppEngine: &cloudtasksio.AppEngineTarget{
			RelativeURI: "/tasks/orders?src=it",
			Headers:     map[string]string{"Content-Type": "application/json"},
			Routing:     &cloudtasksio.AppEngineRouting{Service: "worker", Version: "v1"},
			Body:        formats.JSON(),
		}}, items)
	})
	got := byPath(rec.waitFor(t, b, 2))
	host := strings.TrimPrefix(rec.URL, "http://")

	fixed := got["/tasks/orders"]
	require.Len(t, fixed, 1)
	assert.Equal(t, "POST", fixed[0].Method)
	assert.Equal(t, "src=it", fixed[0].RawQuery)
	assert.Equal(t, "v1.worker."+host, fixed[0].Host, "routing reaches the handler in the Host header")
	assert.Equal(t, `{"id":"fixed"}`, string(fixed[0].Body))
	assert.Equal(t, "application/json", fixed[0].Header.Get("Content-Type"))
	assert.Equal(t, q.Name, fixed[0].Header.Get("X-AppEngine-QueueName"))
	assert.NotEmpty(t, fixed[0].Header.Get("X-AppEngine-TaskName"))

	routed := got["/billing/run"]
	require.Len(t, routed, 1)
	assert.Equal(t, "full=1", routed[0].RawQuery)
	assert.Equal(t, "v1.billing."+host, routed[0].Host, "an element's service replaces the fixed one; the version stays")
	assert.Equal(t, `{"id":"routed"}`, string(routed[0].Body))
}

func TestDispatchNamedTasksDeliverOncePerKeyAcrossRuns(t *testing.T) {
	rec := newRecorder(t)
	b := newBackend(t)
	q := b.newQueue(t, nil)
	keyed := func(ids ...string) []any {
		out := make([]any, len(ids))
		for i, id := range ids {
			out[i] = keyedItem{ID: id, Key: "order-" + id}
		}
		return out
	}
	write := func(items []any) map[string]int64 {
		return runWrites(t, func(s beam.Scope) {
			cloudtasksio.Write(s, cloudtasksio.Config{Queue: q, EmulatorEndpoint: b.Addr,
				HTTP: &cloudtasksio.HTTPTarget{URL: rec.URL + "/orders", Body: formats.JSON()}}, beam.Create(s, items...))
		})
	}

	first := write(keyed("1", "2", "3", "4", "5"))
	assert.Equal(t, int64(5), first[cloudtasksio.MetricRecordsSend])
	rec.waitFor(t, b, 5)
	b.waitQueueEmpty(t, q)

	// The replay meets the names of tasks that were already delivered; only "6" is new.
	second := write(keyed("1", "2", "3", "4", "5", "6"))
	assert.Equal(t, int64(6), second[cloudtasksio.MetricRecordsSend], "a deduplicated task counts as sent")
	assert.Equal(t, int64(5), second[cloudtasksio.MetricTasksDeduplicated])
	rec.waitFor(t, b, 6)
	b.waitQueueEmpty(t, q) // nothing else can still arrive

	perTask := map[string][]string{}
	for _, d := range rec.deliveries() {
		name := d.Header.Get("X-CloudTasks-TaskName")
		perTask[name] = append(perTask[name], string(d.Body))
	}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprint(i)
		bodies := perTask[cloudtasksio.TaskID("order-"+id)]
		assert.Equal(t, []string{`{"id":"` + id + `"}`}, bodies, "key order-%s is delivered exactly once, under its TaskID", id)
	}
	assert.Len(t, perTask, 6, "no other task was delivered")
}
