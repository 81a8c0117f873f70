package bodyformat

import (
	"fmt"
	"reflect"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// rawSpec is the raw row of the format table: no options, no Content-Type.
var rawSpec = spec{name: formats.NameRaw, parse: withoutOptions(newRawEncoder)}

// rawEncoder sends the single string or []byte body field as the body.
type rawEncoder struct {
	s     *Schema
	field Field
}

func newRawEncoder(s *Schema) (ElementEncoder, error) {
	if len(s.body) != 1 {
		names := make([]string, len(s.body))
		for i, f := range s.body {
			names[i] = f.GoName
		}
		return nil, fmt.Errorf("raw: element type %s has %d body fields %v; the format needs exactly one, of type string or []byte (tag the others as metadata or json:\"-\")", s.typ, len(s.body), names)
	}
	f := s.body[0]
	if !isPlainBody(f.Type) {
		return nil, fmt.Errorf("raw: %s has Go type %s; the format accepts only string or []byte", f.Describe(), f.Type)
	}
	return &rawEncoder{s: s, field: f}, nil
}

func (e *rawEncoder) Encode(elem any) ([]byte, error) {
	v, err := e.s.Value(elem)
	if err != nil {
		return nil, err
	}
	fv := fieldValue(v, e.field)
	if fv.Kind() == reflect.String {
		return []byte(fv.String()), nil
	}
	return fv.Bytes(), nil
}
