package cloudtasksio

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// taskBuilder turns elements into tasks. It is built from the serializable sink spec, once at
// pipeline construction (where it doubles as the configuration check) and once per DoFn
// instance on the worker, so both run exactly the same checks.
type taskBuilder struct {
	http      *HTTPTarget
	appEngine *AppEngineTarget
	method    cloudtaskspb.HttpMethod // the fixed method of a declarative target
	schema    *bodyformat.Schema      // declarative targets only
	encoder   *bodyformat.Encoder     // nil: no body format
	serialize reflectx.Func1x2        // Serializer
	taskID    reflectx.Func1x2        // TaskIDFn
	now       func() time.Time
}

func newTaskBuilder(spec *sinkSpec, elem reflect.Type) (*taskBuilder, error) {
	b := &taskBuilder{http: spec.HTTP, appEngine: spec.AppEngine, now: time.Now}
	if spec.TaskIDFn != nil {
		b.taskID = reflectx.ToFunc1x2(spec.TaskIDFn.Fn)
	}
	if spec.Serializer != nil {
		if field, ok := cloudtasksTaggedField(elem); ok {
			return nil, fmt.Errorf("cloudtasksio: field %s of %v has a `cloudtasks` tag, but only the declarative targets (Config.HTTP, Config.AppEngine) read those tags; "+
				"with Config.Serializer set the request yourself and name tasks with Config.TaskIDFn", field, elem)
		}
		b.serialize = reflectx.ToFunc1x2(spec.Serializer.Fn)
		return b, nil
	}
	schema, err := bodyformat.NewSchema(elem)
	if err != nil {
		return nil, fmt.Errorf("cloudtasksio: element type %v cannot be used with a declarative target: %w", elem, err)
	}
	b.schema = schema
	if schema.Has(bodyformat.KeyTaskID) && spec.TaskIDFn != nil {
		return nil, fmt.Errorf("cloudtasksio: Config.TaskIDFn and the %q field of %v both name tasks; keep one", bodyformat.KeyTaskID, elem)
	}
	var body formats.Format
	var fixedHeaders map[string]string
	switch {
	case spec.HTTP != nil:
		t := spec.HTTP
		if err := familyHTTP.checkMetadata(schema); err != nil {
			return nil, fmt.Errorf("cloudtasksio: HTTPTarget: %w", err)
		}
		if b.method, err = parseMethod("cloudtasksio: HTTPTarget.Method", t.Method); err != nil {
			return nil, err
		}
		switch {
		case t.URL != "":
			if err := checkURL("cloudtasksio: HTTPTarget.URL", t.URL); err != nil {
				return nil, err
			}
		case !schema.Has(bodyformat.KeyURL):
			return nil, fmt.Errorf("cloudtasksio: HTTPTarget.URL is empty and %v has no `cloudtasks:\"url\"` field", elem)
		}
		if err := checkHeaders("cloudtasksio: HTTPTarget.Headers", t.Headers, false); err != nil {
			return nil, err
		}
		if t.OIDC != nil && t.OAuth != nil {
			return nil, errors.New("cloudtasksio: HTTPTarget.OIDC and HTTPTarget.OAuth are both set; a task carries at most one token")
		}
		if t.OIDC != nil && strings.TrimSpace(t.OIDC.ServiceAccountEmail) == "" {
			return nil, errors.New("cloudtasksio: HTTPTarget.OIDC.ServiceAccountEmail is blank")
		}
		if t.OAuth != nil && strings.TrimSpace(t.OAuth.ServiceAccountEmail) == "" {
			return nil, errors.New("cloudtasksio: HTTPTarget.OAuth.ServiceAccountEmail is blank")
		}
		if err := checkDispatchDeadline("cloudtasksio: HTTPTarget.DispatchDeadline", t.DispatchDeadline, maxHTTPDispatchDL); err != nil {
			return nil, err
		}
		body, fixedHeaders = t.Body, t.Headers
	case spec.AppEngine != nil:
		t := spec.AppEngine
		if err := familyAppEngine.checkMetadata(schema); err != nil {
			return nil, fmt.Errorf("cloudtasksio: AppEngineTarget: %w", err)
		}
		if b.method, err = parseMethod("cloudtasksio: AppEngineTarget.Method", t.Method); err != nil {
			return nil, err
		}
		if err := checkRelativeURI("cloudtasksio: AppEngineTarget.RelativeURI", t.RelativeURI); err != nil {
			return nil, err
		}
		if err := checkHeaders("cloudtasksio: AppEngineTarget.Headers", t.Headers, true); err != nil {
			return nil, err
		}
		if err := checkDispatchDeadline("cloudtasksio: AppEngineTarget.DispatchDeadline", t.DispatchDeadline, maxAppEngineDispDL); err != nil {
			return nil, err
		}
		body, fixedHeaders = t.Body, t.Headers
	default:
		return nil, errors.New("cloudtasksio: no task target: set exactly one of Config.HTTP, Config.AppEngine and Config.Serializer")
	}
	if !body.IsZero() {
		if err := bodyformat.Validate(body); err != nil {
			return nil, fmt.Errorf("cloudtasksio: body format: %w", err)
		}
		if b.encoder, err = bodyformat.NewEncoder(body, schema); err != nil {
			return nil, fmt.Errorf("cloudtasksio: body format %q cannot encode %v: %w", body.Name, elem, err)
		}
		if _, err := withContentType("cloudtasksio: target Headers", fixedHeaders, b.encoder.ContentType()); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// elementBuilders builds the task builder on a worker from the type of the first element. The
// element type is not shipped in the DoFn: Beam cannot serialize the type of a struct with a
// map field (such as a `cloudtasks:"headers"` field), and the element itself carries it.
type elementBuilders struct {
	spec    *sinkSpec
	typ     reflect.Type
	builder *taskBuilder
}

func (e *elementBuilders) forElement(elem any) (*taskBuilder, error) {
	t := reflect.TypeOf(elem)
	if e.builder == nil || t != e.typ {
		b, err := newTaskBuilder(e.spec, t)
		if err != nil {
			return nil, err
		}
		e.typ, e.builder = t, b
	}
	return e.builder, nil
}

// build returns the task for elem without a name, or nil when the element is skipped. An
// *elementFailure goes to the failure policy; any other error fails the bundle.
func (b *taskBuilder) build(elem any) (*cloudtaskspb.Task, *bodyformat.Metadata, error) {
	if b.serialize != nil {
		out, err := call1x2(b.serialize, elem)
		if err != nil {
			return nil, nil, &elementFailure{code: CodeSerialization, err: fmt.Errorf("the Serializer failed: %w", err)}
		}
		task, _ := out.(*cloudtaskspb.Task)
		if task == nil {
			return nil, nil, nil
		}
		if task.GetName() != "" {
			return nil, nil, errors.New("cloudtasksio: Serializer returned a named task; the sink names tasks itself (use Config.TaskIDFn)")
		}
		return task, nil, b.check(task)
	}
	md, err := b.schema.Metadata(elem)
	if err != nil {
		return nil, nil, &elementFailure{code: CodeSerialization, err: err}
	}
	var task *cloudtaskspb.Task
	if b.http != nil {
		task, err = b.buildHTTP(elem, &md)
	} else {
		task, err = b.buildAppEngine(elem, &md)
	}
	if err != nil {
		return nil, nil, &elementFailure{code: CodeSerialization, err: err}
	}
	return task, &md, b.check(task)
}

// check runs the per-task rules; a violation goes to the failure policy with the task.
func (b *taskBuilder) check(task *cloudtaskspb.Task) error {
	if err := validateTask(task, b.now()); err != nil {
		return &elementFailure{code: CodeInvalidArgument, task: task, err: err}
	}
	return nil
}

func (b *taskBuilder) elementMethod(md *bodyformat.Metadata) (cloudtaskspb.HttpMethod, error) {
	if md.Method == "" {
		return b.method, nil
	}
	return parseMethod("http-method field", md.Method)
}

func (b *taskBuilder) body(elem any, carries bool) ([]byte, string, error) {
	if b.encoder == nil || !carries {
		return nil, "", nil
	}
	body, err := b.encoder.Encode(elem)
	if err != nil {
		return nil, "", fmt.Errorf("body format: %w", err)
	}
	return body, b.encoder.ContentType(), nil
}

func (b *taskBuilder) headers(fixed map[string]string, md *bodyformat.Metadata, contentType string) (map[string]string, error) {
	h := mergeHeaders(fixed, md.Headers)
	if len(md.Headers) > 0 {
		if err := checkHeaders("headers field", md.Headers, b.appEngine != nil); err != nil {
			return nil, err
		}
	}
	return withContentType("headers", h, contentType)
}

// timing sets the task's schedule time and dispatch deadline: the element's deadline when it
// carries one (checked against max, the family's bound), else the target's fixed one.
func (b *taskBuilder) timing(task *cloudtaskspb.Task, md *bodyformat.Metadata, fixed, max time.Duration) error {
	if !md.ScheduleTime.IsZero() {
		task.ScheduleTime = timestamppb.New(md.ScheduleTime)
	}
	deadline := fixed
	if md.DispatchDeadline != 0 {
		if err := checkDispatchDeadline("dispatch-deadline field", md.DispatchDeadline, max); err != nil {
			return err
		}
		deadline = md.DispatchDeadline
	}
	if deadline != 0 {
		task.DispatchDeadline = durationpb.New(deadline)
	}
	return nil
}

// requestParts resolves what both target families share: the element's method, the body
// (only when carries says the method has one) and the merged headers.
func (b *taskBuilder) requestParts(elem any, md *bodyformat.Metadata, fixedHeaders map[string]string,
	carries func(cloudtaskspb.HttpMethod) bool) (cloudtaskspb.HttpMethod, []byte, map[string]string, error) {
	method, err := b.elementMethod(md)
	if err != nil {
		return 0, nil, nil, err
	}
	body, contentType, err := b.body(elem, carries(method))
	if err != nil {
		return 0, nil, nil, err
	}
	headers, err := b.headers(fixedHeaders, md, contentType)
	if err != nil {
		return 0, nil, nil, err
	}
	return method, body, headers, nil
}

func (b *taskBuilder) buildHTTP(elem any, md *bodyformat.Metadata) (*cloudtaskspb.Task, error) {
	t := b.http
	method, body, headers, err := b.requestParts(elem, md, t.Headers, httpCarriesBody)
	if err != nil {
		return nil, err
	}
	req := &cloudtaskspb.HttpRequest{Url: t.URL, HttpMethod: method, Headers: headers, Body: body}
	if md.URL != "" {
		req.Url = md.URL
	}
	switch {
	case t.OIDC != nil:
		req.AuthorizationHeader = &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: t.OIDC.ServiceAccountEmail, Audience: t.OIDC.Audience}}
	case t.OAuth != nil:
		req.AuthorizationHeader = &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{
			ServiceAccountEmail: t.OAuth.ServiceAccountEmail, Scope: t.OAuth.Scope}}
	}
	task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: req}}
	if err := b.timing(task, md, t.DispatchDeadline, maxHTTPDispatchDL); err != nil {
		return nil, err
	}
	return task, nil
}

func (b *taskBuilder) buildAppEngine(elem any, md *bodyformat.Metadata) (*cloudtaskspb.Task, error) {
	t := b.appEngine
	method, body, headers, err := b.requestParts(elem, md, t.Headers, appEngineCarriesBody)
	if err != nil {
		return nil, err
	}
	req := &cloudtaskspb.AppEngineHttpRequest{RelativeUri: t.RelativeURI, HttpMethod: method, Headers: headers, Body: body}
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
	task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: req}}
	if err := b.timing(task, md, t.DispatchDeadline, maxAppEngineDispDL); err != nil {
		return nil, err
	}
	return task, nil
}

// key returns the deduplication key of elem, or ok == false when tasks are not named. A
// failing TaskIDFn goes to the failure policy; an empty key fails the bundle, because it
// would fail for every element alike.
func (b *taskBuilder) key(elem any, md *bodyformat.Metadata, task *cloudtaskspb.Task) (key string, ok bool, err error) {
	switch {
	case b.taskID != nil:
		out, err := call1x2(b.taskID, elem)
		if err != nil {
			return "", false, &elementFailure{code: CodeTaskID, task: task, err: fmt.Errorf("the TaskIDFn failed: %w", err)}
		}
		key, _ = out.(string)
		if key == "" {
			return "", false, errors.New("cloudtasksio: Config.TaskIDFn returned an empty key; every named task needs a non-empty key")
		}
		return key, true, nil
	case md != nil && md.HasTaskID:
		if md.TaskID == "" {
			return "", false, fmt.Errorf("cloudtasksio: the %q field of %v is empty; every named task needs a non-empty key", bodyformat.KeyTaskID, b.schema.Type())
		}
		return md.TaskID, true, nil
	}
	return "", false, nil
}

// cloudtasksTaggedField returns the name of the first field of t (a struct or a pointer to one)
// that carries a `cloudtasks` tag.
func cloudtasksTaggedField(t reflect.Type) (string, bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return "", false
	}
	for i := 0; i < t.NumField(); i++ {
		if _, ok := t.Field(i).Tag.Lookup("cloudtasks"); ok {
			return t.Field(i).Name, true
		}
	}
	return "", false
}

// mergeHeaders returns the fixed headers overridden by the element's headers, matching names
// without regard to case and keeping the element's spelling.
func mergeHeaders(fixed, override map[string]string) map[string]string {
	if len(fixed) == 0 && len(override) == 0 {
		return nil
	}
	out := make(map[string]string, len(fixed)+len(override))
	for k, v := range fixed {
		out[k] = v
	}
	for k, v := range override {
		for existing := range out {
			if strings.EqualFold(existing, k) {
				delete(out, existing)
			}
		}
		out[k] = v
	}
	return out
}

// withContentType applies a Content-Type that the body format owns: it is added when absent,
// an equal value (ignoring case and surrounding space) is rewritten to the canonical form, and
// a different value, including one with parameters, is a conflict.
func withContentType(field string, headers map[string]string, contentType string) (map[string]string, error) {
	if contentType == "" {
		return headers, nil
	}
	out := make(map[string]string, len(headers)+1)
	for k, v := range headers {
		if strings.EqualFold(k, "Content-Type") {
			if !bodyformat.ContentTypeMatches(contentType, v) {
				return nil, fmt.Errorf("%s set a Content-Type other than %q, which the body format sends (a different media type, or parameters)", field, contentType)
			}
			continue
		}
		out[k] = v
	}
	out["Content-Type"] = contentType
	return out, nil
}
