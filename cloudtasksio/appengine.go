package cloudtasksio

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// This file is the App Engine target family: its configuration, its rules, how it builds a
// task's request and its option keys.

// AppEngineTarget builds tasks that Cloud Tasks delivers to an App Engine application in the
// queue's own project and region.
type AppEngineTarget struct {
	// RelativeURI is the path and query of the handler: empty (the root) or starting with
	// "/". A `cloudtasks:"relative-uri"` field on the element overrides it per element.
	RelativeURI string
	// Method is the HTTP method: POST (the default), GET, HEAD, PUT, DELETE, PATCH or OPTIONS.
	Method string
	// Headers are sent with every task. Host, Content-Length, X-Google-* and X-AppEngine-*
	// belong to the service and are rejected.
	Headers map[string]string
	// Routing selects the service, version and instance; nil leaves the choice to App Engine.
	Routing *AppEngineRouting
	// Body encodes the element as the request body. It is used only under POST and PUT.
	Body formats.Format
	// DispatchDeadline bounds each dispatch attempt of the task. Zero leaves the service
	// default, which depends on the service's scaling type; otherwise it must lie in
	// [15s, 24h0m15s]. A `cloudtasks:"dispatch-deadline"` field on the element overrides it
	// per element.
	DispatchDeadline time.Duration
}

// AppEngineRouting selects where in the application a task runs. Empty parts are chosen by
// App Engine.
type AppEngineRouting struct{ Service, Version, Instance string }

// maxAppEngineDispDL is the longest dispatch deadline of an App Engine task.
const maxAppEngineDispDL = 24*time.Hour + 15*time.Second

func (t *AppEngineTarget) family() *targetFamily { return &appEngineFamily }

func (t *AppEngineTarget) body() *formats.Format { return &t.Body }

func (t *AppEngineTarget) metadataKeys() []string {
	return append([]string{bodyformat.KeyRelativeURI, bodyformat.KeyAppEngineService,
		bodyformat.KeyAppEngineVersion, bodyformat.KeyAppEngineInstance}, commonMetadataKeys...)
}

func (t *AppEngineTarget) fixed() fixedParts {
	return fixedParts{field: "AppEngine", method: t.Method, headers: t.Headers, body: t.Body, dispatchDeadline: t.DispatchDeadline,
		reserved: appEngineReservedHeader, maxDeadline: maxAppEngineDispDL}
}

// validate checks the App Engine target's rules that need no element type: the relative URI
// and the shared parts, with the headers App Engine owns reserved.
func (t *AppEngineTarget) validate() error {
	if err := checkRelativeURI(t.RelativeURI); err != nil {
		return errField("AppEngine.RelativeURI", "%v (accepted: empty for the root, or a path starting with '/' and an optional query)", err)
	}
	return t.fixed().validate()
}

// compile has nothing to check: an empty relative URI is the root.
func (t *AppEngineTarget) compile(*bodyformat.Schema) error { return nil }

// carriesBody reports whether an App Engine request has a body under method m: POST, PUT.
func (t *AppEngineTarget) carriesBody(m cloudtaskspb.HttpMethod) bool { return appEngineCarriesBody(m) }

func appEngineCarriesBody(m cloudtaskspb.HttpMethod) bool {
	switch effectiveMethod(m) {
	case cloudtaskspb.HttpMethod_POST, cloudtaskspb.HttpMethod_PUT:
		return true
	}
	return false
}

// appEngineReservedHeader reports the headers (lower case) Cloud Tasks and App Engine set
// themselves: Host, Content-Length, X-Google-* and X-AppEngine-*.
func appEngineReservedHeader(folded string) bool {
	return folded == "host" || folded == "content-length" ||
		strings.HasPrefix(folded, "x-google-") || strings.HasPrefix(folded, "x-appengine-")
}

// request builds the App Engine task: the element's relative-uri field overrides the fixed
// URI, and each routing field overrides its part of the fixed routing (an all-empty routing
// is left unset).
func (t *AppEngineTarget) request(p requestParts, md *bodyformat.Metadata) *cloudtaskspb.Task {
	req := &cloudtaskspb.AppEngineHttpRequest{RelativeUri: t.RelativeURI, HttpMethod: p.method, Headers: p.headers, Body: p.body}
	if md.RelativeURI != "" {
		req.RelativeUri = md.RelativeURI
	}
	var routing AppEngineRouting
	if t.Routing != nil {
		routing = *t.Routing
	}
	for _, o := range []struct {
		dst *string
		src *string
	}{{&routing.Service, md.Service}, {&routing.Version, md.Version}, {&routing.Instance, md.Instance}} {
		if o.src != nil {
			*o.dst = *o.src
		}
	}
	if routing != (AppEngineRouting{}) {
		req.AppEngineRouting = &cloudtaskspb.AppEngineRouting{Service: routing.Service, Version: routing.Version, Instance: routing.Instance}
	}
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: req}}
}

// checkAppEngineTask checks the request of a built App Engine task, however it was built.
func checkAppEngineTask(t *cloudtaskspb.Task) error {
	r := t.GetAppEngineHttpRequest()
	if err := checkRelativeURI(r.GetRelativeUri()); err != nil {
		return fmt.Errorf("task app_engine_http_request.relative_uri %w", err)
	}
	if err := checkRequest("app_engine_http_request", r.GetHttpMethod(), r.GetBody(), r.GetHeaders(), appEngineCarriesBody, "POST and PUT",
		appEngineReservedHeader); err != nil {
		return err
	}
	if r.GetAppEngineRouting().GetHost() != "" {
		return fmt.Errorf("task app_engine_http_request.app_engine_routing.host is output only and must not be set")
	}
	return checkTaskDispatchDeadline(t, maxAppEngineDispDL)
}

// checkRelativeURI accepts "" (the root) or a path starting with '/', with an optional query,
// no whitespace, no fragment and no authority, at most 2083 characters. The error follows the
// name of what carried the URI.
func checkRelativeURI(uri string) error {
	switch {
	case len(uri) > maxURLLength:
		return fmt.Errorf("is %d characters long; the limit is %d", len(uri), maxURLLength)
	case uri == "":
		return nil
	case uri[0] != '/':
		return fmt.Errorf("must be empty or start with '/'")
	case strings.HasPrefix(uri, "//"):
		return fmt.Errorf("must not name an authority (it starts with \"//\")")
	case strings.IndexFunc(uri, func(r rune) bool { return isSpace(r) || r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Errorf("contains whitespace or control characters")
	case strings.ContainsRune(uri, '#'):
		return fmt.Errorf("must not contain a fragment ('#')")
	}
	if _, err := url.ParseRequestURI(uri); err != nil {
		return fmt.Errorf("is not a valid path and query")
	}
	return nil
}

// appEngineFamily is the App Engine row of the target family table: target.type "app-engine",
// Config.AppEngine and the app-engine.* option keys.
var appEngineFamily = newFamily("app-engine", "AppEngine", func(c *Config) **AppEngineTarget { return &c.AppEngine },
	func() *AppEngineTarget { return &AppEngineTarget{Method: "POST"} }, []optionRow{
		optionOf("app-engine.relative-uri", "AppEngine.RelativeURI", textValue, func(c *Config) *string { return &c.AppEngine.RelativeURI }).
			blank().withHelp("accepted: empty for the root, or a path starting with '/' and an optional query"),
		optionOf("app-engine.method", "AppEngine.Method", methodValue, func(c *Config) *string { return &c.AppEngine.Method }),
		headerRow("app-engine.headers.", "AppEngine.Headers", func(c *Config) *map[string]string { return &c.AppEngine.Headers }),
		optionOf("app-engine.service", "AppEngine.Routing.Service", tokenValue, func(c *Config) *string { return &routingOf(c).Service }),
		optionOf("app-engine.version", "AppEngine.Routing.Version", tokenValue, func(c *Config) *string { return &routingOf(c).Version }),
		optionOf("app-engine.instance", "AppEngine.Routing.Instance", tokenValue, func(c *Config) *string { return &routingOf(c).Instance }),
		optionOf("app-engine.dispatch-deadline", "AppEngine.DispatchDeadline", durationValue,
			func(c *Config) *time.Duration { return &c.AppEngine.DispatchDeadline }),
	})

// routingOf returns the App Engine target's routing, created on first use.
func routingOf(c *Config) *AppEngineRouting {
	if c.AppEngine.Routing == nil {
		c.AppEngine.Routing = &AppEngineRouting{}
	}
	return c.AppEngine.Routing
}
