package pubsubdl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// EncodingJSONV1 is the AttrEncoding of data that is one JSON object, a JSONDeadLetter: a
// dead letter that a BigQuery subscription, a console or a program in any language can read
// without Beam's coders or the Task protobuf. PubSubConfig.Encoding selects it. The task's
// header values and token fields are replaced by RedactedValue; the element is kept whole.
const EncodingJSONV1 = "json-v1"

// OmittedElementJSON in AttrOmitted: a json-v1 message left out the element's JSON
// rendering (JSONDeadLetter.Element) and kept its Beam-coded bytes.
const OmittedElementJSON = "element_json"

// RedactedValue replaces, in a json-v1 message, every header value and every OIDC or OAuth
// token field of the task, and the values of the element's `cloudtasks:"headers"` field. The
// names stay, so a reader sees which headers a task had.
const RedactedValue = "[redacted]"

// cloudTasksConnector is cloudtasksio.Connector: the connector whose Payload is a Task.
const cloudTasksConnector = "cloudtasks"

// JSONDeadLetter is the message data of EncodingJSONV1, one JSON object with these fields
// (snake_case, empty ones left out). FromMessage reads it back.
type JSONDeadLetter struct {
	// Connector, Destination, Code and Error are those of the FailedElement. Error is not
	// cut to MaxAttributeBytes as the attribute is; on a reduced message it starts with the
	// note the error attribute has.
	Connector   string `json:"connector,omitempty"`
	Destination string `json:"destination,omitempty"`
	Code        string `json:"code,omitempty"`
	Error       string `json:"error,omitempty"`
	// EventTime is AttrEventTime's value: the element's event time, RFC 3339, UTC.
	EventTime string `json:"event_time,omitempty"`
	// ElementType is FailedElement.ElementType, the element's Go type.
	ElementType string `json:"element_type,omitempty"`
	// Element is the element as encoding/json writes a value of its Go type, with the values
	// of a `cloudtasks:"headers"` field redacted. It needs the publishing program to know the
	// type by name: a predeclared type such as string or int64, []byte, []string,
	// map[string]string, or a named type registered with beam.RegisterType (Beam wants element
	// types registered anyway). ElementNote says why it is absent.
	Element json.RawMessage `json:"element,omitempty"`
	// ElementNote says why Element is absent when the dead letter has an element.
	ElementNote string `json:"element_note,omitempty"`
	// ElementCoded is FailedElement.Element, the element in Beam's coder for its type
	// (base64 in the JSON): what deadletter.DecodeElement reads for a replay. It is kept
	// whole, including any header values the element holds.
	ElementCoded []byte `json:"element_coded,omitempty"`
	// Task is the Cloud Tasks task of the Payload in protojson with the proto field names
	// (http_request, oidc_token, ...), its body base64 as protojson writes bytes. Every header
	// value and OIDC/OAuth token field is RedactedValue. TaskNote says why it is absent.
	Task json.RawMessage `json:"task,omitempty"`
	// TaskNote says why Task is absent when the dead letter has a payload.
	TaskNote string `json:"task_note,omitempty"`
	// Redacted lists what was redacted: "http_request.headers", "http_request.oidc_token",
	// "http_request.oauth_token", "app_engine_http_request.headers", and
	// "element.<json name>" for the element's headers field.
	Redacted []string `json:"redacted,omitempty"`
}

// newJSONMessage is newMessage for EncodingJSONV1. When the whole dead letter does not fit, it
// leaves out the task, then the element's JSON rendering, then the element (AttrOmitted).
func newJSONMessage(fe deadletter.FailedElement, et mtime.Time, worker, bundle string, maxBytes int) (msg *pubsub.Message, reduced bool) {
	attrs := attributes(fe, et, worker, bundle)
	attrs[AttrEncoding] = EncodingJSONV1
	// Text is made valid UTF-8 as the attributes are (the json package would replace each
	// invalid byte, not each run of them).
	valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	doc := JSONDeadLetter{
		Connector:    valid(fe.Connector),
		Destination:  valid(fe.Destination),
		Code:         valid(fe.Code),
		Error:        valid(fe.Error),
		EventTime:    eventTimeAttr(et),
		ElementType:  boundedtext.Cut(valid(fe.ElementType), maxElementTypeBytes),
		ElementCoded: fe.Element,
	}
	var elemRedacted, taskRedacted []string
	doc.Element, doc.ElementNote, elemRedacted = elementJSON(fe)
	doc.Task, doc.TaskNote, taskRedacted = taskJSON(fe)
	doc.Redacted = append(taskRedacted, elemRedacted...)
	msg = &pubsub.Message{Data: marshalDoc(doc), Attributes: attrs}
	if messageSize(msg) <= maxBytes {
		return msg, false
	}
	const left = "left out to fit Pub/Sub's limits"
	steps := []struct {
		what string
		size int
		drop func()
	}{
		{OmittedPayload, len(fe.Payload), func() { doc.Task, doc.TaskNote, doc.Redacted = nil, left, elemRedacted }},
		{OmittedElementJSON, len(doc.Element), func() { doc.Element, doc.ElementNote, doc.Redacted = nil, left, nil }},
		{OmittedElement, len(fe.Element), func() { doc.ElementCoded = nil }},
	}
	var omitted []string
	var sizes []int
	for _, step := range steps {
		step.drop()
		omitted, sizes = append(omitted, step.what), append(sizes, step.size)
		doc.Error = reducedNote(omitted, sizes) + valid(fe.Error)
		attrs[AttrError] = attrValue(doc.Error)
		attrs[AttrOmitted] = strings.Join(omitted, ",")
		msg.Data = marshalDoc(doc)
		if messageSize(msg) <= maxBytes {
			break
		}
	}
	return msg, true
}

// marshalDoc writes doc as JSON, without escaping <, > and & (URLs read better).
func marshalDoc(doc JSONDeadLetter) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		// Every field is a string, bytes or JSON this file produced and checked.
		panic(prefixText(fmt.Sprintf("internal error: encoding a json-v1 dead letter: %v", err)))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// maxNoteBytes bounds the error text a note repeats.
const maxNoteBytes = 300

// plainElementTypes are the unnamed element types whose JSON rendering the publisher can make
// without a registry, by ElementTypeName.
var plainElementTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, t := range []reflect.Type{
		reflect.TypeFor[string](), reflect.TypeFor[[]byte](), reflect.TypeFor[bool](),
		reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[int16](), reflect.TypeFor[int32](), reflect.TypeFor[int64](),
		reflect.TypeFor[uint](), reflect.TypeFor[uint8](), reflect.TypeFor[uint16](), reflect.TypeFor[uint32](), reflect.TypeFor[uint64](),
		reflect.TypeFor[float32](), reflect.TypeFor[float64](),
		reflect.TypeFor[[]string](), reflect.TypeFor[map[string]string](),
	} {
		m[deadletter.ElementTypeName(t)] = t
	}
	return m
}()

// lookupElementType finds the Go type a dead letter's ElementType names: a plain type, or a
// named type registered with Beam in this program.
func lookupElementType(name string) (reflect.Type, bool) {
	if t, ok := plainElementTypes[name]; ok {
		return t, true
	}
	return runtime.LookupType(name)
}

// elementJSON renders fe's element as JSON, or says why it cannot. It also lists the element
// fields whose values it redacted.
func elementJSON(fe deadletter.FailedElement) (raw json.RawMessage, note string, redacted []string) {
	if len(fe.Element) == 0 {
		return nil, "the dead letter carries no element", nil
	}
	if fe.ElementType == "" {
		return nil, "the dead letter does not name the element's Go type", nil
	}
	t, ok := lookupElementType(fe.ElementType)
	if !ok {
		return nil, fmt.Sprintf("Go type %s is neither a plain type nor registered with beam.RegisterType in the publishing program", boundedtext.Quote(fe.ElementType)), nil
	}
	v, err := deadletter.DecodeElementAs(fe, t)
	if err != nil {
		return nil, "the element does not decode as its Go type: " + boundedtext.Cut(err.Error(), maxNoteBytes), nil
	}
	if fe.Connector == cloudTasksConnector {
		v, redacted = redactElementHeaders(v)
	}
	b, err := marshalValue(v)
	if err != nil {
		return nil, fmt.Sprintf("encoding/json cannot encode this %s: %s", boundedtext.Cut(fe.ElementType, maxNoteBytes), boundedtext.Cut(err.Error(), maxNoteBytes)), nil
	}
	return b, "", redacted
}

// marshalValue is json.Marshal that turns a panic of a MarshalJSON method into an error.
func marshalValue(v any) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("its JSON encoding panicked: %s", boundedtext.Sprint(r, maxNoteBytes))
		}
	}()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// redactElementHeaders returns v, a struct or a pointer to one, with the values of its
// `cloudtasks:"headers"` field replaced by RedactedValue (a copy: v is not changed), and the
// field's JSON name as "element.<name>". Other values are returned as they are.
func redactElementHeaders(v any) (any, []string) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return v, nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return v, nil
	}
	var out reflect.Value
	var redacted []string
	for i := range rv.NumField() {
		sf := rv.Type().Field(i)
		m := rv.Field(i)
		if sf.Tag.Get(bodyformat.TagName) != bodyformat.KeyHeaders || !sf.IsExported() ||
			m.Kind() != reflect.Map || m.Type().Elem().Kind() != reflect.String || m.Len() == 0 {
			continue
		}
		name, skip := jsonFieldName(sf)
		if skip {
			continue
		}
		if !out.IsValid() {
			out = reflect.New(rv.Type()).Elem()
			out.Set(rv)
		}
		red := reflect.MakeMapWithSize(m.Type(), m.Len())
		for it := m.MapRange(); it.Next(); {
			red.SetMapIndex(it.Key(), reflect.ValueOf(RedactedValue).Convert(m.Type().Elem()))
		}
		out.Field(i).Set(red)
		redacted = append(redacted, "element."+name)
	}
	if !out.IsValid() {
		return v, nil
	}
	return out.Interface(), redacted
}

// jsonFieldName is the name encoding/json gives sf, and whether it leaves the field out.
func jsonFieldName(sf reflect.StructField) (name string, skip bool) {
	tag := sf.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	if name, _, _ = strings.Cut(tag, ","); name == "" {
		name = sf.Name
	}
	return name, false
}

// taskJSON renders fe's payload, a Cloud Tasks task, as protojson with its header values and
// token fields redacted, or says why it cannot.
func taskJSON(fe deadletter.FailedElement) (raw json.RawMessage, note string, redacted []string) {
	if len(fe.Payload) == 0 {
		return nil, "", nil
	}
	if fe.Connector != cloudTasksConnector {
		return nil, fmt.Sprintf("the payload of connector %s has no JSON rendering; publish with encoding %s to keep it", boundedtext.Quote(fe.Connector), EncodingEnvelopeV1), nil
	}
	task := &cloudtaskspb.Task{}
	if err := proto.Unmarshal(fe.Payload, task); err != nil {
		return nil, "the payload is not a Cloud Tasks task in wire format, so it cannot be shown with its secrets redacted", nil
	}
	redacted = redactTask(task)
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(task)
	if err != nil {
		return nil, "the task has no protojson form: " + boundedtext.Cut(err.Error(), maxNoteBytes), nil
	}
	return b, "", redacted
}

// redactTask replaces every header value and OIDC/OAuth token field of task with
// RedactedValue, and lists the fields it redacted.
func redactTask(task *cloudtaskspb.Task) []string {
	var redacted []string
	headers := func(h map[string]string, field string) {
		if len(h) == 0 {
			return
		}
		for k := range h {
			h[k] = RedactedValue
		}
		redacted = append(redacted, field)
	}
	set := func(s *string) {
		if *s != "" {
			*s = RedactedValue
		}
	}
	switch m := task.GetMessageType().(type) {
	case *cloudtaskspb.Task_HttpRequest:
		r := m.HttpRequest
		headers(r.GetHeaders(), "http_request.headers")
		if tok := r.GetOidcToken(); tok != nil {
			set(&tok.ServiceAccountEmail)
			set(&tok.Audience)
			redacted = append(redacted, "http_request.oidc_token")
		}
		if tok := r.GetOauthToken(); tok != nil {
			set(&tok.ServiceAccountEmail)
			set(&tok.Scope)
			redacted = append(redacted, "http_request.oauth_token")
		}
	case *cloudtaskspb.Task_AppEngineHttpRequest:
		headers(m.AppEngineHttpRequest.GetHeaders(), "app_engine_http_request.headers")
	}
	return redacted
}

// fromJSON is FromMessage for EncodingJSONV1 data. The task comes back as the Payload only
// when nothing of it was redacted; otherwise Payload is empty and Error starts with a note
// saying so. The element comes back whole from ElementCoded.
func fromJSON(data []byte) (deadletter.FailedElement, time.Time, error) {
	var doc JSONDeadLetter
	if err := json.Unmarshal(data, &doc); err != nil {
		return deadletter.FailedElement{}, time.Time{}, jsonReadError(err)
	}
	fe := deadletter.FailedElement{
		Connector:   doc.Connector,
		Destination: doc.Destination,
		Code:        doc.Code,
		Error:       doc.Error,
		Element:     doc.ElementCoded,
		ElementType: doc.ElementType,
	}
	var lost []string
	for _, r := range doc.Redacted {
		if !strings.HasPrefix(r, "element.") {
			lost = append(lost, r)
		}
	}
	if len(doc.Task) > 0 && !bytes.Equal(doc.Task, []byte("null")) {
		if len(lost) > 0 {
			fe.Error = fmt.Sprintf("[read from %s: the task's %s were redacted, so Payload is left empty; the element is whole] %s",
				EncodingJSONV1, boundedtext.Cut(strings.Join(lost, ", "), maxNoteBytes), fe.Error)
		} else {
			task := &cloudtaskspb.Task{}
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(doc.Task, task); err != nil {
				return fe, time.Time{}, fmt.Errorf("FromMessage: the %s field \"task\" is not a Cloud Tasks task in protojson", EncodingJSONV1)
			}
			payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(task)
			if err != nil {
				return fe, time.Time{}, fmt.Errorf("FromMessage: the %s field \"task\" cannot be encoded as a task: %s", EncodingJSONV1, boundedtext.Cut(err.Error(), maxNoteBytes))
			}
			fe.Payload = payload
		}
	}
	var et time.Time
	if doc.EventTime != "" {
		t, err := time.Parse(time.RFC3339Nano, doc.EventTime)
		if err != nil {
			return fe, time.Time{}, fmt.Errorf("FromMessage: the %s field \"event_time\" is not an RFC 3339 time (%d bytes)", EncodingJSONV1, len(doc.EventTime))
		}
		et = t
	}
	return fe, et, nil
}

// jsonReadError describes why json-v1 data could not be read, without repeating the data.
func jsonReadError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("FromMessage: the %s data is not valid JSON (at byte %d)", EncodingJSONV1, syntax.Offset)
	case errors.As(err, &typ):
		kind, _, _ := strings.Cut(typ.Value, " ") // "number 5" names the value: keep its kind only
		return fmt.Errorf("FromMessage: the %s field %s is a JSON %s, want %v", EncodingJSONV1,
			boundedtext.Quote(typ.Field), boundedtext.Cut(kind, 16), typ.Type)
	default:
		return fmt.Errorf("FromMessage: the %s data cannot be read: %s", EncodingJSONV1, boundedtext.Cut(err.Error(), maxNoteBytes))
	}
}
