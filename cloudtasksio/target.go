package cloudtasksio

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file holds the rules every target family shares and the interface the task builder
// uses to reach a family. Each family's own rules, its request building, its per-task checks,
// its option keys and its row of the family table (family.go) live in its file: http.go and
// appengine.go. The same checks run at pipeline construction on the values fixed then and on
// every built task before it is sent, whichever way it was built.

const (
	maxURLLength     = 2083
	maxHeaderBytes   = 80 * 1024
	maxScheduleAhead = 30 * 24 * time.Hour
	minDispatchDL    = 15 * time.Second
)

// commonMetadataKeys are the `cloudtasks:"<key>"` metadata keys every family accepts; each
// family's metadataKeys adds its own.
var commonMetadataKeys = []string{bodyformat.KeyHTTPMethod, bodyformat.KeyHeaders,
	bodyformat.KeyScheduleTime, bodyformat.KeyDispatchDeadline, bodyformat.KeyTaskID}

// checkMetadata rejects an element type that carries a metadata key targets of t's family do
// not accept, naming the field and the key.
func checkMetadata(t target, s *bodyformat.Schema) error {
	return s.CheckKeys(t.metadataKeys(), t.family().name+" targets")
}

// target is a declarative target (*HTTPTarget or *AppEngineTarget) as the task builder sees
// it: its checks, its fixed parts and how it turns one element's parts into a task.
type target interface {
	// family returns the row of the target's family.
	family() *targetFamily
	// metadataKeys returns the metadata keys an element type may carry for the family's
	// targets, commonMetadataKeys included
	// (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/metadata.md); a key
	// of the other family is a construction error.
	metadataKeys() []string
	// validate checks the rules that need no element type, naming the Config field.
	validate() error
	// compile checks the rules that need the element type's schema.
	compile(s *bodyformat.Schema) error
	// body returns the target's body format, for the option keys to fill in.
	body() *formats.Format
	// fixed returns the parts every task of the target shares.
	fixed() fixedParts
	// carriesBody reports whether the family's request has a body under method m.
	carriesBody(m cloudtaskspb.HttpMethod) bool
	// request builds the task for one element from the resolved parts and its metadata.
	request(p requestParts, md *bodyformat.Metadata) *cloudtaskspb.Task
}

// fixedParts are what a target fixes for every task: the Config field path of the target
// (for errors), its method, headers, body format and dispatch deadline, with the family's
// reserved header names (lower case; nil for none) and longest dispatch deadline.
type fixedParts struct {
	field            string
	method           string
	headers          map[string]string
	body             formats.Format
	dispatchDeadline time.Duration

	reserved    func(folded string) bool
	maxDeadline time.Duration
}

// requestParts are what both families resolve the same way for one element: the method, the
// body (only when the method carries one) and the merged headers.
type requestParts struct {
	method  cloudtaskspb.HttpMethod
	body    []byte
	headers map[string]string
}

// validate checks the parts both families share: the method, the headers (with the
// family's reserved names), the body format, a Content-Type the format owns, and the
// dispatch deadline against the family's bound.
func (p fixedParts) validate() error {
	if _, err := parseMethod("", p.method); err != nil {
		method := p.field + ".Method"
		return errFields([]string{method}, func(n namer) string {
			_, err := parseMethod(n(method), p.method)
			return err.Error()
		})
	}
	if name, why := headerProblem(p.headers, p.reserved); why != "" {
		return errField(p.field+".Headers", "%s", why).withEntries(name)
	}
	if !p.body.IsZero() {
		if err := bodyformat.Validate(p.body); err != nil {
			fe := errFields([]string{p.field + ".Body"}, func(n namer) string { return n(p.field+".Body") + ": " + err.Error() })
			if oe := (*bodyformat.OptionError)(nil); errors.As(err, &oe) {
				fe.entries = oe.Options
			}
			return fe
		}
	}
	if name, conflict := contentTypeConflict(p.headers, bodyformat.ContentType(p.body)); conflict {
		owned := bodyformat.ContentType(p.body)
		return errField(p.field+".Headers", "set a Content-Type other than %q, which the body format %s sends (a different media type, or parameters; leave the header out)",
			owned, p.body.Name).withEntries(name)
	}
	if err := checkDispatchDeadline(p.dispatchDeadline, p.maxDeadline); err != nil {
		return errField(p.field+".DispatchDeadline", "%v", err)
	}
	return nil
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

// methodList is the accepted methods, as errors and docs list them.
const methodList = "POST, GET, HEAD, PUT, DELETE, PATCH, OPTIONS"

// parseMethod maps a method name (any case; "" means POST) to the proto enum. The error names
// field, what carried the method, and never repeats the name.
func parseMethod(field, name string) (cloudtaskspb.HttpMethod, error) {
	if name == "" {
		return cloudtaskspb.HttpMethod_POST, nil
	}
	if m, ok := methodsByName[strings.ToUpper(name)]; ok {
		return m, nil
	}
	return 0, fmt.Errorf("%s is not one of %s", field, methodList)
}

// effectiveMethod reads a method from a task; the unspecified value means POST to the service.
func effectiveMethod(m cloudtaskspb.HttpMethod) cloudtaskspb.HttpMethod {
	if m == cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
		return cloudtaskspb.HttpMethod_POST
	}
	return m
}

// checkRequest checks what both families' built requests share: a known method, a body only
// under a method of the family that carries one (bodyMethods lists them for the message), and
// the headers with the family's reserved names. field is the request's proto field name.
func checkRequest(field string, m cloudtaskspb.HttpMethod, body []byte, headers map[string]string,
	carries func(cloudtaskspb.HttpMethod) bool, bodyMethods string, reserved func(folded string) bool) error {
	if _, ok := cloudtaskspb.HttpMethod_name[int32(m)]; !ok {
		return fmt.Errorf("task %s.http_method %d is not a known method", field, m)
	}
	if len(body) > 0 && !carries(m) {
		return fmt.Errorf("task %s has a body under %s; only %s carry one", field, effectiveMethod(m), bodyMethods)
	}
	return checkHeaders("task "+field+".headers", headers, reserved)
}

// isTokenByte reports whether c may appear in an HTTP header name (an RFC 9110 token).
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// headerProblem checks header names and values, rejects names that are equal ignoring case and
// the names reserved (given in lower case) by the family, and bounds the total size. It
// returns the header name at fault (the first one for headers too large together) and what is
// wrong, to follow the headers' name; why is "" when the headers are valid.
func headerProblem(headers map[string]string, reserved func(folded string) bool) (name, why string) {
	seen := make(map[string]string, len(headers))
	total := 0
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		value := headers[name]
		if name == "" {
			return name, "has an empty header name"
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return name, fmt.Sprintf("header name %s is not a valid HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", boundedtext.Quote(name))
			}
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return name, fmt.Sprintf("header %s has a value with CR, LF or NUL", boundedtext.Quote(name))
		}
		if !utf8.ValidString(value) {
			return name, fmt.Sprintf("header %s has a value that is not valid UTF-8 (Cloud Tasks takes only UTF-8 text)", boundedtext.Quote(name))
		}
		folded := strings.ToLower(name)
		if other, dup := seen[folded]; dup {
			return name, fmt.Sprintf("has headers %s and %s, which are the same name ignoring case (header names ignore case; keep one)", boundedtext.Quote(other), boundedtext.Quote(name))
		}
		seen[folded] = name
		if reserved != nil && reserved(folded) {
			return name, fmt.Sprintf("header %s is set by Cloud Tasks or App Engine and cannot be overridden", boundedtext.Quote(name))
		}
		total += len(name) + len(value)
	}
	if total >= maxHeaderBytes {
		// No one header is at fault; name the first.
		return slices.Min(slices.Collect(maps.Keys(headers))), fmt.Sprintf("headers total %d bytes; the limit is under %d", total, maxHeaderBytes)
	}
	return "", ""
}

// checkHeaders is headerProblem as an error whose text starts with field.
func checkHeaders(field string, headers map[string]string, reserved func(folded string) bool) error {
	if _, why := headerProblem(headers, reserved); why != "" {
		return fmt.Errorf("%s %s", field, why)
	}
	return nil
}

// checkDispatchDeadline accepts zero (the service default) or a deadline in [15s, max]; the
// error follows the name of what carried the deadline.
func checkDispatchDeadline(d, max time.Duration) error {
	if d != 0 && (d < minDispatchDL || d > max) {
		return fmt.Errorf("%v is outside [%v, %v]", d, minDispatchDL, max)
	}
	return nil
}

// checkTaskDispatchDeadline applies checkDispatchDeadline to a built task's deadline.
func checkTaskDispatchDeadline(t *cloudtaskspb.Task, max time.Duration) error {
	if t.GetDispatchDeadline() == nil {
		return nil
	}
	if err := checkDispatchDeadline(t.GetDispatchDeadline().AsDuration(), max); err != nil {
		return fmt.Errorf("task dispatch_deadline %w", err)
	}
	return nil
}

// validateTask checks a built task against every rule the sink knows, before it is sent: the
// rules of every task here, the rules of its request in its family's file. A failure is
// data-shaped: the service would answer INVALID_ARGUMENT for it.
func validateTask(t *cloudtaskspb.Task, now time.Time) error {
	if field := invalidTaskText(t); field != "" {
		return fmt.Errorf("task %s is not valid UTF-8; Cloud Tasks takes only UTF-8 text in a task's string fields", field)
	}
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
		return checkHTTPTask(t)
	case t.GetAppEngineHttpRequest() != nil:
		return checkAppEngineTask(t)
	}
	return fmt.Errorf("task has neither http_request nor app_engine_http_request")
}

// contentTypeConflict reports the first header (in name order) that sets a Content-Type other
// than owned, the one the body format sends; owned "" conflicts with nothing.
func contentTypeConflict(headers map[string]string, owned string) (name string, conflict bool) {
	if owned == "" {
		return "", false
	}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		if strings.EqualFold(name, "Content-Type") && !bodyformat.ContentTypeMatches(owned, headers[name]) {
			return name, true
		}
	}
	return "", false
}
