package bodyformat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func TestValidateNamesTheProblem(t *testing.T) {
	assert.NoError(t, Validate(formats.Format{}))
	for _, f := range []formats.Format{formats.JSON(), formats.FormURLEncoded(), formats.CSV(), formats.Raw()} {
		assert.NoError(t, Validate(f), f.Name)
	}
	assert.ErrorContains(t, Validate(formats.Format{Name: "xml"}), `unknown format "xml"; known formats: json, form-urlencoded, csv, raw, avro`)
	assert.ErrorContains(t, Validate(formats.Format{Name: "JSON"}), `unknown format "JSON"`)
	assert.ErrorContains(t, Validate(formats.JSON().With("pretty", "true")), `format json: unknown option "pretty"; it takes no options`)
	assert.ErrorContains(t, Validate(formats.FormURLEncoded().With("charset", "latin1")), `unknown option "charset"`)
	assert.ErrorContains(t, Validate(formats.Raw().With("raw.charset", "UTF-8")), `unknown option "raw.charset"`)
	assert.ErrorContains(t, Validate(formats.CSV().With("csv.field-delimiter", ";")), `unknown option "csv.field-delimiter"; known options: field-delimiter, null-literal, quote-character, disable-quote-character`)
	assert.ErrorContains(t, Validate(formats.Format{Options: map[string]string{"schema": "x"}}), "options given without a format name")
}

// This test binary does not import formats/avro, so the avro format has no encoder: building
// it is an error that says which import to add, whatever the options.
func TestAvroWithoutItsPackageNamesTheImport(t *testing.T) {
	const want = `format avro: its encoder is not linked into this program: add the import _ "github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"`
	assert.ErrorContains(t, Validate(formats.Avro(`"string"`)), want)
	assert.ErrorContains(t, Validate(formats.Avro("")), want)
	_, err := NewEncoder(formats.Avro(`"string"`), schemaOf[string](t))
	assert.ErrorContains(t, err, want)
	// The format still exists: its name and option key are known without the encoder.
	keys, ok := OptionKeys(formats.NameAvro)
	assert.True(t, ok)
	assert.Equal(t, []string{"schema"}, keys)
	assert.Equal(t, AvroContentType, DefaultContentType(formats.Avro(`"string"`)))
}

type stubEncoder struct{}

func (stubEncoder) Encode(any) ([]byte, error) { return []byte("stub"), nil }

func TestRegisterInstallsTheAvroParserOnce(t *testing.T) {
	t.Cleanup(func() { registered.parsers = nil })
	parse := func(map[string]string) (EncoderFactory, error) {
		return func(*Schema) (ElementEncoder, error) { return stubEncoder{}, nil }, nil
	}
	assert.PanicsWithValue(t, `bodyformat: Register("json"): not a format with an encoder package`, func() { Register(formats.NameJSON, parse) })
	assert.PanicsWithValue(t, `bodyformat: Register("xml"): not a format with an encoder package`, func() { Register("xml", parse) })
	assert.PanicsWithValue(t, `bodyformat: Register("avro"): nil parser`, func() { Register(formats.NameAvro, nil) })
	Register(formats.NameAvro, parse)
	assert.NoError(t, Validate(formats.Avro(`"string"`)))
	enc, err := NewEncoder(formats.Avro(`"string"`), schemaOf[string](t))
	require.NoError(t, err)
	assert.Equal(t, "avro/binary", enc.DefaultContentType())
	assert.PanicsWithValue(t, `bodyformat: Register("avro") called twice`, func() { Register(formats.NameAvro, parse) })
}

func TestNewEncoderValidatesTheFormatFirst(t *testing.T) {
	s := schemaOf[formOrder](t)
	_, err := NewEncoder(formats.Format{Name: "yaml"}, s)
	assert.ErrorContains(t, err, `unknown format "yaml"`)
	_, err = NewEncoder(formats.JSON(), nil)
	assert.Error(t, err)
}

func TestZeroFormatEncodesNoBody(t *testing.T) {
	enc, err := NewEncoder(formats.Format{}, schemaOf[formOrder](t))
	require.NoError(t, err)
	b, err := enc.Encode(formOrder{OrderID: "1"})
	require.NoError(t, err)
	assert.Nil(t, b)
	assert.Equal(t, "", enc.ContentType())
	assert.True(t, formats.Format{}.IsZero())
	assert.False(t, formats.JSON().IsZero())
}

func TestEncodersRejectElementsOfAnotherType(t *testing.T) {
	s := schemaOf[formOrder](t)
	for _, f := range []formats.Format{formats.JSON(), formats.FormURLEncoded()} {
		enc, err := NewEncoder(f, s)
		require.NoError(t, err)
		_, err = enc.Encode(csvRow{})
		assert.ErrorContains(t, err, "element has type bodyformat.csvRow, want bodyformat.formOrder", f.Name)
		_, err = enc.Encode((*formOrder)(nil))
		assert.ErrorContains(t, err, "nil *bodyformat.formOrder", f.Name)
	}
}

func TestOptionKeys(t *testing.T) {
	keys, ok := OptionKeys(formats.NameCSV)
	assert.True(t, ok)
	assert.Equal(t, []string{"field-delimiter", "null-literal", "quote-character", "disable-quote-character"}, keys)
	keys[0] = "mutated"
	again, _ := OptionKeys(formats.NameCSV)
	assert.Equal(t, "field-delimiter", again[0])
	keys, ok = OptionKeys(formats.NameAvro)
	assert.True(t, ok)
	assert.Equal(t, []string{"schema"}, keys)
	keys, ok = OptionKeys(formats.NameJSON)
	assert.True(t, ok)
	assert.Empty(t, keys)
	_, ok = OptionKeys("xml")
	assert.False(t, ok)
}

func TestContentTypeHelpers(t *testing.T) {
	assert.Equal(t, "application/x-www-form-urlencoded", ContentType(formats.FormURLEncoded()))
	for _, f := range []formats.Format{formats.JSON(), formats.CSV(), formats.Raw(), formats.Avro(`"string"`), {}} {
		assert.Equal(t, "", ContentType(f), f.Name)
	}
	assert.Equal(t, "application/json", DefaultContentType(formats.JSON()))
	assert.Equal(t, "text/csv", DefaultContentType(formats.CSV()))
	assert.Equal(t, "avro/binary", DefaultContentType(formats.Avro(`"string"`)))
	for _, f := range []formats.Format{formats.Raw(), formats.FormURLEncoded(), {}, {Name: "xml"}} {
		assert.Equal(t, "", DefaultContentType(f), f.Name)
	}
	assert.True(t, ContentTypeMatches(FormContentType, "application/x-www-form-urlencoded"))
	assert.True(t, ContentTypeMatches(FormContentType, " Application/X-WWW-Form-URLEncoded "))
	assert.False(t, ContentTypeMatches(FormContentType, "application/x-www-form-urlencoded; charset=UTF-8"))
	assert.False(t, ContentTypeMatches(FormContentType, "application/json"))
	assert.False(t, ContentTypeMatches("", ""))
}

func TestOptionErrorsNameTheirOptions(t *testing.T) {
	for _, c := range []struct {
		f       formats.Format
		options []string
	}{
		{formats.JSON().With("pretty", "true"), []string{"pretty"}},
		{formats.CSV().With("escape-character", `\`), []string{"escape-character"}},
		{formats.CSV().With(formats.OptionCSVFieldDelimiter, ";;"), []string{"field-delimiter"}},
		{formats.CSV().With(formats.OptionCSVQuoteCharacter, "\n"), []string{"quote-character"}},
		{formats.CSV().With(formats.OptionCSVFieldDelimiter, `"`), []string{"field-delimiter", "quote-character"}},
		{formats.CSV().With(formats.OptionCSVDisableQuoteCharacter, "sometimes"), []string{"disable-quote-character"}},
		{formats.CSV().With(formats.OptionCSVDisableQuoteCharacter, "true").With(formats.OptionCSVQuoteCharacter, "'"), []string{"quote-character", "disable-quote-character"}},
		{formats.CSV().With(formats.OptionCSVNullLiteral, "a,b"), []string{"null-literal"}},
	} {
		err := Validate(c.f)
		var oe *OptionError
		require.ErrorAs(t, err, &oe, "%v", c.f.Options)
		assert.Equal(t, c.options, oe.Options, "%v", c.f.Options)
		for _, o := range c.options {
			assert.Contains(t, err.Error(), `"`+o+`"`, "the message names the option too")
		}
	}
	var oe *OptionError
	assert.False(t, errors.As(Validate(formats.Format{Name: "xml"}), &oe), "an unknown format is not an option error")
	assert.False(t, errors.As(Validate(formats.Format{Options: map[string]string{"schema": "x"}}), &oe))
}
