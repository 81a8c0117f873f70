package avro

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary/boundarytest"
)

// formatsPrefix is the prefix package bodyformat adds to every error of the body formats, the
// avro encoder's included, where the error leaves it (bodyformat/boundary.go).
const formatsPrefix = "formats: "

// TestNoHandWrittenFormatsPrefix: the avro encoder's errors leave through package
// bodyformat's boundary, which prefixes them; a string literal that starts with the prefix here
// would show it twice.
func TestNoHandWrittenFormatsPrefix(t *testing.T) {
	boundarytest.Parse(t, 2).NoHandWrittenPrefix(t, formatsPrefix, false)
}

// assertPrefixedOnce checks that err starts with the formats prefix and the format's name (or
// Schema.Value's "element") and carries the prefix once.
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	boundarytest.PrefixedOnce(t, err, formatsPrefix, what)
	assert.True(t, strings.HasPrefix(err.Error(), formatsPrefix+"avro: ") || strings.HasPrefix(err.Error(), formatsPrefix+"element "),
		"%s: %q does not start with the prefix and the format's name", what, err)
}

// TestAvroErrorsCarryTheFormatsPrefixOnce: an error the avro encoder builds, or one it wraps
// from package bodyformat's helpers (Schema.Value, NestedFields), reaches the caller of
// bodyformat with the prefix once.
func TestAvroErrorsCarryTheFormatsPrefixOnce(t *testing.T) {
	err := bodyformat.Validate(formats.Avro("{"))
	assertPrefixedOnce(t, err, "a schema that does not parse")
	var oe *bodyformat.OptionError
	require.ErrorAs(t, err, &oe)
	assertPrefixedOnce(t, oe, "the *OptionError itself")

	_, err = bodyformat.NewEncoder(formats.Avro(`"long"`), schemaOf[string](t))
	assertPrefixedOnce(t, err, "a plain element of another type than the schema's")
	_, err = bodyformat.NewEncoder(formats.Avro(`"string"`), schemaOf[avroOrder](t))
	assertPrefixedOnce(t, err, "a struct element without a record schema")
	type nested struct {
		inner
		Name string `json:"name"`
	}
	type elem struct {
		C nested `json:"c"`
	}
	_, err = bodyformat.NewEncoder(formats.Avro(`{"type":"record","name":"R","fields":[{"name":"c","type":{"type":"record","name":"C","fields":[{"name":"name","type":"string"}]}}]}`),
		schemaOf[elem](t))
	assertPrefixedOnce(t, err, "an embedded field in a nested record (NestedFields)")

	enc := encoderFor[avroOrder](t, Format(orderSchema))
	_, err = enc.Encode("not an order")
	assertPrefixedOnce(t, err, "an element of another type (Schema.Value)")
	_, err = enc.Encode((*avroOrder)(nil))
	assertPrefixedOnce(t, err, "a nil element (Schema.Value)")
	enc = encoderFor[avroNode](t, formats.Avro(`{"type":"record","name":"Node","fields":[{"name":"value","type":"string"},{"name":"next","type":["null","Node"]}]}`))
	loop := &avroNode{Value: "a"}
	loop.Next = loop
	_, err = enc.Encode(*loop)
	assertPrefixedOnce(t, err, "a value the encoder refuses")
}
