// Package bodyformat is the machinery behind package formats: it splits a Go element type into
// body fields and request metadata (NewSchema), reads the metadata of one element
// (Schema.Metadata), checks a formats.Format (Validate) and builds its encoder (NewEncoder).
// Package cloudtasksio uses it; users configure formats.Format values and never see it.
//
// Each format is one row of the format table (a spec): its name, its option keys, the parser
// of its option values, its encoder and the Content-Type it sends. Every question about a
// format (which options, which Content-Type, does it exist) is answered by that row. The avro
// row's parser lives in package formats/avro, which installs it with Register when it is
// imported, so that programs that never write Avro do not link an Avro library. Error
// messages start with "formats: ", the package the user configures, added once where they
// leave the package (boundary.go). The package does not depend on Beam.
package bodyformat

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// FormContentType is the Content-Type the form-urlencoded format sets on every task it encodes.
const FormContentType = "application/x-www-form-urlencoded"

// Media types the other formats send when the headers set no Content-Type.
const (
	JSONContentType = "application/json"
	CSVContentType  = "text/csv"
	AvroContentType = "avro/binary"
)

// AvroPackage is the import path of the package that registers the avro format's encoder.
const AvroPackage = "github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"

// spec is one row of the format table.
type spec struct {
	// name is the format's formats.Format.Name.
	name string
	// options are the option keys the format accepts, in documentation order.
	options []string
	// contentType is the Content-Type the format owns: it sets it on every task and rejects
	// a header that says otherwise. "" when the headers decide.
	contentType string
	// defaultContentType is the Content-Type sent when the headers set none; a header
	// (fixed or per element) replaces it. "" sends none.
	defaultContentType string
	// parse checks the option values (the keys are already known to be in options) and
	// returns the encoder constructor they configure. It is nil for a format whose encoder
	// lives in a package of its own (registeredBy), which installs it with Register.
	parse OptionParser
	// registeredBy is the import path of the package that registers the format's parser,
	// "" for a format built into this package.
	registeredBy string
}

// OptionParser checks a format's option values (their keys are already known to be the
// format's) and returns the constructor of the encoder they configure. Errors about an option
// are *OptionError values (NewOptionError) naming it.
type OptionParser func(opts map[string]string) (EncoderFactory, error)

// EncoderFactory checks a schema's body fields for a format and returns the format's encoder.
// Errors name the offending body field.
type EncoderFactory func(s *Schema) (ElementEncoder, error)

// ElementEncoder turns one element of the schema's type into body bytes. It is used by many
// goroutines at once.
type ElementEncoder interface {
	Encode(elem any) ([]byte, error)
}

// withoutOptions is the parser of a format that takes no options.
func withoutOptions(n EncoderFactory) OptionParser {
	return func(map[string]string) (EncoderFactory, error) { return n, nil }
}

// avroSpec is the avro row: the required schema option and avro/binary as its default
// Content-Type; its encoder is in package formats/avro.
var avroSpec = spec{
	name:               formats.NameAvro,
	options:            []string{formats.OptionAvroSchema},
	defaultContentType: AvroContentType,
	registeredBy:       AvroPackage,
}

// registered holds the parsers installed by Register, by format name.
var registered struct {
	sync.RWMutex
	parsers map[string]OptionParser
}

// Register installs the option parser of a format whose encoder lives in a package of its own:
// package formats/avro calls it from its init function, as image/png registers its decoder
// with package image. It panics when the format is not one that takes a registration, when
// parse is nil, or when the format is registered twice.
func Register(name string, parse OptionParser) {
	s, ok := lookup(name)
	if !ok || s.registeredBy == "" {
		panic(fmt.Sprintf("bodyformat: Register(%q): not a format with an encoder package", name))
	}
	if parse == nil {
		panic(fmt.Sprintf("bodyformat: Register(%q): nil parser", name))
	}
	registered.Lock()
	defer registered.Unlock()
	if _, dup := registered.parsers[name]; dup {
		panic(fmt.Sprintf("bodyformat: Register(%q) called twice", name))
	}
	if registered.parsers == nil {
		registered.parsers = map[string]OptionParser{}
	}
	registered.parsers[name] = parse
}

// parserOf returns the row's option parser: its own, or the one its package registered.
func (s spec) parserOf() (OptionParser, error) {
	if s.parse != nil {
		return s.parse, nil
	}
	registered.RLock()
	p := registered.parsers[s.name]
	registered.RUnlock()
	if p == nil {
		return nil, fmt.Errorf("format %s: its encoder is not linked into this program: add the import "+
			"_ %q (or use its Format function) in the package that builds the pipeline", s.name, s.registeredBy)
	}
	return p, nil
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

// DefaultContentType returns the media type the format sends when the headers set no
// Content-Type, or "" when it sends none; see Encoder.DefaultContentType.
func DefaultContentType(f formats.Format) string {
	s, _ := lookup(f.Name)
	return s.defaultContentType
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
func (e *OptionError) Error() string { return prefixText(e.err.Error()) }

// Unwrap returns what err wraps (the schema parser's error for an avro schema that does not
// parse).
func (e *OptionError) Unwrap() error { return errors.Unwrap(e.err) }

// NewOptionError returns the *OptionError of options, with err's text (which names them,
// without the package prefix: OptionError.Error adds it) as its message. An option parser
// (OptionParser) returns it for an option it refuses.
func NewOptionError(err error, options ...string) error {
	return &OptionError{Options: options, err: err}
}

// Validate checks the format's name, its option keys and their values without looking at any
// element type. The zero Format (no body) is valid. Errors name the offending option key, in
// the message and, as an *OptionError, in its Options.
func Validate(f formats.Format) error {
	_, _, err := parse(f)
	return withPrefix(err)
}

// parse validates f and returns its row and the encoder constructor its options configure;
// both are zero for the zero Format.
func parse(f formats.Format) (spec, EncoderFactory, error) {
	if f.Name == "" {
		if len(f.Options) > 0 {
			return spec{}, nil, fmt.Errorf("options given without a format name")
		}
		return spec{}, nil, nil
	}
	s, ok := lookup(f.Name)
	if !ok {
		return spec{}, nil, fmt.Errorf("unknown format %s; known formats: %s", boundedtext.Quote(f.Name), strings.Join(Names(), ", "))
	}
	for k := range f.Options {
		if !slices.Contains(s.options, k) {
			if len(s.options) == 0 {
				return spec{}, nil, NewOptionError(fmt.Errorf("format %s: unknown option %s; it takes no options", f.Name, boundedtext.Quote(k)), k)
			}
			return spec{}, nil, NewOptionError(fmt.Errorf("format %s: unknown option %s; known options: %s", f.Name, boundedtext.Quote(k), strings.Join(s.options, ", ")), k)
		}
	}
	p, err := s.parserOf()
	if err != nil {
		return spec{}, nil, err
	}
	n, err := p(f.Options)
	if err != nil {
		return spec{}, nil, err
	}
	return s, n, nil
}

// Encoder turns one element into body bytes. An Encoder is built once (per worker) by
// NewEncoder and used for many elements; it is safe for concurrent use.
type Encoder struct {
	enc                ElementEncoder // nil: the zero Format, no body
	contentType        string
	defaultContentType string
}

// Encode returns the body for one element of the schema's type (nil for the zero Format). A
// failure specific to the element (for example a nil entry in a form field's slice) is an
// error naming the field, never containing the element's data.
func (e *Encoder) Encode(elem any) ([]byte, error) {
	if e.enc == nil {
		return nil, nil
	}
	body, err := e.enc.Encode(elem)
	return body, withPrefix(err)
}

// ContentType returns the Content-Type the format sets itself (FormContentType for
// form-urlencoded), or "" when the target's headers decide.
func (e *Encoder) ContentType() string { return e.contentType }

// DefaultContentType returns the media type to send when the target's headers set no
// Content-Type (JSONContentType, CSVContentType, AvroContentType), or "" for a format that
// sends none (raw, the zero Format) or owns its Content-Type (form-urlencoded: ContentType).
func (e *Encoder) DefaultContentType() string { return e.defaultContentType }

// NewEncoder validates f and the schema's body fields for the format and returns an encoder.
// Errors name the offending option key or body field. The zero Format returns an encoder that
// produces no body (nil).
func NewEncoder(f formats.Format, s *Schema) (*Encoder, error) {
	e, err := newEncoder(f, s)
	return e, withPrefix(err)
}

// newEncoder is NewEncoder without the package prefix on its errors; the encoder is nil on
// error.
func newEncoder(f formats.Format, s *Schema) (*Encoder, error) {
	if s == nil {
		return nil, fmt.Errorf("NewEncoder needs a schema")
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
	return &Encoder{enc: enc, contentType: row.contentType, defaultContentType: row.defaultContentType}, nil
}
