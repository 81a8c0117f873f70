// Package formats turns Go struct elements into Cloud Tasks request bodies and reads the
// request metadata (URL, method, headers, routing, schedule time, task id) that an element
// carries in fields tagged `cloudtasks:"<key>"`.
//
// NewSchema splits an element type into body fields and metadata fields; a Format (json,
// form-urlencoded, csv, raw, avro) checks the body fields once with NewEncoder and then encodes
// elements. Everything that can be checked from the Go type is checked at construction, so a
// pipeline with an element type its format cannot encode fails before it runs. The package
// does not depend on Beam.
package formats

import (
	"fmt"
	"slices"
	"strings"
)

// Format names a body encoding and its options. It is plain data so that it survives the
// serialization of a Beam DoFn; the encoder itself is built on the worker by NewEncoder.
//
// The zero Format means "no body": the task is created without one.
type Format struct {
	// Name is the format's identifier: "json", "form-urlencoded", "csv", "raw" or "avro".
	Name string
	// Options are format-specific settings, keyed as in the option reference (for example
	// "field-delimiter" for csv or "schema" for avro).
	Options map[string]string
}

// Names of the built-in formats.
const (
	NameJSON           = "json"
	NameFormURLEncoded = "form-urlencoded"
	NameCSV            = "csv"
	NameRaw            = "raw"
	NameAvro           = "avro"
)

// JSON encodes the body fields of an element as one JSON object with encoding/json semantics
// (json tag names, omitempty, ",string", custom marshalers, HTML-safe escaping), in declaration
// order; metadata fields never appear. A plain string or []byte element is encoded as one JSON
// value. It sets no Content-Type header: set one in the target's headers if the endpoint
// needs it.
func JSON() Format { return Format{Name: NameJSON} }

// FormURLEncoded encodes the body fields as an application/x-www-form-urlencoded body and sets
// that Content-Type itself. Body fields must be string, []string or []*string, or pointers to
// them; any other type is rejected by NewEncoder (convert it to a string field). Fields appear
// in declaration order, a slice repeats the field name once per entry, a nil pointer or an
// empty slice adds nothing, "" is kept as "name=", and a nil entry in a []*string fails the
// element. Names and values are encoded byte by byte: letters, digits and "*-._" stay, space
// becomes '+', everything else becomes %XX (uppercase).
func FormURLEncoded() Format { return Format{Name: NameFormURLEncoded} }

// CSV encodes the body fields as one CSV record (no header line, no trailing newline). Options:
// "field-delimiter" (one character, default ","; `\t` means tab), "null-literal" (written for
// a nil pointer or nil []byte, default ""), "quote-character" (default `"`) and
// "disable-quote-character" ("true" never quotes; a value that would need quotes then fails the
// element). Body fields must be scalars: strings, booleans, integers, floats, []byte (base64),
// time.Time or other encoding.TextMarshaler types, or pointers to them. It sets no Content-Type.
func CSV() Format { return Format{Name: NameCSV} }

// Raw sends the element's single string or []byte body field as the body, bytes as given. The
// element type must have exactly one body field (tag the others as metadata or json:"-"), or
// be a plain string or []byte type. It sets no Content-Type.
func Raw() Format { return Format{Name: NameRaw} }

// Avro encodes the body fields as one Avro datum in binary encoding (no container file, no
// schema fingerprint) with the given writer schema (JSON text). For a struct element the
// schema must be a record whose fields match the body fields one to one by name; NewEncoder
// checks every field's Go type against its Avro type. Map entries are written in sorted key
// order, so equal elements give equal bytes. It sets no Content-Type.
func Avro(schema string) Format {
	return Format{Name: NameAvro, Options: map[string]string{OptionAvroSchema: schema}}
}

// IsZero reports whether f is the zero Format, which sends no body.
func (f Format) IsZero() bool { return f.Name == "" && len(f.Options) == 0 }

// With returns a copy of f with the option key set to value; f itself is not modified.
func (f Format) With(key, value string) Format {
	opts := make(map[string]string, len(f.Options)+1)
	for k, v := range f.Options {
		opts[k] = v
	}
	opts[key] = value
	return Format{Name: f.Name, Options: opts}
}

// FormContentType is the Content-Type the form-urlencoded format sets on every task it encodes.
const FormContentType = "application/x-www-form-urlencoded"

// Option keys of the csv format (Format.Options keys; the flat option form prefixes them with
// "csv.", for example "csv.field-delimiter").
const (
	OptionCSVFieldDelimiter        = "field-delimiter"
	OptionCSVNullLiteral           = "null-literal"
	OptionCSVQuoteCharacter        = "quote-character"
	OptionCSVDisableQuoteCharacter = "disable-quote-character"
)

// OptionAvroSchema is the avro format's option key holding the schema as JSON text (flat option
// form: "avro.schema").
const OptionAvroSchema = "schema"

// optionKeys lists the option keys each format accepts.
var optionKeys = map[string][]string{
	NameJSON:           nil,
	NameFormURLEncoded: nil,
	NameCSV: {OptionCSVFieldDelimiter, OptionCSVNullLiteral, OptionCSVQuoteCharacter,
		OptionCSVDisableQuoteCharacter},
	NameRaw:  nil,
	NameAvro: {OptionAvroSchema},
}

// Names returns the names of the built-in formats.
func Names() []string {
	return []string{NameJSON, NameFormURLEncoded, NameCSV, NameRaw, NameAvro}
}

// OptionKeys returns the option keys the named format accepts (without the "<name>." prefix of
// the flat option form) and whether the format exists. A format without options returns an
// empty list and true.
func OptionKeys(name string) ([]string, bool) {
	keys, ok := optionKeys[name]
	return append([]string(nil), keys...), ok
}

// Validate checks the format's name, its option keys and their values without looking at any
// element type. The zero Format (no body) is valid. Errors name the offending option key.
func (f Format) Validate() error {
	_, err := f.settings()
	return err
}

// settings validates f and returns its parsed per-format settings.
func (f Format) settings() (any, error) {
	if f.Name == "" {
		if len(f.Options) > 0 {
			return nil, fmt.Errorf("formats: options given without a format name")
		}
		return nil, nil
	}
	keys, ok := optionKeys[f.Name]
	if !ok {
		return nil, fmt.Errorf("formats: unknown format %q; known formats: %s", f.Name, strings.Join(Names(), ", "))
	}
	for k := range f.Options {
		if !slices.Contains(keys, k) {
			if len(keys) == 0 {
				return nil, fmt.Errorf("formats: format %s: unknown option %q; it takes no options", f.Name, k)
			}
			return nil, fmt.Errorf("formats: format %s: unknown option %q; known options: %s", f.Name, k, strings.Join(keys, ", "))
		}
	}
	switch f.Name {
	case NameCSV:
		return parseCSVOptions(f.Options)
	case NameAvro:
		return parseAvroOptions(f.Options)
	}
	return nil, nil
}

// Encoder turns one element into body bytes. An Encoder is built once (per worker) by
// Format.NewEncoder and used for many elements; the built-in encoders are safe for concurrent use.
type Encoder interface {
	// Encode returns the body for one element of the schema's type. A failure specific to the
	// element (for example a nil entry in a form field's slice) is an error naming the field,
	// never containing the element's data.
	Encode(elem any) ([]byte, error)
	// ContentType returns the Content-Type the format sets itself (FormContentType for
	// form-urlencoded), or "" when the target's headers decide.
	ContentType() string
}

// NewEncoder validates f and the schema's body fields for the format and returns an encoder.
// Errors name the offending option key or body field. The zero Format returns an encoder that
// produces no body (nil).
func (f Format) NewEncoder(s *Schema) (Encoder, error) {
	if s == nil {
		return nil, fmt.Errorf("formats: NewEncoder needs a schema")
	}
	settings, err := f.settings()
	if err != nil {
		return nil, err
	}
	switch f.Name {
	case "":
		return noBody{}, nil
	case NameJSON:
		return newJSONEncoder(s)
	case NameFormURLEncoded:
		return newFormEncoder(s)
	case NameCSV:
		return newCSVEncoder(s, settings.(csvOptions))
	case NameRaw:
		return newRawEncoder(s)
	case NameAvro:
		return newAvroEncoder(s, settings.(avroOptions))
	}
	return nil, fmt.Errorf("formats: unknown format %q", f.Name)
}

// noBody is the encoder of the zero Format.
type noBody struct{}

func (noBody) Encode(any) ([]byte, error) { return nil, nil }
func (noBody) ContentType() string        { return "" }

// CanonicalContentType returns the Content-Type the format sets on every task itself
// (FormContentType for form-urlencoded), or "" for formats that leave it to the headers.
func CanonicalContentType(f Format) string {
	if f.Name == NameFormURLEncoded {
		return FormContentType
	}
	return ""
}

// ContentTypeMatches reports whether a Content-Type header value supplied by the user is
// equivalent to the one a format owns: the same media type compared case-insensitively, with
// surrounding spaces ignored. A value with parameters (such as "; charset=UTF-8") does not
// match. Callers replace a matching value with the canonical spelling and reject any other.
func ContentTypeMatches(owned, value string) bool {
	return owned != "" && strings.EqualFold(strings.TrimSpace(value), owned)
}
