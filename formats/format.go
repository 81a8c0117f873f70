// Package formats names the body formats of a Cloud Tasks task: how the body fields of a Go
// struct element become the request body. A Format is plain data (a name and options), built
// with one of the five constructors, JSON, FormURLEncoded, CSV, Raw and Avro, and adjusted
// with With; it goes into HTTPTarget.Body or AppEngineTarget.Body of package cloudtasksio, or
// into the "format" option key of cloudtasksio.ConfigFromOptions.
//
// Fields of the element tagged `cloudtasks:"<key>"` are request metadata (URL, method,
// headers, routing, schedule time, task id) and never reach the body; the metadata document
// linked below lists the keys. Everything that can be checked from the element's Go type and the format is
// checked when the pipeline is constructed (cloudtasksio.TryWrite), so an element type that
// its format cannot encode, an unknown option or a bad option value fails before the pipeline
// runs, with an error naming the field or option.
//
// The element type is a struct (or a pointer to one), or a plain string or []byte type (a
// PCollection<string>, say), whose whole value is the body and which carries no metadata:
// JSON sends it unchanged as a JSON document, Raw sends it as it is, Avro writes it as one
// value of a "string" or "bytes" schema, and CSV and FormURLEncoded refuse it at construction.
// Any other element type is a construction error.
//
// Each format but raw sends its media type as the task's Content-Type when the target's
// headers set none (JSON application/json, CSV text/csv, Avro avro/binary; form-urlencoded
// always sends its own). The avro encoder lives in package formats/avro, which a program that
// writes Avro imports.
//
// The formats are described in
// https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/formats.md and the
// metadata keys in https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/metadata.md.
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
// order; metadata fields never appear. A plain string or []byte element holds a JSON document
// already: it is sent unchanged, and an element that is not one JSON value goes to the failure
// policy (code SERIALIZATION). The task's Content-Type is application/json unless the target's
// headers (fixed or per element) set one.
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
// time.Time or other encoding.TextMarshaler types, or pointers to them. A plain string or
// []byte element is refused at construction (it has no fields; send a string that holds a CSV
// line with Raw). The task's Content-Type is text/csv unless the target's headers (fixed or per
// element) set one.
func CSV() Format { return Format{Name: NameCSV} }

// Raw sends the element's single string or []byte body field as the body, bytes as given. The
// element type must have exactly one body field (tag the others as metadata or json:"-"), or
// be a plain string or []byte type, whose value is the body. It sets no Content-Type: the
// target's headers decide.
func Raw() Format { return Format{Name: NameRaw} }

// Avro encodes the body fields as one Avro datum in binary encoding (no container file, no
// schema fingerprint) with the given writer schema (JSON text). For a struct element the
// schema must be a record whose fields match the body fields one to one by name; a plain string
// or []byte element is written as one value of the schema ("string" or "bytes"). Every field's
// Go type is checked against its Avro type at construction. Map entries are written in sorted
// key order, so equal elements give equal bytes. The task's Content-Type is avro/binary unless
// the target's headers (fixed or per element) set one.
//
// The encoder is in package github.com/beam-cloudtasks/beam-cloudtasks/formats/avro, which
// keeps the Avro library out of programs that do not use it: import that package (blank, or
// for its avro.Format, which returns this same value) in the program that builds the pipeline,
// or construction fails with an error naming the import.
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
