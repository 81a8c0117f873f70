package deadletter

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// maxTypeNameInError bounds a type name repeated in an error.
const maxTypeNameInError = 256

// ElementTypeName is the name FailedElement.ElementType gives elements of type t: the package
// path and name of a named type ("github.com/acme/orders.Order", "time.Time"), otherwise
// the type as Go writes it ("string", "[]uint8", "*orders.Order").
func ElementTypeName(t reflect.Type) string {
	if t == nil {
		return ""
	}
	if t.Name() != "" && t.PkgPath() != "" {
		return t.PkgPath() + "." + t.Name()
	}
	return t.String()
}

// ElementEncoder encodes the elements of one Go type for FailedElement.Element, with the
// Beam coder Beam infers for that type (the coder of a PCollection of it, unless the
// pipeline set another one). A sink makes one per element type, for example when its DoFn is
// set up, and calls Encode only for the elements that fail. Between calls it keeps an
// encoding buffer of at most 1 MiB. It is not safe for concurrent use.
type ElementEncoder struct {
	enc  beam.ElementEncoder
	name string
	buf  bytes.Buffer
}

// NewElementEncoder returns the encoder of elements of type t. It fails when Beam infers no
// coder for t.
func NewElementEncoder(t reflect.Type) (*ElementEncoder, error) {
	enc, err := newElementEncoder(t)
	return enc, withPrefix(err)
}

// newElementEncoder is NewElementEncoder without the package prefix on its errors.
func newElementEncoder(t reflect.Type) (enc *ElementEncoder, err error) {
	if t == nil {
		return nil, errors.New("NewElementEncoder: the element type is nil")
	}
	name := ElementTypeName(t)
	defer func() {
		// Beam reports a type it has no coder for by panicking.
		if r := recover(); r != nil {
			//lint:ignore ST1005 Beam is a name; the package prefix comes before it (withPrefix)
			enc, err = nil, fmt.Errorf("Beam has no coder for element type %s: %s",
				boundedtext.Cut(name, maxTypeNameInError), boundedtext.Sprint(r, maxTypeNameInError))
		}
	}()
	return &ElementEncoder{enc: beam.NewElementEncoder(t), name: name}, nil
}

// maxKeptBuffer is the largest encoding buffer an ElementEncoder keeps for the next element.
// The encoder lives as long as its sink's DoFn instance: a buffer that grew for one rare huge
// element would otherwise hold that much memory until the worker stops.
const maxKeptBuffer = 1 << 20

// TypeName is ElementTypeName of the encoder's type, the value for FailedElement.ElementType.
func (e *ElementEncoder) TypeName() string { return e.name }

// Encode returns v, an element of the encoder's type, as FailedElement.Element: a new slice
// each call. An element the coder cannot encode is an error that does not repeat the element.
func (e *ElementEncoder) Encode(v any) ([]byte, error) {
	out, err := e.encode(v)
	return out, withPrefix(err)
}

// encode is Encode without the package prefix on its errors.
func (e *ElementEncoder) encode(v any) (out []byte, err error) {
	defer func() {
		if e.buf.Cap() > maxKeptBuffer {
			e.buf = bytes.Buffer{}
		}
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("encoding an element of type %s panicked: %s",
				boundedtext.Cut(e.name, maxTypeNameInError), boundedtext.Sprint(r, maxTypeNameInError))
		}
	}()
	e.buf.Reset()
	if err := e.enc.Encode(v, &e.buf); err != nil {
		return nil, fmt.Errorf("encoding an element of type %s: %s",
			boundedtext.Cut(e.name, maxTypeNameInError), boundedtext.Cut(err.Error(), maxTypeNameInError))
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// EncodeElement encodes v for a FailedElement: the Element and ElementType to set. It builds
// a new ElementEncoder each call; a sink that encodes many elements keeps one instead.
func EncodeElement[T any](v T) (element []byte, typeName string, err error) {
	enc, err := newElementEncoder(reflect.TypeFor[T]())
	if err != nil {
		return nil, "", withPrefix(err)
	}
	b, err := enc.encode(v)
	if err != nil {
		return nil, "", withPrefix(err)
	}
	return b, enc.TypeName(), nil
}

// Errors of DecodeElement, for errors.Is.
var (
	// ErrNoElement: the dead letter carries no element.
	ErrNoElement = errors.New("the dead letter carries no element")
	// ErrElementType: the dead letter's element is of another type than the one asked for.
	ErrElementType = errors.New("the dead letter's element is of another type")
)

// DecodeElement returns the input element that fe carries, decoded as a T: the element a
// sink failed to write, ready to be fixed and written again. T must be the element type of
// the sink's input PCollection.
//
// It fails, with an error that repeats no element bytes, when fe carries no element
// (ErrNoElement: see FailedElement.Element for when that happens; fe.Error then says why),
// when fe.ElementType names another type than T (ErrElementType), or when the bytes do not
// decode as exactly one T. A dead letter without ElementType is decoded as a T without the
// type check.
//
// Decode only dead letters your own pipelines wrote: Beam's coders trust the lengths the
// bytes announce, so bytes crafted to announce a huge slice make the decoder try to allocate
// it, which can exhaust the worker's memory (found by fuzzing). Anyone who may publish to a
// dead-letter topic can write such bytes; keep that permission to the pipeline.
func DecodeElement[T any](fe FailedElement) (T, error) {
	var zero T
	v, err := decodeElementAs(fe, reflect.TypeFor[T]())
	if err != nil {
		return zero, withPrefix(err)
	}
	return v.(T), nil
}

// DecodeElementAs is DecodeElement for a type known only at run time, as in a DoFn that
// takes the type as a beam.EncodedType: the element is returned as an any holding a value of
// type t.
func DecodeElementAs(fe FailedElement, t reflect.Type) (any, error) {
	v, err := decodeElementAs(fe, t)
	return v, withPrefix(err)
}

// decodeElementAs is DecodeElementAs without the package prefix on its errors.
func decodeElementAs(fe FailedElement, t reflect.Type) (v any, err error) {
	if t == nil {
		return nil, errors.New("DecodeElement: the element type is nil")
	}
	want := ElementTypeName(t)
	if len(fe.Element) == 0 {
		return nil, fmt.Errorf("DecodeElement: %w (code %s)", ErrNoElement, boundedtext.Cut(fe.Code, 64))
	}
	if fe.ElementType != "" && fe.ElementType != want {
		return nil, fmt.Errorf("DecodeElement: %w: it holds a %s, not a %s", ErrElementType,
			boundedtext.Cut(fe.ElementType, maxTypeNameInError), boundedtext.Cut(want, maxTypeNameInError))
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("DecodeElement: decoding %d bytes as %s panicked: %s", len(fe.Element),
				boundedtext.Cut(want, maxTypeNameInError), boundedtext.Sprint(r, maxTypeNameInError))
		}
	}()
	r := bytes.NewReader(fe.Element)
	got, err := beam.NewElementDecoder(t).Decode(r)
	if err != nil {
		return nil, fmt.Errorf("DecodeElement: the %d element bytes do not decode as %s: %s", len(fe.Element),
			boundedtext.Cut(want, maxTypeNameInError), boundedtext.Cut(err.Error(), maxTypeNameInError))
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("DecodeElement: the element bytes do not decode as one %s: %d of %d bytes are left over",
			boundedtext.Cut(want, maxTypeNameInError), r.Len(), len(fe.Element))
	}
	if got == nil || reflect.TypeOf(got) != t {
		return nil, fmt.Errorf("DecodeElement: Beam's decoder for %s returned a %T", boundedtext.Cut(want, maxTypeNameInError), got)
	}
	return got, nil
}
