// Package avro is the avro body format's encoder. Importing it (for its Format function, or
// blank for its side effect) registers the encoder, so that a pipeline whose HTTPTarget.Body or
// AppEngineTarget.Body is formats.Avro(schema), or whose options say format=avro, can be built:
//
//	import _ "github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"
//
// It lives apart from package formats so that programs which never write Avro do not link an
// Avro library (github.com/hamba/avro/v2). Without the import, such a pipeline fails at
// construction with an error that names this package. Import it in the package that builds the
// pipeline: Beam runs the same binary on the workers, where the encoder is built again.
//
// The body is one Avro datum in binary encoding (no container file, no schema fingerprint),
// written with the writer schema given as JSON text. For a struct element the schema must be
// a record whose fields match the body fields one to one by name (json tag name, else the Go
// name); every field's Go type is checked against its Avro type at construction. A plain
// string or []byte element is written as one value of the schema (a "string" or "bytes"
// schema, for example). Map entries are written in sorted key order, so equal elements give
// equal bytes. The task's Content-Type is avro/binary unless the target's headers set one.
// https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/formats.md describes the
// Go types each Avro type accepts.
package avro

import (
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

func init() { bodyformat.Register(formats.NameAvro, parseOptions) }

// ContentType is the media type an avro body is sent with when the target's headers set no
// Content-Type of their own.
const ContentType = bodyformat.AvroContentType

// Format returns formats.Avro(schema): the avro body format with the given writer schema (JSON
// text). Calling it also makes the import that registers the encoder impossible to forget.
func Format(schema string) formats.Format { return formats.Avro(schema) }
