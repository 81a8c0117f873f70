package cloudtasksio

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

func TestEmulatorEndpointErrorsNameTheField(t *testing.T) {
	err := Config{EmulatorEndpoint: "localhost"}.checkCredentials()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Config.EmulatorEndpoint")
	assert.NoError(t, Config{EmulatorEndpoint: "localhost:8123"}.checkCredentials())
}

func TestCheckHeaders(t *testing.T) {
	require.NoError(t, checkHeaders("Headers", map[string]string{"Content-Type": "application/json", "X-Trace": "1"}, nil))
	assert.ErrorContains(t, checkHeaders("Headers", map[string]string{"X-A": "1", "x-a": "2"}, nil), "same name ignoring case")
	assert.ErrorContains(t, checkHeaders("Headers", map[string]string{"Bad Name": "1"}, nil), "not a valid HTTP header name")
	assert.ErrorContains(t, checkHeaders("Headers", map[string]string{"X-A": "1\r\nX-B: 2"}, nil), "CR, LF or NUL")
	assert.ErrorContains(t, checkHeaders("Headers", map[string]string{"X-Big": strings.Repeat("v", maxHeaderBytes)}, nil), "limit")
	for _, reserved := range []string{"Host", "content-length", "X-Google-Foo", "x-appengine-queuename"} {
		err := checkHeaders("AppEngineTarget.Headers", map[string]string{reserved: "v"}, appEngineReservedHeader)
		assert.ErrorContains(t, err, "cannot be overridden", reserved)
		assert.NoError(t, checkHeaders("HTTPTarget.Headers", map[string]string{reserved: "v"}, nil), reserved)
	}
}

func httpTask(method cloudtaskspb.HttpMethod, body string) *cloudtaskspb.Task {
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://example.com/x", HttpMethod: method, Body: []byte(body)}}}
}

func TestValidateTask(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	require.NoError(t, validateTask(httpTask(cloudtaskspb.HttpMethod_POST, "{}"), now))
	require.NoError(t, validateTask(httpTask(cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED, "{}"), now), "unspecified means POST")
	require.NoError(t, validateTask(httpTask(cloudtaskspb.HttpMethod_GET, ""), now))
	assert.ErrorContains(t, validateTask(httpTask(cloudtaskspb.HttpMethod_GET, "x"), now), "body under GET")

	ahead := httpTask(cloudtaskspb.HttpMethod_POST, "")
	ahead.ScheduleTime = timestamppb.New(now.Add(30*24*time.Hour + time.Second))
	assert.ErrorContains(t, validateTask(ahead, now), "30 days ahead")
	ahead.ScheduleTime = timestamppb.New(now.Add(30 * 24 * time.Hour))
	assert.NoError(t, validateTask(ahead, now))

	dl := httpTask(cloudtaskspb.HttpMethod_POST, "")
	dl.DispatchDeadline = durationpb.New(31 * time.Minute)
	assert.ErrorContains(t, validateTask(dl, now), "dispatch_deadline")
	dl.DispatchDeadline = durationpb.New(14 * time.Second)
	assert.ErrorContains(t, validateTask(dl, now), "dispatch_deadline")

	ae := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
		RelativeUri: "/t", HttpMethod: cloudtaskspb.HttpMethod_PATCH, Body: []byte("x")}}}
	assert.ErrorContains(t, validateTask(ae, now), "only POST and PUT")
	ae.GetAppEngineHttpRequest().HttpMethod = cloudtaskspb.HttpMethod_PUT
	assert.NoError(t, validateTask(ae, now))
	ae.DispatchDeadline = durationpb.New(24 * time.Hour)
	assert.NoError(t, validateTask(ae, now), "App Engine allows up to 24h15s")
	ae.GetAppEngineHttpRequest().AppEngineRouting = &cloudtaskspb.AppEngineRouting{Host: "x.appspot.com"}
	assert.ErrorContains(t, validateTask(ae, now), "output only")

	assert.ErrorContains(t, validateTask(&cloudtaskspb.Task{}, now), "neither")

	oidc := httpTask(cloudtaskspb.HttpMethod_POST, "")
	oidc.GetHttpRequest().AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: " "}}
	assert.ErrorContains(t, validateTask(oidc, now), "service_account_email is blank")
}

func TestMergeHeadersKeepsTheElementSpelling(t *testing.T) {
	got := mergeHeaders(map[string]string{"X-Trace": "fixed", "Accept": "a"}, map[string]string{"x-trace": "elem"})
	assert.Equal(t, map[string]string{"x-trace": "elem", "Accept": "a"}, got)
}

func TestWithContentType(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	got, err := withContentType("h", map[string]string{"content-type": " Application/X-WWW-Form-URLEncoded "}, form)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Content-Type": form}, got)
	got, err = withContentType("h", nil, form)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Content-Type": form}, got)
	_, err = withContentType("h", map[string]string{"Content-Type": form + "; charset=utf-8"}, form)
	assert.ErrorContains(t, err, "Content-Type")
	_, err = withContentType("h", map[string]string{"Content-Type": "application/json"}, form)
	assert.ErrorContains(t, err, "Content-Type")
	assert.NotContains(t, err.Error(), "application/json", "the element's own value is not repeated")
	_, err = parseMethod("http-method field", "secret-method")
	assert.ErrorContains(t, err, "http-method field")
	assert.NotContains(t, err.Error(), "secret-method")
	got, err = withContentType("h", map[string]string{"Content-Type": "application/json"}, "")
	require.NoError(t, err)
	assert.Equal(t, "application/json", got["Content-Type"])
}

// The family rules of the metadata keys live here, not in the formats machinery: bodyformat
// only checks a schema against the list its caller gives. The table is DESIGN's metadata table.
func TestTargetFamiliesAcceptTheirMetadataKeys(t *testing.T) {
	const familyHTTP, familyAppEngine = "http", "app-engine"
	both := []string{familyHTTP, familyAppEngine}
	targets := map[string]target{familyHTTP: &HTTPTarget{}, familyAppEngine: &AppEngineTarget{}}
	for f, tg := range targets {
		assert.Equal(t, f, tg.family().name, "the %T target's family", tg)
	}
	accepted := map[string][]string{
		bodyformat.KeyURL:               {familyHTTP},
		bodyformat.KeyRelativeURI:       {familyAppEngine},
		bodyformat.KeyHTTPMethod:        both,
		bodyformat.KeyHeaders:           both,
		bodyformat.KeyAppEngineService:  {familyAppEngine},
		bodyformat.KeyAppEngineVersion:  {familyAppEngine},
		bodyformat.KeyAppEngineInstance: {familyAppEngine},
		bodyformat.KeyScheduleTime:      both,
		bodyformat.KeyDispatchDeadline:  both,
		bodyformat.KeyTaskID:            both,
	}
	assert.ElementsMatch(t, bodyformat.Keys(), slices.Collect(maps.Keys(accepted)), "every metadata key has a row")
	for key, families := range accepted {
		for _, f := range both {
			assert.Equal(t, slices.Contains(families, f), slices.Contains(targets[f].metadataKeys(), key), "key %q, %s targets", key, f)
		}
	}
	assert.NotContains(t, targets[familyHTTP].metadataKeys(), "nope")

	type withURL struct {
		Body string
		U    string `cloudtasks:"url"`
	}
	type withRelativeURI struct {
		R string `cloudtasks:"relative-uri"`
	}
	schemaOf := func(v any) *bodyformat.Schema {
		s, err := bodyformat.NewSchema(reflect.TypeOf(v))
		require.NoError(t, err)
		return s
	}
	assert.NoError(t, checkMetadata(targets[familyHTTP], schemaOf(withURL{})))
	assert.NoError(t, checkMetadata(targets[familyAppEngine], schemaOf(withRelativeURI{})))
	err := checkMetadata(targets[familyAppEngine], schemaOf(withURL{}))
	assert.ErrorContains(t, err, `field U (cloudtasks:"url")`)
	assert.ErrorContains(t, err, "key is not accepted by app-engine targets")
	err = checkMetadata(targets[familyHTTP], schemaOf(withRelativeURI{}))
	assert.ErrorContains(t, err, `field R (cloudtasks:"relative-uri")`)
	assert.ErrorContains(t, err, "key is not accepted by http targets")
}

// TestEachTargetFamilyRowNamesItsOwnField checks every row of the target family table against
// Config: its field holds its targets, get and fill reach that field, and its option keys are
// its own.
func TestEachTargetFamilyRowNamesItsOwnField(t *testing.T) {
	for _, f := range targetFamilies {
		field, ok := reflect.TypeFor[Config]().FieldByName(f.field)
		if assert.True(t, ok, "Config.%s", f.field) {
			assert.Equal(t, f.goType, field.Type.Elem().Name(), "the type of Config.%s", f.field)
		}
		assert.Nil(t, f.get(Config{}), "%s: an unset target", f.name)
		var c Config
		f.fill(&c)
		tg := f.get(c)
		if assert.NotNil(t, tg, "%s: the target fill sets", f.name) {
			assert.Same(t, reflect.ValueOf(c).FieldByName(f.field).Interface(), tg, "%s: get reads Config.%s", f.name, f.field)
			assert.Equal(t, f.name, tg.family().name)
			assert.Same(t, tg, c.target())
			assert.Equal(t, 1, c.taskBuilders())
		}
		for _, r := range f.options {
			assert.Equal(t, f.name, r.family, r.key)
			assert.True(t, strings.HasPrefix(r.key, f.name+"."), "%s: key %s", f.name, r.key)
			for _, path := range r.fields {
				assert.True(t, strings.HasPrefix(path, f.field+"."), "%s: key %s sets %s", f.name, r.key, path)
			}
		}
	}
	// A Config field holding a declarative target needs its row: without one, no rule reads it.
	rows := map[string]bool{}
	for _, f := range targetFamilies {
		rows[f.field] = true
	}
	for field := range reflect.TypeFor[Config]().Fields() {
		if field.Type.Implements(reflect.TypeFor[target]()) {
			assert.True(t, rows[field.Name], "Config.%s holds a target but has no row in targetFamilies (family.go)", field.Name)
		}
	}
	list := taskBuilderList(func(f string) string { return f })
	assert.True(t, strings.HasPrefix(list, "HTTP, AppEngine") && strings.HasSuffix(list, " and Serializer"),
		"the messages list the ways to build the task in table order, Serializer last: %s", list)
}
