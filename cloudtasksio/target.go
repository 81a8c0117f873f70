package cloudtasksio

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// This file holds every rule about what a valid task looks like. The same checks run at
// pipeline construction on the values that are fixed then (HTTPTarget, AppEngineTarget) and on
// every built task before it is sent, whichever way it was built.

const (
	maxURLLength       = 2083
	maxHeaderBytes     = 80 * 1024
	maxScheduleAhead   = 30 * 24 * time.Hour
	minDispatchDL      = 15 * time.Second
	maxHTTPDispatchDL  = 30 * time.Minute
	maxAppEngineDispDL = 24*time.Hour + 15*time.Second
)

// targetFamily is a Cloud Tasks target family: the kind of request a task carries.
type targetFamily int

const (
	// familyHTTP is an HTTP target: the task is sent to an absolute URL.
	familyHTTP targetFamily = iota + 1
	// familyAppEngine is an App Engine target: the task is sent to a handler of an App Engine
	// application in the queue's project and region.
	familyAppEngine
)

// String returns "http" or "app-engine" (the target.type option values).
func (f targetFamily) String() string {
	switch f {
	case familyHTTP:
		return "http"
	case familyAppEngine:
		return "app-engine"
	}
	return fmt.Sprintf("targetFamily(%d)", int(f))
}

// metadataKeys returns the `cloudtasks:"<key>"` metadata keys an element type may carry for
// targets of family f (docs/metadata.md); a key of the other family is a construction error.
func (f targetFamily) metadataKeys() []string {
	switch f {
	case familyHTTP:
		return []string{bodyformat.KeyURL, bodyformat.KeyHTTPMethod, bodyformat.KeyHeaders,
			bodyformat.KeyScheduleTime, bodyformat.KeyDispatchDeadline, bodyformat.KeyTaskID}
	case familyAppEngine:
		return []string{bodyformat.KeyRelativeURI, bodyformat.KeyHTTPMethod, bodyformat.KeyHeaders,
			bodyformat.KeyAppEngineService, bodyformat.KeyAppEngineVersion, bodyformat.KeyAppEngineInstance,
			bodyformat.KeyScheduleTime, bodyformat.KeyDispatchDeadline, bodyformat.KeyTaskID}
	}
	return nil
}

// checkMetadata rejects an element type that carries a metadata key targets of family f do
// not accept, naming the field and the key.
func (f targetFamily) checkMetadata(s *bodyformat.Schema) error {
	return s.CheckKeys(f.metadataKeys(), f.String()+" targets")
}

var methodsByName = map[string]cloudtaskspb.HttpMethod{
	"POST":    cloudtaskspb.HttpMethod_POST,
	"GET":     cloudtaskspb.HttpMethod_GET,
	"HEAD":    cloudtaskspb.HttpMethod_HEAD,
	"PUT":     cloudtaskspb.HttpMethod_PUT,
	"DELETE":  cloudtaskspb.HttpMethod_DELETE,
	"PATCH":   cloudtaskspb.HttpMethod_PATCH,
	"OPTIONS": cloudtaskspb.HttpMethod_OPTIONS,
}

// parseMethod maps a method name (any case; "" means POST) to the proto enum.
func parseMethod(field, name string) (cloudtaskspb.HttpMethod, error) {
	if name == "" {
		return cloudtaskspb.HttpMethod_POST, nil
	}
	if m, ok := methodsByName[strings.ToUpper(name)]; ok {
		return m, nil
	}
	return 0, fmt.Errorf("%s is not one of POST, GET, HEAD, PUT, DELETE, PATCH, OPTIONS", field)
}

// effectiveMethod reads a method from a task; the unspecified value means POST to the service.
func effectiveMethod(m cloudtaskspb.HttpMethod) cloudtaskspb.HttpMethod {
	if m == cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
		return cloudtaskspb.HttpMethod_POST
	}
	return m
}

// httpCarriesBody reports whether an HTTP target request has a body under method m.
func httpCarriesBody(m cloudtaskspb.HttpMethod) bool {
	switch effectiveMethod(m) {
	case cloudtaskspb.HttpMethod_POST, cloudtaskspb.HttpMethod_PUT, cloudtaskspb.HttpMethod_PATCH:
		return true
	}
	return false
}

// appEngineCarriesBody reports whether an App Engine request has a body under method m.
func appEngineCarriesBody(m cloudtaskspb.HttpMethod) bool {
	switch effectiveMethod(m) {
	case cloudtaskspb.HttpMethod_POST, cloudtaskspb.HttpMethod_PUT:
		return true
	}
	return false
}

// checkURL accepts an absolute http or https URL with a host, at most 2083 characters.
func checkURL(field, raw string) error {
	if raw == "" {
		return fmt.Errorf("%s is empty", field)
	}
	if len(raw) > maxURLLength {
		return fmt.Errorf("%s is %d characters long; the limit is %d", field, len(raw), maxURLLength)
	}
	if strings.IndexFunc(raw, func(r rune) bool { return isSpace(r) || r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("%s contains whitespace or control characters", field)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s is not a valid URL", field)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return fmt.Errorf("%s must be an absolute http or https URL", field)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%s has no host", field)
	}
	return nil
}

// checkRelativeURI accepts "" (the root) or a path starting with '/', with an optional query,
// no whitespace, no fragment and no authority, at most 2083 characters.
func checkRelativeURI(field, uri string) error {
	switch {
	case len(uri) > maxURLLength:
		return fmt.Errorf("%s is %d characters long; the limit is %d", field, len(uri), maxURLLength)
	case uri == "":
		return nil
	case uri[0] != '/':
		return fmt.Errorf("%s must be empty or start with '/'", field)
	case strings.HasPrefix(uri, "//"):
		return fmt.Errorf("%s must not name an authority (it starts with \"//\")", field)
	case strings.IndexFunc(uri, func(r rune) bool { return isSpace(r) || r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Errorf("%s contains whitespace or control characters", field)
	case strings.ContainsRune(uri, '#'):
		return fmt.Errorf("%s must not contain a fragment ('#')", field)
	}
	if _, err := url.ParseRequestURI(uri); err != nil {
		return fmt.Errorf("%s is not a valid path and query", field)
	}
	return nil
}

// isTokenByte reports whether c may appear in an HTTP header name (an RFC 9110 token).
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// checkHeaders validates header names and values, rejects names that are equal ignoring case,
// and for App Engine rejects the headers the service owns.
func checkHeaders(field string, headers map[string]string, appEngine bool) error {
	seen := make(map[string]string, len(headers))
	total := 0
	for _, name := range sortedKeys(headers) {
		value := headers[name]
		if name == "" {
			return fmt.Errorf("%s has an empty header name", field)
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return fmt.Errorf("%s header name %q is not a valid HTTP header name", field, name)
			}
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return fmt.Errorf("%s header %q has a value with CR, LF or NUL", field, name)
		}
		folded := strings.ToLower(name)
		if other, dup := seen[folded]; dup {
			return fmt.Errorf("%s has headers %q and %q, which are the same name ignoring case", field, other, name)
		}
		seen[folded] = name
		if appEngine && (folded == "host" || folded == "content-length" ||
			strings.HasPrefix(folded, "x-google-") || strings.HasPrefix(folded, "x-appengine-")) {
			return fmt.Errorf("%s header %q is set by Cloud Tasks or App Engine and cannot be overridden", field, name)
		}
		total += len(name) + len(value)
	}
	if total >= maxHeaderBytes {
		return fmt.Errorf("%s headers total %d bytes; the limit is under %d", field, total, maxHeaderBytes)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkDispatchDeadline(field string, d, max time.Duration) error {
	if d != 0 && (d < minDispatchDL || d > max) {
		return fmt.Errorf("%s %v is outside [%v, %v]", field, d, minDispatchDL, max)
	}
	return nil
}

// validateTask checks a built task against every rule the sink knows, before it is sent. A
// failure is data-shaped: the service would answer INVALID_ARGUMENT for it.
func validateTask(t *cloudtaskspb.Task, now time.Time) error {
	if t.GetScheduleTime() != nil {
		if err := t.GetScheduleTime().CheckValid(); err != nil {
			return fmt.Errorf("task schedule_time is not a valid timestamp")
		}
		if t.GetScheduleTime().AsTime().After(now.Add(maxScheduleAhead)) {
			return fmt.Errorf("task schedule_time %s is more than 30 days ahead", t.GetScheduleTime().AsTime().UTC().Format(time.RFC3339))
		}
	}
	if t.GetDispatchDeadline() != nil {
		if err := t.GetDispatchDeadline().CheckValid(); err != nil {
			return fmt.Errorf("task dispatch_deadline is not a valid duration")
		}
	}
	switch {
	case t.GetHttpRequest() != nil:
		r := t.GetHttpRequest()
		if err := checkURL("task http_request.url", r.GetUrl()); err != nil {
			return err
		}
		if _, ok := cloudtaskspb.HttpMethod_name[int32(r.GetHttpMethod())]; !ok {
			return fmt.Errorf("task http_request.http_method %d is not a known method", r.GetHttpMethod())
		}
		if len(r.GetBody()) > 0 && !httpCarriesBody(r.GetHttpMethod()) {
			return fmt.Errorf("task http_request has a body under %s; only POST, PUT and PATCH carry one", effectiveMethod(r.GetHttpMethod()))
		}
		if err := checkHeaders("task http_request.headers", r.GetHeaders(), false); err != nil {
			return err
		}
		if tok := r.GetOidcToken(); tok != nil && strings.TrimSpace(tok.GetServiceAccountEmail()) == "" {
			return fmt.Errorf("task http_request.oidc_token.service_account_email is blank")
		}
		if tok := r.GetOauthToken(); tok != nil && strings.TrimSpace(tok.GetServiceAccountEmail()) == "" {
			return fmt.Errorf("task http_request.oauth_token.service_account_email is blank")
		}
		if t.GetDispatchDeadline() != nil {
			return checkDispatchDeadline("task dispatch_deadline", t.GetDispatchDeadline().AsDuration(), maxHTTPDispatchDL)
		}
	case t.GetAppEngineHttpRequest() != nil:
		r := t.GetAppEngineHttpRequest()
		if err := checkRelativeURI("task app_engine_http_request.relative_uri", r.GetRelativeUri()); err != nil {
			return err
		}
		if _, ok := cloudtaskspb.HttpMethod_name[int32(r.GetHttpMethod())]; !ok {
			return fmt.Errorf("task app_engine_http_request.http_method %d is not a known method", r.GetHttpMethod())
		}
		if len(r.GetBody()) > 0 && !appEngineCarriesBody(r.GetHttpMethod()) {
			return fmt.Errorf("task app_engine_http_request has a body under %s; only POST and PUT carry one", effectiveMethod(r.GetHttpMethod()))
		}
		if err := checkHeaders("task app_engine_http_request.headers", r.GetHeaders(), true); err != nil {
			return err
		}
		if r.GetAppEngineRouting().GetHost() != "" {
			return fmt.Errorf("task app_engine_http_request.app_engine_routing.host is output only and must not be set")
		}
		if t.GetDispatchDeadline() != nil {
			return checkDispatchDeadline("task dispatch_deadline", t.GetDispatchDeadline().AsDuration(), maxAppEngineDispDL)
		}
	default:
		return fmt.Errorf("task has neither http_request nor app_engine_http_request")
	}
	return nil
}
