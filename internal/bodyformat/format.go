// Package bodyformat is the machinery behind package formats: it splits a Go element type into
// body fields and request metadata (NewSchema), reads the metadata of one element
// (Schema.Metadata), checks a formats.Format (Validate) and builds its encoder (NewEncoder).
// Package cloudtasksio uses it; users configure formats.Format values and never see it.
//
// Each built-in format is one row of the format table (a spec): its name, its option keys, the
// parser of its option values, its encoder and the Content-Type it sets. Every question about a
// format (which options, which Content-Type, does it exist) is answered by that row. Error
// messages start with "formats:", the package the user configures. The package does not
// depend on Beam.
package bodyformat

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// FormContentType is the Content-Type the form-urlencoded format sets on every task it encodes.
const FormContentType = "application/x-www-form-urlencoded"

// spec is one row of the format table.
type spec struct {
	// name is the format's formats.Format.Name.
	name string
	// options are the option keys the format accepts, in documentation order.
	options []string
	// contentType is the Content-Type the format sets itself, "" when the target's headers
	// decide.
	contentType string
	// parse checks the option values (the keys are already known to be in options) and
	// returns the encoder constructor they configure.
	parse func(opts map[string]string) (newEncoder, error)
}

// newEncoder checks a schema's body fields for a format and returns the format's encoder.
type newEncoder func(s *Schema) (encoder, error)

// encoder turns one element of the schema's type into body bytes.
type encoder interface {
	Encode(elem any) ([]byte, error)
}

// withoutOptions is the parser of a format that takes no options.
func withoutOptions(n newEncoder) func(map[string]string) (newEncoder, error) {
	return func(map[string]string) (newEncoder, error) { return n, nil }
}

// table lists the built-in formats in documentation order; each row is defined in the file of
// its encoder.
var table = []spec{jsonSpec, formSpec, csvSpec, rawSpec, avroSpec}

// lookup returns the row of the named format.
func lookup(name string) (spec, bool) {
	i := slices.IndexFunc(table, func(s spec) bool { return s.name == name })
	if i < 0 {
		return spec{}, false
	}
	return table[i], true
}

// Names returns the names of the built-in formats.
func Names() []string {
	names := make([]string, len(table))
	for i, s := range table {
		names[i] = s.name
	}
	return names
}

// OptionKeys returns the option keys the named format accepts (without the "<name>." prefix of
// the flat option form) and whether the format exists. A format without options returns an
// empty list and true.
func OptionKeys(name string) ([]string, bool) {
	s, ok := lookup(name)
	return slices.Clone(s.options), ok
}

// ContentType returns the Content-Type the format sets on every task itself (FormContentType
// for form-urlencoded), or "" for formats that leave it to the headers and for the zero or an
// unknown Format.
func ContentType(f formats.Format) string {
	s, _ := lookup(f.Name)
	return s.contentType
}

// ContentTypeMatches reports whether a Content-Type header value supplied by the user is
// equivalent to the one a format owns: the same media type compared case-insensitively, with
// surrounding spaces ignored. A value with parameters (such as "; charset=UTF-8") does not
// match. Callers replace a matching value with the canonical spelling and reject any other.
func ContentTypeMatches(owned, value string) bool {
	return owned != "" && strings.EqualFold(strings.TrimSpace(value), owned)
}

// OptionError is the error of an unknown option key or a bad option value. Options are the
// option keys the problem is about (without the "<format>." prefix of the flat option form), in
// the order the message names them, so that a caller with its own spelling of the keys can
// point at the right one without reading the message.
type OptionError struct {
	Options []string
	err     error
}

// Error returns the message, which names the option keys in Options.
func (e *OptionError) Error() string { return e.err.Error() }

// Unwrap returns what err wraps (the schema parser's error for an avro schema that does not
// parse).
func (e *OptionError) Unwrap() error { return errors.Unwrap(e.err) }

func optionError(err error, options ...string) error {
	return &OptionError{Options: options, err: err}
}

// Validate checks the format's name, its option keys and their values without looking at any
// element type. The zero Format (no body) is valid. Errors name the offending option key, in
// the message and, as an *OptionError, in its Options.
func Validate(f formats.Format) error {
	_, _, err := parse(f)
	return err
}

// parse validates f and returns its row and the encoder constructor its options configure;
// both are zero for the zero Format.
func parse(f formats.Format) (spec, newEncoder, error) {
	if f.Name == "" {
		if len(f.Options) > 0 {
			return spec{}, nil, fmt.Errorf("formats: options given without a format name")
		}
		return spec{}, nil, nil
	}
	s, ok := lookup(f.Name)
	if !ok {
		return spec{}, nil, fmt.Errorf("formats: unknown format %q; known formats: %s", f.Name, strings.Join(Names(), ", "))
	}
	for k := range f.Options {
		if !slices.Contains(s.options, k) {
			if len(s.options) == 0 {
				return spec{}, nil, optionError(fmt.Errorf("formats: format %s: unknown option %q; it takes no options", f.Name, k), k)
			}
			return spec{}, nil, optionError(fmt.Errorf("formats: format %s: unknown option %q; known options: %s", f.Name, k, strings.Join(s.options, ", ")), k)
		}
	}
	n, err := s.parse(f.Options)
	if err != nil {
		return spec{}, nil, err
	}
	return s, n, nil
}

// Encoder turns one element into body bytes. An Encoder is built once (per worker) by
// NewEncoder and used for many elements; it is safe for concurrent use.
type Encoder struct {
	enc         encoder // nil: the zero Format, no body
	contentType string
}

// Encode returns the body for one element of the schema's type (nil for the zero Format). A
// failure specific to the element (for example a nil entry in a form field's slice) is an
// error naming the field, never containing the element's data.
func (e *Encoder) Encode(elem any) ([]byte, error) {
	if e.enc == nil {
		return nil, nil
	}
	return e.enc.Encode(elem)
}

// ContentType returns the Content-Type the format sets itself (FormContentType for
// form-urlencoded), or "" when the target's headers decide.
func (e *Encoder) ContentType() string { return e.contentType }

// NewEncoder validates f and the schema's body fields for the format and returns an encoder.
// Errors name the offending option key or body field. The zero Format returns an encoder that
// produces no body (nil).
func NewEncoder(f formats.Format, s *Schema) (*Encoder, error) {
	if s == nil {
		return nil, fmt.Errorf("formats: NewEncoder needs a schema")
	}
	row, n, err := parse(f)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return &Encoder{}, nil
	}
	enc, err := n(s)
	if err != nil {
		return nil, err
	}
	return &Encoder{enc: enc, contentType: row.contentType}, nil
}
