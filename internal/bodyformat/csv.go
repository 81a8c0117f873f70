package bodyformat

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// csvSpec is the csv row of the format table: four options, text/csv unless the headers say
// otherwise.
var csvSpec = spec{
	name:               formats.NameCSV,
	defaultContentType: CSVContentType,
	options: []string{formats.OptionCSVFieldDelimiter, formats.OptionCSVNullLiteral, formats.OptionCSVQuoteCharacter,
		formats.OptionCSVDisableQuoteCharacter},
	parse: func(opts map[string]string) (EncoderFactory, error) {
		o, err := parseCSVOptions(opts)
		if err != nil {
			return nil, err
		}
		return func(s *Schema) (ElementEncoder, error) { return newCSVEncoder(s, o) }, nil
	},
}

// csvOptions are the parsed options of the csv format.
type csvOptions struct {
	delimiter rune
	null      string
	quote     rune // 0 when quoting is disabled
}

func parseCSVOptions(opts map[string]string) (csvOptions, error) {
	o := csvOptions{delimiter: ',', quote: '"'}
	if v, ok := opts[formats.OptionCSVFieldDelimiter]; ok {
		r, err := csvChar(formats.OptionCSVFieldDelimiter, v)
		if err != nil {
			return o, err
		}
		o.delimiter = r
	}
	disable := false
	if v, ok := opts[formats.OptionCSVDisableQuoteCharacter]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, NewOptionError(fmt.Errorf("csv: option %q must be true or false", formats.OptionCSVDisableQuoteCharacter), formats.OptionCSVDisableQuoteCharacter)
		}
		disable = b
	}
	if v, ok := opts[formats.OptionCSVQuoteCharacter]; ok {
		if disable {
			return o, NewOptionError(fmt.Errorf("csv: options %q and %q=true cannot be combined", formats.OptionCSVQuoteCharacter, formats.OptionCSVDisableQuoteCharacter), formats.OptionCSVQuoteCharacter, formats.OptionCSVDisableQuoteCharacter)
		}
		r, err := csvChar(formats.OptionCSVQuoteCharacter, v)
		if err != nil {
			return o, err
		}
		o.quote = r
	}
	if disable {
		o.quote = 0
	}
	if o.quote == o.delimiter {
		return o, NewOptionError(fmt.Errorf("csv: options %q and %q must differ", formats.OptionCSVFieldDelimiter, formats.OptionCSVQuoteCharacter), formats.OptionCSVFieldDelimiter, formats.OptionCSVQuoteCharacter)
	}
	if v, ok := opts[formats.OptionCSVNullLiteral]; ok {
		if strings.ContainsRune(v, o.delimiter) || strings.ContainsAny(v, "\r\n") || o.quote != 0 && strings.ContainsRune(v, o.quote) {
			return o, NewOptionError(fmt.Errorf("csv: option %q must not contain the delimiter, the quote character or a line break", formats.OptionCSVNullLiteral), formats.OptionCSVNullLiteral)
		}
		o.null = v
	}
	return o, nil
}

// csvChar parses a one-character option; the two characters `\t` also mean a tab, for flags.
func csvChar(key, v string) (rune, error) {
	if v == `\t` {
		return '\t', nil
	}
	r, size := utf8.DecodeRuneInString(v)
	if v == "" || size != len(v) || r == utf8.RuneError {
		return 0, NewOptionError(fmt.Errorf("csv: option %q must be exactly one character", key), key)
	}
	if r == '\r' || r == '\n' {
		return 0, NewOptionError(fmt.Errorf("csv: option %q must not be a line break", key), key)
	}
	return r, nil
}

// csvWriter appends the text of one field value. present is false for a nil value, which is
// written as the null literal.
type csvWriter func(dst []byte, v reflect.Value) (out []byte, present bool, err error)

type csvField struct {
	Field
	write csvWriter
}

// csvEncoder writes one CSV record per element.
type csvEncoder struct {
	s      *Schema
	o      csvOptions
	fields []csvField
}

func newCSVEncoder(s *Schema, o csvOptions) (ElementEncoder, error) {
	if s.plain {
		return nil, fmt.Errorf("csv: element type %s has no fields to write as a record; to send a string that holds a CSV line as it is, use the raw format (and set Content-Type: text/csv in the target's headers)", s.typ)
	}
	e := &csvEncoder{s: s, o: o}
	for _, f := range s.body {
		w, ok := csvWriterOf(f.Type)
		if !ok {
			return nil, fmt.Errorf("csv: %s has Go type %s; the format accepts only scalar fields (strings, numbers, booleans, []byte, time.Time or other text marshalers) and pointers to them", f.Describe(), f.Type)
		}
		e.fields = append(e.fields, csvField{Field: f, write: w})
	}
	return e, nil
}

// csvWriterOf picks how a Go type is written as CSV text.
func csvWriterOf(t reflect.Type) (csvWriter, bool) {
	if t.Kind() != reflect.Pointer {
		return csvScalarWriter(t)
	}
	write := textWriter
	if !t.Implements(textMarshalerType) {
		inner, ok := csvScalarWriter(t.Elem())
		if !ok {
			return nil, false
		}
		write = func(dst []byte, v reflect.Value) ([]byte, bool, error) { return inner(dst, v.Elem()) }
	}
	return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
		if v.IsNil() {
			return dst, false, nil
		}
		return write(dst, v)
	}, true
}

func csvScalarWriter(t reflect.Type) (csvWriter, bool) {
	if t.Implements(textMarshalerType) {
		return textWriter, true
	}
	switch t.Kind() {
	case reflect.String:
		return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
			return append(dst, v.String()...), true, nil
		}, true
	case reflect.Bool:
		return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
			return strconv.AppendBool(dst, v.Bool()), true, nil
		}, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
			return strconv.AppendInt(dst, v.Int(), 10), true, nil
		}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
			return strconv.AppendUint(dst, v.Uint(), 10), true, nil
		}, true
	case reflect.Float32, reflect.Float64:
		bits := t.Bits()
		return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
			return appendFloat(dst, v.Float(), bits), true, nil
		}, true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return func(dst []byte, v reflect.Value) ([]byte, bool, error) {
				if v.IsNil() {
					return dst, false, nil
				}
				return base64.StdEncoding.AppendEncode(dst, v.Bytes()), true, nil
			}, true
		}
	}
	return nil, false
}

func textWriter(dst []byte, v reflect.Value) ([]byte, bool, error) {
	text, err := v.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return dst, true, fmt.Errorf("its MarshalText method failed")
	}
	return append(dst, text...), true, nil
}

// appendFloat writes a float the way encoding/json does: plain decimal notation for ordinary
// magnitudes, exponent notation for very large or small ones; NaN and infinities as
// strconv spells them.
func appendFloat(dst []byte, f float64, bits int) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && !math.IsInf(f, 0) && !math.IsNaN(f) {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	return strconv.AppendFloat(dst, f, format, -1, bits)
}

func (e *csvEncoder) Encode(elem any) ([]byte, error) {
	v, err := e.s.Value(elem)
	if err != nil {
		return nil, err
	}
	var out, text []byte
	for i, f := range e.fields {
		if i > 0 {
			out = utf8.AppendRune(out, e.o.delimiter)
		}
		var present bool
		text, present, err = f.write(text[:0], fieldValue(v, f.Field))
		if err != nil {
			return nil, fmt.Errorf("csv: %s: %w", f.Describe(), err)
		}
		if !present {
			out = append(out, e.o.null...)
			continue
		}
		if out, err = e.appendField(out, text); err != nil {
			return nil, fmt.Errorf("csv: %s: %w", f.Describe(), err)
		}
	}
	return out, nil
}

// appendField appends one field's text, quoted when it contains the delimiter, the quote
// character or a line break, or when it equals the null literal (so that a reader can tell a
// value from a null). Bytes that are not valid UTF-8 are copied unchanged.
func (e *csvEncoder) appendField(out, text []byte) ([]byte, error) {
	special := func(r rune) bool {
		return r == e.o.delimiter || r == '\r' || r == '\n' || e.o.quote != 0 && r == e.o.quote
	}
	needsQuotes := bytes.ContainsFunc(text, special)
	if e.o.quote == 0 {
		if needsQuotes {
			return out, fmt.Errorf("the value contains the delimiter or a line break, which cannot be written with quoting disabled")
		}
		return append(out, text...), nil
	}
	if !needsQuotes && string(text) != e.o.null {
		return append(out, text...), nil
	}
	out = utf8.AppendRune(out, e.o.quote)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRune(text[i:])
		if r == e.o.quote && size > 0 {
			out = utf8.AppendRune(out, r)
		}
		out = append(out, text[i:i+size]...)
		i += size
	}
	return utf8.AppendRune(out, e.o.quote), nil
}
