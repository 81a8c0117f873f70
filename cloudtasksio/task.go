package cloudtasksio

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// taskBuilder turns elements into tasks. It is built from the serializable sink spec, once at
// pipeline construction (where it checks the rules that need the element type) and once per
// DoFn instance on the worker, where it checks the target's own rules again: the spec a worker
// decodes is not necessarily the one TryWrite checked.
type taskBuilder struct {
	target    target                  // the declarative target, nil with a Serializer
	method    cloudtaskspb.HttpMethod // the fixed method of a declarative target
	schema    *bodyformat.Schema      // declarative targets only
	encoder   *bodyformat.Encoder     // nil: no body format
	serialize reflectx.Func1x2        // Serializer
	taskID    reflectx.Func1x2        // TaskIDFn
	now       func() time.Time
}

// newTaskBuilder compiles the task builder for the element type. Its errors have no package
// prefix: TryWrite and the worker add it.
func newTaskBuilder(spec *sinkSpec, elem reflect.Type) (*taskBuilder, error) {
	b := &taskBuilder{now: time.Now}
	if spec.TaskIDFn != nil {
		b.taskID = reflectx.ToFunc1x2(spec.TaskIDFn.Fn)
	}
	if spec.Serializer != nil {
		if field, ok := cloudtasksTaggedField(elem); ok {
			var targets []string
			for _, f := range targetFamilies {
				targets = append(targets, goFieldName(f.field))
			}
			return nil, fmt.Errorf("field %s of %v has a `cloudtasks` tag, but only the declarative targets (%s) read those tags; "+
				"with Config.Serializer set the request yourself and name tasks with Config.TaskIDFn", field, elem, strings.Join(targets, ", "))
		}
		b.serialize = reflectx.ToFunc1x2(spec.Serializer.Fn)
		return b, nil
	}
	b.target = spec.target()
	if b.target == nil {
		return nil, errors.New("no task target: set exactly one of " + taskBuilderList(goFieldName))
	}
	if err := b.target.validate(); err != nil {
		return nil, err
	}
	schema, err := bodyformat.NewSchema(elem)
	if err != nil {
		return nil, fmt.Errorf("element type %v cannot be used with a declarative target: %w", elem, err)
	}
	b.schema = schema
	if schema.Has(bodyformat.KeyTaskID) && spec.TaskIDFn != nil {
		return nil, fmt.Errorf("Config.TaskIDFn and the %q field of %v both name tasks; keep one", bodyformat.KeyTaskID, elem)
	}
	fixed := b.target.fixed()
	if err := checkMetadata(b.target, schema); err != nil {
		return nil, fmt.Errorf("%s: %w", goTypeOfField[fixed.field], err)
	}
	if err := b.target.compile(schema); err != nil {
		return nil, err
	}
	b.method, _ = parseMethod("", fixed.method) // checked by validate
	if !fixed.body.IsZero() {
		if b.encoder, err = bodyformat.NewEncoder(fixed.body, schema); err != nil {
			return nil, fmt.Errorf("body format %q cannot encode %v: %w", fixed.body.Name, elem, err)
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

// maxPanicStack bounds the stack a panic while building a task is logged with.
const maxPanicStack = 8 << 10

// build returns the task for elem without a name, or nil when the element is skipped. An
// *elementFailure goes to the failure policy; any other error fails the bundle. A panic while
// the task is built (a body field's MarshalJSON or MarshalText, a nil interface the format
// cannot encode) is the element's failure too.
func (b *taskBuilder) build(elem any) (task *cloudtaskspb.Task, md *bodyformat.Metadata, err error) {
	defer func() {
		if r := recover(); r != nil {
			task, md = nil, nil
			err = &elementFailure{code: CodeSerialization, err: fmt.Errorf("building the task panicked: %s", boundedtext.Sprint(r, maxErrorText)),
				stack: boundedtext.Cut(string(debug.Stack()), maxPanicStack)}
		}
	}()
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
			return nil, nil, errors.New("Config.Serializer returned a named task; the sink names tasks itself (use Config.TaskIDFn)")
		}
		return task, nil, b.check(task)
	}
	meta, err := b.schema.Metadata(elem)
	if err != nil {
		return nil, nil, &elementFailure{code: CodeSerialization, err: err}
	}
	task, err = b.request(elem, &meta)
	if err != nil {
		return nil, nil, &elementFailure{code: CodeSerialization, err: err}
	}
	return task, &meta, b.check(task)
}

// maxTaskBytes is the largest task, in wire bytes with its name, the sink sends: 1 MiB, the
// larger of the task size limits Cloud Tasks documents. A larger task cannot be valid
// anywhere; between the smaller limit (100 KB) and this one, Cloud Tasks decides.
const maxTaskBytes = 1 << 20

// checkTaskSize refuses a task over maxTaskBytes (size is its wire size, name included) as an
// element failure with CodeTaskTooLarge: it is never sent, so it can neither be retried as a
// quota throttle nor fail its bundle under DeadLetter or LogAndDrop.
func checkTaskSize(queue Queue, task *cloudtaskspb.Task, size int) error {
	if size <= maxTaskBytes {
		return nil
	}
	return &elementFailure{code: CodeTaskTooLarge, task: task, err: fmt.Errorf(
		"the task for queue %s is %d bytes in wire format, over the %d-byte (1 MiB) limit of any Cloud Tasks task; not sent",
		queue.Path(), size, maxTaskBytes)}
}

// check runs the per-task rules; a violation goes to the failure policy with the task.
func (b *taskBuilder) check(task *cloudtaskspb.Task) error {
	if err := validateTask(task, b.now()); err != nil {
		return &elementFailure{code: CodeInvalidArgument, task: task, err: err}
	}
	return nil
}

// request builds the declarative target's task for one element: the method, body and headers
// resolved the same way for both families, then the family's request, then the timing.
func (b *taskBuilder) request(elem any, md *bodyformat.Metadata) (*cloudtaskspb.Task, error) {
	fixed := b.target.fixed()
	p := requestParts{method: b.method}
	if md.Method != "" {
		m, err := parseMethod("http-method field", md.Method)
		if err != nil {
			return nil, err
		}
		p.method = m
	}
	contentType, defaultContentType := "", ""
	if b.encoder != nil && b.target.carriesBody(p.method) {
		body, err := b.encoder.Encode(elem)
		if err != nil {
			return nil, fmt.Errorf("body format: %w", err)
		}
		p.body, contentType, defaultContentType = body, b.encoder.ContentType(), b.encoder.DefaultContentType()
	}
	if len(md.Headers) > 0 {
		if err := checkHeaders("headers field", md.Headers, fixed.reserved); err != nil {
			return nil, err
		}
	}
	headers, err := withContentType("headers", mergeHeaders(fixed.headers, md.Headers), contentType)
	if err != nil {
		return nil, err
	}
	p.headers = withDefaultContentType(headers, defaultContentType)
	task := b.target.request(p, md)
	if !md.ScheduleTime.IsZero() {
		task.ScheduleTime = timestamppb.New(md.ScheduleTime)
	}
	deadline := fixed.dispatchDeadline
	if md.DispatchDeadline != 0 {
		if err := checkDispatchDeadline(md.DispatchDeadline, fixed.maxDeadline); err != nil {
			return nil, fmt.Errorf("dispatch-deadline field %w", err)
		}
		deadline = md.DispatchDeadline
	}
	if deadline != 0 {
		task.DispatchDeadline = durationpb.New(deadline)
	}
	return task, nil
}

// key returns the deduplication key of elem, or ok == false when tasks are not named. A
// failing TaskIDFn and an empty key are the element's failure (CodeTaskID), for the failure
// policy: a key is read from the element, and one record without one must not stop a job
// that chose to dead-letter its bad records.
func (b *taskBuilder) key(elem any, md *bodyformat.Metadata, task *cloudtaskspb.Task) (key string, ok bool, err error) {
	switch {
	case b.taskID != nil:
		out, err := call1x2(b.taskID, elem)
		if err != nil {
			return "", false, &elementFailure{code: CodeTaskID, task: task, err: fmt.Errorf("the TaskIDFn failed: %w", err)}
		}
		key, _ = out.(string)
		if key == "" {
			return "", false, &elementFailure{code: CodeTaskID, task: task, err: errors.New("Config.TaskIDFn returned an empty key; every named task needs a non-empty key")}
		}
		return key, true, nil
	case md != nil && md.HasTaskID:
		if md.TaskID == "" {
			return "", false, &elementFailure{code: CodeTaskID, task: task, err: emptyTaskIDField(b.schema.Type())}
		}
		return md.TaskID, true, nil
	}
	return "", false, nil
}

// emptyTaskIDField is the failure of an element of type t whose task-id field is empty, for
// Write and Delete alike.
func emptyTaskIDField(t reflect.Type) error {
	return fmt.Errorf("the %q field of %v is empty; every named task needs a non-empty key", bodyformat.KeyTaskID, t)
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

// withDefaultContentType adds the body format's media type as the Content-Type when the headers
// (fixed or the element's, compared without regard to case) set none; a header of the user's
// always wins. headers is not modified.
func withDefaultContentType(headers map[string]string, contentType string) map[string]string {
	if contentType == "" {
		return headers
	}
	for name := range headers {
		if strings.EqualFold(name, "Content-Type") {
			return headers
		}
	}
	out := make(map[string]string, len(headers)+1)
	maps.Copy(out, headers)
	out["Content-Type"] = contentType
	return out
}

// withContentType applies a Content-Type that the body format owns: it is added when absent,
// an equal value (ignoring case and surrounding space) is rewritten to the canonical form, and
// a different value, including one with parameters, is a conflict.
func withContentType(field string, headers map[string]string, contentType string) (map[string]string, error) {
	if contentType == "" {
		return headers, nil
	}
	if _, conflict := contentTypeConflict(headers, contentType); conflict {
		return nil, fmt.Errorf("%s set a Content-Type other than %q, which the body format sends (a different media type, or parameters)", field, contentType)
	}
	out := make(map[string]string, len(headers)+1)
	for k, v := range headers {
		if !strings.EqualFold(k, "Content-Type") {
			out[k] = v
		}
	}
	out["Content-Type"] = contentType
	return out, nil
}
