package bodyformat

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary/boundarytest"
)

// TestNoHandWrittenPackagePrefixOutsideTheBoundary keeps the package prefix in boundary.go.
// (formats/avro has the same test for its own files.)
func TestNoHandWrittenPackagePrefixOutsideTheBoundary(t *testing.T) {
	boundarytest.Parse(t, 7).NoHandWrittenPrefix(t, string(pkgPrefix), true)
}

// insideTheBoundary are the exported functions and methods whose errors stay inside the
// formats family: the helpers encoder packages call and the encoders themselves. Their errors
// leave through NewEncoder or Encoder.Encode, which add the prefix; adding it here too would
// show it twice ("formats: avro: formats: ...").
var insideTheBoundary = map[string]bool{
	"Schema.Value": true, "NestedFields": true, "NewOptionError": true,
	"jsonEncoder.Encode": true, "rawEncoder.Encode": true, "formEncoder.Encode": true, "csvEncoder.Encode": true,
}

// TestExportedFunctionsReturnTheirErrorsThroughTheBoundary checks that every exported
// function or method returning an error, but those inside the boundary, returns it through
// withPrefix, and that the Error method of an exported error type returns prefixText(...).
func TestExportedFunctionsReturnTheirErrorsThroughTheBoundary(t *testing.T) {
	checked := boundarytest.Parse(t, 7).ExportedReturnThroughTheBoundary(t, insideTheBoundary)
	for _, name := range []string{"NewSchema", "Schema.Metadata", "Schema.CheckKeys", "Validate", "NewEncoder", "Encoder.Encode", "OptionError.Error"} {
		assert.True(t, checked[name], "%s was not found: the check saw no such function", name)
	}
}

// assertPrefixedOnce checks that err starts with the package prefix and carries it once (the
// list of known formats, "known formats: ...", is not a prefix).
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	boundarytest.PrefixedOnce(t, err, string(pkgPrefix), what)
}

type nilEntries struct {
	Tags []*string `json:"tags"`
}

// TestErrorsLeaveWithThePrefixOnce drives each boundary function into a failure built in a
// different place (the schema, a metadata key, the format table, an option parser, an
// encoder's construction and an element) and checks the error a caller gets: the prefix once,
// at its start, with what errors.As and errors.Is need still reachable.
func TestErrorsLeaveWithThePrefixOnce(t *testing.T) {
	_, err := NewSchema(nil)
	assertPrefixedOnce(t, err, "NewSchema(nil)")
	_, err = NewSchema(reflect.TypeFor[struct {
		When int64 `cloudtasks:"schedule-time"`
	}]())
	assertPrefixedOnce(t, err, "NewSchema with a metadata field of the wrong type")

	s := schemaOf[everyKey](t)
	assertPrefixedOnce(t, s.CheckKeys(nil, "these targets"), "CheckKeys")
	_, err = s.Metadata("not an everyKey")
	assertPrefixedOnce(t, err, "Metadata of another type")
	_, err = s.Metadata((*everyKey)(nil))
	assertPrefixedOnce(t, err, "Metadata of a nil pointer")

	assertPrefixedOnce(t, Validate(formats.Format{Name: "xml"}), "Validate of an unknown format")
	assertPrefixedOnce(t, Validate(formats.Avro(`"string"`)), "Validate of a format whose encoder is not linked")
	err = Validate(formats.CSV().With(formats.OptionCSVFieldDelimiter, "ab"))
	assertPrefixedOnce(t, err, "Validate of a bad option value")
	var oe *OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, []string{formats.OptionCSVFieldDelimiter}, oe.Options)
	assertPrefixedOnce(t, oe, "the *OptionError itself")

	_, err = NewEncoder(formats.CSV().With("quote", "'"), s)
	assertPrefixedOnce(t, err, "NewEncoder with an unknown option")
	require.ErrorAs(t, err, &oe)
	_, err = NewEncoder(formats.FormURLEncoded(), s)
	assertPrefixedOnce(t, err, "NewEncoder of a field the format cannot encode")
	_, err = NewEncoder(formats.JSON(), nil)
	assertPrefixedOnce(t, err, "NewEncoder without a schema")

	enc := encoderFor[nilEntries](t, formats.FormURLEncoded())
	_, err = enc.Encode(nilEntries{Tags: []*string{nil}})
	assertPrefixedOnce(t, err, "Encode of a nil form entry")
	for _, f := range []formats.Format{formats.JSON(), formats.FormURLEncoded(), formats.CSV(), formats.Raw()} {
		enc, err := NewEncoder(f, schemaOf[formOrder](t))
		if f.Name == formats.NameRaw || f.Name == formats.NameCSV {
			require.Error(t, err, "formOrder has several or non-scalar body fields")
			continue
		}
		require.NoError(t, err)
		_, err = enc.Encode(42)
		assertPrefixedOnce(t, err, f.Name+": Encode of another type")
	}
	_, err = encoderFor[string](t, formats.JSON()).Encode(`{"a":`)
	assertPrefixedOnce(t, err, "Encode of a string that is not JSON")
}
