package bodyformat

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// jsonSpec is the json row of the format table: no options, application/json unless the
// headers say otherwise.
var jsonSpec = spec{name: formats.NameJSON, defaultContentType: JSONContentType, parse: withoutOptions(newJSONEncoder)}

// jsonEncoder encodes the body fields as one JSON object. It copies them into a struct type
// that holds only the body fields, with their original json tags, and hands that to
// encoding/json, so names, omitempty/omitzero, ",string" and custom marshalers behave exactly
// as encoding/json defines them while metadata fields never appear.
type jsonEncoder struct {
	s        *Schema
	bodyType reflect.Type // nil for a plain element
}

func newJSONEncoder(s *Schema) (ElementEncoder, error) {
	for _, f := range s.body {
		if err := checkJSONType(f.Type, map[reflect.Type]bool{}); err != nil {
			return nil, fmt.Errorf("json: %s: %w", f.Describe(), err)
		}
	}
	e := &jsonEncoder{s: s}
	if s.plain {
		return e, nil
	}
	fields := make([]reflect.StructField, len(s.body))
	for i, f := range s.body {
		fields[i] = reflect.StructField{Name: f.GoName, Type: f.Type}
		if f.jsonTag != "" {
			fields[i].Tag = reflect.StructTag(fmt.Sprintf("json:%q", f.jsonTag))
		}
	}
	e.bodyType = reflect.StructOf(fields)
	return e, nil
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// checkJSONType rejects Go types that encoding/json can never encode (channels, functions,
// complex numbers, maps with unsupported keys), looking through pointers, slices, arrays, maps
// and struct fields. Interface values can only be checked per element.
func checkJSONType(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	if t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Errorf("the Go type %s cannot be encoded as JSON", t)
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkJSONType(t.Elem(), seen)
	case reflect.Map:
		k := t.Key()
		switch {
		case k.Kind() == reflect.String, k.Kind() >= reflect.Int && k.Kind() <= reflect.Uintptr,
			k.Implements(textMarshalerType):
		default:
			return fmt.Errorf("map key type %s cannot be encoded as JSON", k)
		}
		return checkJSONType(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() && !sf.Anonymous || sf.Tag.Get("json") == "-" {
				continue
			}
			if err := checkJSONType(sf.Type, seen); err != nil {
				return fmt.Errorf("field %s: %w", sf.Name, err)
			}
		}
	}
	return nil
}

func (e *jsonEncoder) Encode(elem any) ([]byte, error) {
	v, err := e.s.Value(elem)
	if err != nil {
		return nil, err
	}
	if e.bodyType == nil {
		return jsonDocument(v)
	}
	// Encoded through a pointer, so that its fields are addressable and encoding/json calls a
	// MarshalJSON or MarshalText with a pointer receiver, as checkJSONType expects.
	body := reflect.New(e.bodyType)
	for i, f := range e.s.body {
		body.Elem().Field(i).Set(v.Field(f.Index))
	}
	b, err := json.Marshal(body.Interface())
	if err != nil {
		return nil, fmt.Errorf("json: cannot encode %s: %s", e.culprit(v), jsonErrorKind(err))
	}
	return b, nil
}

// jsonDocument returns a plain string or []byte element, which holds a JSON document already,
// unchanged once it is known to be one JSON value. The error gives the offset of the syntax
// error, never the text.
func jsonDocument(v reflect.Value) ([]byte, error) {
	var doc []byte
	if v.Kind() == reflect.String {
		doc = []byte(v.String())
	} else {
		doc = v.Bytes()
	}
	if !json.Valid(doc) {
		var se *json.SyntaxError
		if err := json.Unmarshal(doc, new(json.RawMessage)); errors.As(err, &se) {
			return nil, fmt.Errorf("json: the element is not a JSON document: syntax error at byte offset %d of %d", se.Offset, len(doc))
		}
		return nil, fmt.Errorf("json: the element is not a JSON document (%d bytes)", len(doc))
	}
	return doc, nil
}

// culprit finds the body field that encoding/json fails on, for the error message: the
// encoding/json error itself does not name the field, and may quote the data.
func (e *jsonEncoder) culprit(v reflect.Value) string {
	for _, f := range e.s.body {
		if _, err := json.Marshal(v.Field(f.Index).Interface()); err != nil {
			return f.Describe()
		}
	}
	return "the element's body"
}

// jsonErrorKind describes an encoding/json error without any of the data it may quote.
func jsonErrorKind(err error) string {
	var (
		ute *json.UnsupportedTypeError
		uve *json.UnsupportedValueError
		me  *json.MarshalerError
	)
	switch {
	case errors.As(err, &ute):
		return "unsupported Go type " + ute.Type.String()
	case errors.As(err, &uve):
		return "unsupported value (NaN, infinity or a cycle) of Go type " + uve.Value.Type().String()
	case errors.As(err, &me):
		return "the MarshalJSON or MarshalText method of Go type " + me.Type.String() + " failed"
	}
	return "encoding failed"
}
