package cloudtasksio

import (
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Cloud Tasks takes only UTF-8 text in a task's string fields (its URL, relative URI, header
// names and values, routing, token scopes): the client refuses to encode anything else, so a
// task with an invalid byte sequence in one of them can never be sent. A Go string can hold
// any bytes, so the sink checks before sending and treats such a task as the element's
// failure, not the bundle's.

// invalidTaskText returns the path of a string field of task that is not valid UTF-8, or ""
// when every one is. The fields a task the sink builds can hold are read directly; a task with
// anything else (attempts, set by a Serializer) is walked field by field. Measured on a typical
// HTTP task (BenchmarkTaskUTF8Check, 2-core Xeon, 2026-12-04): 0.2 µs and no allocation read
// directly, against 1.7 µs and 15 allocations walked.
func invalidTaskText(task *cloudtaskspb.Task) string {
	if task.GetFirstAttempt() != nil || task.GetLastAttempt() != nil {
		return invalidUTF8Field(task.ProtoReflect())
	}
	if !utf8.ValidString(task.GetName()) {
		return "name"
	}
	switch {
	case task.GetHttpRequest() != nil:
		r := task.GetHttpRequest()
		if bad := invalidTexts("http_request", [2]string{"url", r.GetUrl()},
			[2]string{"oauth_token.service_account_email", r.GetOauthToken().GetServiceAccountEmail()},
			[2]string{"oauth_token.scope", r.GetOauthToken().GetScope()},
			[2]string{"oidc_token.service_account_email", r.GetOidcToken().GetServiceAccountEmail()},
			[2]string{"oidc_token.audience", r.GetOidcToken().GetAudience()}); bad != "" {
			return bad
		}
		return invalidHeaders("http_request", r.GetHeaders())
	case task.GetAppEngineHttpRequest() != nil:
		r := task.GetAppEngineHttpRequest()
		rt := r.GetAppEngineRouting()
		if bad := invalidTexts("app_engine_http_request", [2]string{"relative_uri", r.GetRelativeUri()},
			[2]string{"app_engine_routing.service", rt.GetService()}, [2]string{"app_engine_routing.version", rt.GetVersion()},
			[2]string{"app_engine_routing.instance", rt.GetInstance()}, [2]string{"app_engine_routing.host", rt.GetHost()}); bad != "" {
			return bad
		}
		return invalidHeaders("app_engine_http_request", r.GetHeaders())
	}
	return ""
}

// invalidTexts returns prefix.name of the first of the (name, text) fields whose text is not
// valid UTF-8, "" when none.
func invalidTexts(prefix string, fields ...[2]string) string {
	for _, f := range fields {
		if !utf8.ValidString(f[1]) {
			return prefix + "." + f[0]
		}
	}
	return ""
}

func invalidHeaders(prefix string, headers map[string]string) string {
	for k, v := range headers {
		if !utf8.ValidString(k) {
			return prefix + ".a key of headers"
		}
		if !utf8.ValidString(v) {
			return prefix + ".a value of headers"
		}
	}
	return ""
}

// invalidUTF8Field returns the path of a string field of m (the first the walk meets) that is
// not valid UTF-8, with "key" or "value" for a map entry's, or "" when every one is. The path
// never holds the text itself: a header value can be a credential.
func invalidUTF8Field(m protoreflect.Message) string {
	var bad string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		bad = invalidUTF8Value(fd, v)
		return bad == ""
	})
	return bad
}

func invalidUTF8Value(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	name := string(fd.Name())
	switch {
	case fd.IsMap():
		var bad string
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
				bad = "a key of " + name
			} else if in := invalidUTF8Single(fd.MapValue(), mv); in != "" {
				bad = "a value of " + name
				if in != "." {
					bad = "a value of " + name + "." + in
				}
			}
			return bad == ""
		})
		return bad
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if in := invalidUTF8Single(fd, l.Get(i)); in != "" {
				return joinField(name, in)
			}
		}
		return ""
	}
	if in := invalidUTF8Single(fd, v); in != "" {
		return joinField(name, in)
	}
	return ""
}

// invalidUTF8Single checks one value of fd's kind: "." when it is a string that is not valid
// UTF-8, the path inside it for a message, "" when it is valid.
func invalidUTF8Single(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if !utf8.ValidString(v.String()) {
			return "."
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return invalidUTF8Field(v.Message())
	}
	return ""
}

func joinField(name, in string) string {
	if in == "." {
		return name
	}
	return name + "." + in
}

// replaceInvalidUTF8 replaces, in m, every invalid byte sequence of its string fields with
// U+FFFD, so that m can be encoded.
func replaceInvalidUTF8(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			mp := v.Map()
			type entry struct {
				k protoreflect.MapKey
				v protoreflect.Value
			}
			var entries []entry
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				entries = append(entries, entry{k, mv})
				return true
			})
			for _, e := range entries {
				k, mv := e.k, replaceInvalidUTF8Value(fd.MapValue(), e.v)
				if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
					mp.Clear(k)
					k = protoreflect.ValueOfString(strings.ToValidUTF8(k.String(), "\uFFFD")).MapKey()
				}
				mp.Set(k, mv)
			}
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				l.Set(i, replaceInvalidUTF8Value(fd, l.Get(i)))
			}
		default:
			if fd.Kind() == protoreflect.StringKind {
				m.Set(fd, replaceInvalidUTF8Value(fd, v))
			} else {
				replaceInvalidUTF8Value(fd, v)
			}
		}
		return true
	})
}

func replaceInvalidUTF8Value(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s := v.String(); !utf8.ValidString(s) {
			return protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD"))
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		replaceInvalidUTF8(v.Message())
	}
	return v
}
