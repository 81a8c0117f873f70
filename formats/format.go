// Package formats names the body formats of a Cloud Tasks task: how the body fields of a Go
// struct element become the request body. A Format is plain data (a name and options), built
// with one of the five constructors, JSON, FormURLEncoded, CSV, Raw and Avro, and adjusted
// with With; it goes into HTTPTarget.Body or AppEngineTarget.Body of package cloudtasksio, or
// into the "format" option key of cloudtasksio.ConfigFromOptions.
//
// Fields of the element tagged `cloudtasks:"<key>"` are request metadata (URL, method,
// headers, routing, schedule time, task id) and never reach the body; docs/metadata.md lists
// the keys. Everything that can be checked from the element's Go type and the format is
// checked when the pipeline is constructed (cloudtasksio.TryWrite), so an element type that
// its format cannot encode, an unknown option or a bad option value fails before the pipeline
// runs, with an error naming the field or option. docs/formats.md describes each format.
package formats

import "maps"

// Format names a body encoding and its options. It is plain data so that it survives the
// serialization of a Beam DoFn; the encoder itself is built on the worker.
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

// JSON encodes the body fields of an element as one JSON object with encoding/json semantics
// (json tag names, omitempty, ",string", custom marshalers, HTML-safe escaping), in declaration
// order; metadata fields never appear. A plain string or []byte element is encoded as one JSON
// value. It sets no Content-Type header: set one in the target's headers if the endpoint
// needs it.
func JSON() Format { return Format{Name: NameJSON} }

// FormURLEncoded encodes the body fields as an application/x-www-form-urlencoded body and sets
// that Content-Type itself. Body fields must be string, []string or []*string, or pointers to
// them; any other type is rejected at construction (convert it to a string field). Fields
// appear in declaration order, a slice repeats the field name once per entry, a nil pointer or
// an empty slice adds nothing, "" is kept as "name=", and a nil entry in a []*string fails the
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
// schema must be a record whose fields match the body fields one to one by name; every field's
// Go type is checked against its Avro type at construction. Map entries are written in sorted
// key order, so equal elements give equal bytes. It sets no Content-Type.
func Avro(schema string) Format {
	return Format{Name: NameAvro, Options: map[string]string{OptionAvroSchema: schema}}
}

// IsZero reports whether f is the zero Format, which sends no body.
func (f Format) IsZero() bool { return f.Name == "" && len(f.Options) == 0 }

// With returns a copy of f with the option key set to value; f itself is not modified. Keys
// are not checked here: an unknown key or a bad value is reported at pipeline construction,
// naming the key.
func (f Format) With(key, value string) Format {
	opts := make(map[string]string, len(f.Options)+1)
	maps.Copy(opts, f.Options)
	opts[key] = value
	return Format{Name: f.Name, Options: opts}
}
