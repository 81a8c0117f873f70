package xlang

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file holds what runs on the Go workers: the step that turns each input element (a row
// or bytes) into the task element cloudtasksio.Write takes, and the step that turns each
// failure back into an error row of the caller's pipeline.

func init() {
	register.DoFn2x0[[]byte, func(beam.X)](&placeholderFn{})
	register.DoFn4x1[context.Context, beam.X, func(beam.Y), func(deadletter.FailedElement), error](&toTaskFn{})
	register.DoFn3x1[context.Context, deadletter.FailedElement, func(beam.Z), error](&errorRowFn{})
	register.Emitter1[deadletter.FailedElement]()
	beam.RegisterType(reflect.TypeFor[httpTask]())
	beam.RegisterType(reflect.TypeFor[appEngineTask]())
	register.Function1x2(httpTaskKey)
	register.Function1x2(appEngineTaskKey)
}

// httpTask is the element cloudtasksio.Write takes for an HTTP target: the body, already
// encoded, and the metadata read from the input element.
type httpTask struct {
	// Body is the task's body, sent as is (format raw).
	Body []byte `json:"body"`
	// Key is the deduplication key read from task_id_field; empty without it.
	Key string `json:"-"`
	// URL overrides http_url when not empty.
	URL string `cloudtasks:"url"`
	// ScheduleTime delays dispatch; zero means now.
	ScheduleTime time.Time `cloudtasks:"schedule-time"`
	// Element is the input row in the caller's row encoding, for its error row; empty for
	// bytes, which are the Body.
	Element []byte `json:"-"`
}

// appEngineTask is httpTask for an App Engine target.
type appEngineTask struct {
	Body         []byte    `json:"body"`
	Key          string    `json:"-"`
	RelativeURI  string    `cloudtasks:"relative-uri"`
	ScheduleTime time.Time `cloudtasks:"schedule-time"`
	Element      []byte    `json:"-"`
}

// errNoKey is the failure of a row whose task_id_field is null or empty.
var errNoKey = errors.New("the row's " + fieldTaskID + " is null or empty, and every named task needs a key")

// httpTaskKey and appEngineTaskKey are the sink's TaskIDFn with task_id_field. An empty key is
// an error, which the sink counts as that element's TASK_ID failure and hands to the failure
// policy (an empty key returned without an error would fail the bundle).
func httpTaskKey(t httpTask) (string, error)           { return keyOrError(t.Key) }
func appEngineTaskKey(t appEngineTask) (string, error) { return keyOrError(t.Key) }

func keyOrError(key string) (string, error) {
	if key == "" {
		return "", errNoKey
	}
	return key, nil
}

// placeholderFn stands for the caller's input while the Go graph is built: the expansion cuts
// it out and connects the steps after it to the caller's PCollection. It never runs.
type placeholderFn struct{}

func (placeholderFn) ProcessElement(_ []byte, _ func(beam.X)) {}

// conversionErrors counts the elements whose task could not be built here, under the sink's
// name for elements that reached the failure policy.
var conversionErrors = beam.NewCounter(cloudtasksio.MetricsNamespace, cloudtasksio.MetricRecordsSendErrors)

// toTaskFn turns each input element into an httpTask or appEngineTask.
type toTaskFn struct {
	// Rows says the input is rows of RowType; else it is bytes (RowType []byte), the body as
	// is.
	Rows    bool
	RowType beam.EncodedType
	// Body is how a row becomes the body.
	Body formats.Format
	// The row fields (by schema name) of the metadata; empty when not set.
	TaskIDField, URLField, ScheduleTimeField string
	// AppEngine says the target is App Engine (the output is appEngineTask).
	AppEngine bool
	// OnFailure is the policy for an element whose task cannot be built here: fail,
	// log_and_drop or dead_letter.
	OnFailure string
	// Queue is the destination the failures made here name.
	Queue string

	body                 *bodyformat.Encoder
	bodyType             reflect.Type // RowType with json tags: the body format's view of a row
	rowEnc               func(any, io.Writer) error
	idIdx, urlIdx, atIdx int
	failEnc              *deadletter.ElementEncoder
	buf                  bytes.Buffer
}

func (f *toTaskFn) Setup() error {
	out := reflect.TypeFor[httpTask]()
	if f.AppEngine {
		out = reflect.TypeFor[appEngineTask]()
	}
	var err error
	if f.failEnc, err = deadletter.NewElementEncoder(out); err != nil {
		return err
	}
	if !f.Rows {
		return nil
	}
	rt := f.RowType.T
	f.bodyType = jsonTagged(rt)
	s, err := bodyformat.NewSchema(f.bodyType)
	if err != nil {
		return err
	}
	if f.body, err = bodyformat.NewEncoder(f.Body, s); err != nil {
		return err
	}
	if f.rowEnc, err = coder.RowEncoderForStruct(rt); err != nil {
		return err
	}
	f.idIdx, f.urlIdx, f.atIdx = fieldIndex(rt, f.TaskIDField), fieldIndex(rt, f.URLField), fieldIndex(rt, f.ScheduleTimeField)
	return nil
}

func (f *toTaskFn) ProcessElement(ctx context.Context, elem beam.X, emit func(beam.Y), fail func(deadletter.FailedElement)) error {
	var t appEngineTask // the fields both outputs share; RelativeURI holds the URL of an HTTP task
	var err error
	if f.Rows {
		err = f.fromRow(elem, &t)
	} else {
		t.Body = elem.([]byte)
	}
	var out any = t
	if !f.AppEngine {
		out = httpTask{Body: t.Body, Key: t.Key, URL: t.RelativeURI, ScheduleTime: t.ScheduleTime, Element: t.Element}
	}
	if err == nil {
		emit(out)
		return nil
	}
	conversionErrors.Inc(ctx, 1)
	msg := boundedtext.Cut(err.Error(), 1024)
	switch f.OnFailure {
	case onFailureLogAndDrop:
		log.Warnf(ctx, "cloudtasksio/xlang: dropped an element whose task cannot be built (on_failure %s): %s", onFailureLogAndDrop, msg)
		return nil
	case onFailureDeadLetter:
		fe := deadletter.FailedElement{Connector: cloudtasksio.Connector, Destination: f.Queue, Code: cloudtasksio.CodeSerialization,
			Error: msg, ElementType: f.failEnc.TypeName()}
		if fe.Element, err = f.failEnc.Encode(out); err != nil {
			fe.Error += "; the element could not be kept: " + err.Error()
		}
		fail(fe)
		return nil
	}
	return fmt.Errorf("cloudtasksio/xlang: an element's task cannot be built (on_failure %s fails the bundle): %s", onFailureFail, msg)
}

// fromRow fills t from a row: its body, its metadata and, for the error row, its encoding.
// An error names the field at fault, never its value.
func (f *toTaskFn) fromRow(elem any, t *appEngineTask) error {
	rv := reflect.ValueOf(elem)
	f.buf.Reset()
	if err := f.rowEnc(elem, &f.buf); err != nil {
		return fmt.Errorf("encoding the row: %w", err)
	}
	t.Element = bytes.Clone(f.buf.Bytes())
	body, err := f.body.Encode(rv.Convert(f.bodyType).Interface())
	if err != nil {
		return fmt.Errorf("format %s: %w", f.Body.Name, err)
	}
	t.Body = body
	if f.idIdx >= 0 {
		t.Key = keyText(rv.Field(f.idIdx))
	}
	if f.urlIdx >= 0 {
		t.RelativeURI = keyText(rv.Field(f.urlIdx))
	}
	if f.atIdx >= 0 {
		at, err := scheduleTime(rv.Field(f.atIdx))
		if err != nil {
			return fmt.Errorf("%s %s: %w", fieldScheduleTime, boundedtext.Quote(f.ScheduleTimeField), err)
		}
		t.ScheduleTime = at
	}
	return nil
}

// keyText is a string or integer field's text; "" for null.
func keyText(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint8:
		return strconv.FormatUint(v.Uint(), 10)
	}
	return ""
}

// scheduleTime reads an instant, an RFC 3339 string or an integer of seconds since the Unix
// epoch; null or "" is the zero time (now).
func scheduleTime(v reflect.Value) (time.Time, error) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return time.Time{}, nil
		}
		v = v.Elem()
	}
	if at, ok := instantOf(v); ok {
		return at, nil
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return time.Time{}, nil
		}
		at, err := time.Parse(time.RFC3339Nano, v.String())
		if err != nil {
			return time.Time{}, errors.New("the value is not an RFC 3339 time such as 2026-05-01T09:30:00Z")
		}
		return at, nil
	case reflect.Int16, reflect.Int32, reflect.Int64:
		return time.Unix(v.Int(), 0).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("a field of Go type %s cannot hold a time", v.Type())
}

// fieldIndex is the index of the struct field whose schema name is name, or -1.
func fieldIndex(t reflect.Type, name string) int {
	if name == "" {
		return -1
	}
	for i := range t.NumField() {
		if schemaFieldName(t.Field(i)) == name {
			return i
		}
	}
	return -1
}

// schemaFieldName is the schema name of a field of a type built from a schema: its beam tag,
// else its Go name.
func schemaFieldName(sf reflect.StructField) string {
	if n := sf.Tag.Get("beam"); n != "" {
		return n
	}
	return sf.Name
}

// jsonTagged returns t with every struct type in it (nested rows too) tagged json:"<schema
// name>", so that the body formats name a row's fields as its schema does. A value of t
// converts to it: conversion ignores struct tags.
func jsonTagged(t reflect.Type) reflect.Type {
	switch t.Kind() {
	case reflect.Pointer:
		return reflect.PointerTo(jsonTagged(t.Elem()))
	case reflect.Slice:
		return reflect.SliceOf(jsonTagged(t.Elem()))
	case reflect.Map:
		return reflect.MapOf(jsonTagged(t.Key()), jsonTagged(t.Elem()))
	case reflect.Struct:
		if t.PkgPath() != "" && t.Name() != "" {
			return t // a named type, such as a logical type's Go type: kept as it is
		}
		fields := make([]reflect.StructField, t.NumField())
		for i := range t.NumField() {
			sf := t.Field(i)
			fields[i] = reflect.StructField{Name: sf.Name, Type: jsonTagged(sf.Type), Tag: reflect.StructTag(`json:` + strconv.Quote(schemaFieldName(sf)))}
		}
		return reflect.StructOf(fields)
	}
	return t
}

// errorRowFn turns each failure into an error row: element (the input row or bytes), msg,
// stack, code and destination, Beam YAML's error row with the sink's code and queue.
type errorRowFn struct {
	Rows      bool
	RowType   beam.EncodedType
	AppEngine bool
	// ErrorType is the error row's Go type, built from its schema.
	ErrorType beam.EncodedType
	// Step is the transform's name in the caller's pipeline, for the stack field.
	Step string

	rowDec func(io.Reader) (any, error)
}

func (f *errorRowFn) Setup() error {
	if f.Rows {
		var err error
		f.rowDec, err = coder.RowDecoderForStruct(f.RowType.T)
		return err
	}
	return nil
}

func (f *errorRowFn) ProcessElement(ctx context.Context, fe deadletter.FailedElement, emit func(beam.Z)) error {
	row := reflect.New(f.ErrorType.T).Elem()
	msg := fe.Error
	var original, body []byte
	var err error
	if f.AppEngine {
		var t appEngineTask
		if t, err = deadletter.DecodeElement[appEngineTask](fe); err == nil {
			original, body = t.Element, t.Body
		}
	} else {
		var t httpTask
		if t, err = deadletter.DecodeElement[httpTask](fe); err == nil {
			original, body = t.Element, t.Body
		}
	}
	if err != nil {
		msg += "; the element is not in this error row: " + err.Error()
	}
	switch {
	case err != nil:
	case f.Rows:
		v, err := f.rowDec(bytes.NewReader(original))
		if err != nil {
			msg += "; the element is not in this error row: decoding it failed: " + boundedtext.Cut(err.Error(), 256)
			break
		}
		row.Field(errorFieldElement).Set(reflect.ValueOf(v))
	default:
		row.Field(errorFieldElement).SetBytes(body)
	}
	row.Field(errorFieldMsg).SetString(msg)
	row.Field(errorFieldStack).SetString(fmt.Sprintf("in %s (cloudtasksio.Write of beam-cloudtasks, Go SDK): code %s", f.Step, fe.Code))
	row.Field(errorFieldCode).SetString(fe.Code)
	row.Field(errorFieldDestination).SetString(fe.Destination)
	emit(row.Interface())
	return nil
}
