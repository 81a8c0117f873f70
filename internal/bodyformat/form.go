package bodyformat

import (
	"fmt"
	"reflect"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// formSpec is the form-urlencoded row of the format table: no options, and it sets
// FormContentType.
var formSpec = spec{name: formats.NameFormURLEncoded, contentType: FormContentType, parse: withoutOptions(newFormEncoder)}

// formKind is how one body field becomes form pairs.
type formKind int

const (
	formString     formKind = iota // string: one pair
	formStrings                    // []string: one pair per entry
	formStringPtrs                 // []*string: one pair per entry, a nil entry fails the element
	formPtr        formKind = 1 << 3
	formBaseMask            = formPtr - 1
)

type formField struct {
	Field
	kind formKind
}

// formEncoder writes application/x-www-form-urlencoded bodies.
type formEncoder struct {
	s      *Schema
	fields []formField
}

func newFormEncoder(s *Schema) (ElementEncoder, error) {
	if s.plain {
		return nil, fmt.Errorf("form-urlencoded: element type %s has no field names; use a struct with string or []string fields", s.typ)
	}
	e := &formEncoder{s: s}
	for _, f := range s.body {
		kind, ok := formKindOf(f.Type)
		if !ok {
			return nil, fmt.Errorf("form-urlencoded: %s has Go type %s; the format accepts only string, []string, []*string and pointers to them: convert the value to a string field", f.Describe(), f.Type)
		}
		e.fields = append(e.fields, formField{Field: f, kind: kind})
	}
	return e, nil
}

func formKindOf(t reflect.Type) (formKind, bool) {
	var ptr formKind
	if t.Kind() == reflect.Pointer {
		ptr, t = formPtr, t.Elem()
	}
	var base formKind
	switch {
	case t.Kind() == reflect.String:
		base = formString
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		base = formStrings
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Pointer && t.Elem().Elem().Kind() == reflect.String:
		base = formStringPtrs
	default:
		return 0, false
	}
	return ptr | base, true
}

func (e *formEncoder) Encode(elem any) ([]byte, error) {
	v, err := e.s.Value(elem)
	if err != nil {
		return nil, err
	}
	var out []byte
	add := func(name, value string) {
		if len(out) > 0 {
			out = append(out, '&')
		}
		out = AppendFormEscape(out, name)
		out = append(out, '=')
		out = AppendFormEscape(out, value)
	}
	for _, f := range e.fields {
		fv := v.Field(f.Index)
		if f.kind&formPtr != 0 {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		switch f.kind & formBaseMask {
		case formString:
			add(f.Name, fv.String())
		case formStrings:
			for i := range fv.Len() {
				add(f.Name, fv.Index(i).String())
			}
		case formStringPtrs:
			for i := range fv.Len() {
				if fv.Index(i).IsNil() {
					return nil, fmt.Errorf("form-urlencoded: %s: entry %d is nil, which a form cannot represent", f.Describe(), i)
				}
			}
			for i := range fv.Len() {
				add(f.Name, fv.Index(i).Elem().String())
			}
		}
	}
	return out, nil
}

// AppendFormEscape appends s to dst in application/x-www-form-urlencoded encoding: ASCII
// letters, digits and the four characters * - . _ stay as they are, a space becomes '+', and
// every other byte of s (multi-byte UTF-8 sequences byte by byte) becomes %XX with uppercase
// hex digits. The bytes of s are encoded as given, so invalid UTF-8 survives a round trip.
func AppendFormEscape(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case formUnreserved(c):
			dst = append(dst, c)
		case c == ' ':
			dst = append(dst, '+')
		default:
			dst = append(dst, '%', hex[c>>4], hex[c&0x0f])
		}
	}
	return dst
}

// formUnreserved reports whether c is written as itself in form encoding.
func formUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '*' || c == '-' || c == '.' || c == '_'
}
