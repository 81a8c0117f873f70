package formats

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateNamesTheProblem(t *testing.T) {
	assert.NoError(t, Format{}.Validate())
	for _, f := range []Format{JSON(), FormURLEncoded(), CSV(), Raw(), Avro(`"string"`)} {
		assert.NoError(t, f.Validate(), f.Name)
	}
	assert.ErrorContains(t, Format{Name: "xml"}.Validate(), `unknown format "xml"; known formats: json, form-urlencoded, csv, raw, avro`)
	assert.ErrorContains(t, Format{Name: "JSON"}.Validate(), `unknown format "JSON"`)
	assert.ErrorContains(t, JSON().With("pretty", "true").Validate(), `format json: unknown option "pretty"; it takes no options`)
	assert.ErrorContains(t, FormURLEncoded().With("charset", "latin1").Validate(), `unknown option "charset"`)
	assert.ErrorContains(t, Raw().With("raw.charset", "UTF-8").Validate(), `unknown option "raw.charset"`)
	assert.ErrorContains(t, CSV().With("csv.field-delimiter", ";").Validate(), `unknown option "csv.field-delimiter"; known options: field-delimiter, null-literal, quote-character, disable-quote-character`)
	assert.ErrorContains(t, Format{Options: map[string]string{"schema": "x"}}.Validate(), "options given without a format name")
}

func TestNewEncoderValidatesTheFormatFirst(t *testing.T) {
	s := schemaOf[formOrder](t)
	_, err := Format{Name: "yaml"}.NewEncoder(s)
	assert.ErrorContains(t, err, `unknown format "yaml"`)
	_, err = JSON().NewEncoder(nil)
	assert.Error(t, err)
}

func TestZeroFormatEncodesNoBody(t *testing.T) {
	enc, err := Format{}.NewEncoder(schemaOf[formOrder](t))
	require.NoError(t, err)
	b, err := enc.Encode(formOrder{OrderID: "1"})
	require.NoError(t, err)
	assert.Nil(t, b)
	assert.Equal(t, "", enc.ContentType())
	assert.True(t, Format{}.IsZero())
	assert.False(t, JSON().IsZero())
}

func TestEncodersRejectElementsOfAnotherType(t *testing.T) {
	s := schemaOf[formOrder](t)
	for _, f := range []Format{JSON(), FormURLEncoded()} {
		enc, err := f.NewEncoder(s)
		require.NoError(t, err)
		_, err = enc.Encode(csvRow{})
		assert.ErrorContains(t, err, "element has type formats.csvRow, want formats.formOrder", f.Name)
		_, err = enc.Encode((*formOrder)(nil))
		assert.ErrorContains(t, err, "nil *formats.formOrder", f.Name)
	}
}

func TestOptionKeys(t *testing.T) {
	keys, ok := OptionKeys(NameCSV)
	assert.True(t, ok)
	assert.Equal(t, []string{"field-delimiter", "null-literal", "quote-character", "disable-quote-character"}, keys)
	keys[0] = "mutated"
	again, _ := OptionKeys(NameCSV)
	assert.Equal(t, "field-delimiter", again[0])
	keys, ok = OptionKeys(NameAvro)
	assert.True(t, ok)
	assert.Equal(t, []string{"schema"}, keys)
	keys, ok = OptionKeys(NameJSON)
	assert.True(t, ok)
	assert.Empty(t, keys)
	_, ok = OptionKeys("xml")
	assert.False(t, ok)
}

func TestContentTypeHelpers(t *testing.T) {
	assert.Equal(t, "application/x-www-form-urlencoded", CanonicalContentType(FormURLEncoded()))
	for _, f := range []Format{JSON(), CSV(), Raw(), Avro(`"string"`), {}} {
		assert.Equal(t, "", CanonicalContentType(f), f.Name)
	}
	assert.True(t, ContentTypeMatches(FormContentType, "application/x-www-form-urlencoded"))
	assert.True(t, ContentTypeMatches(FormContentType, " Application/X-WWW-Form-URLEncoded "))
	assert.False(t, ContentTypeMatches(FormContentType, "application/x-www-form-urlencoded; charset=UTF-8"))
	assert.False(t, ContentTypeMatches(FormContentType, "application/json"))
	assert.False(t, ContentTypeMatches("", ""))
}

func TestWithDoesNotModifyTheOriginal(t *testing.T) {
	base := CSV().With(OptionCSVFieldDelimiter, ";")
	derived := base.With(OptionCSVNullLiteral, "NULL")
	assert.Equal(t, map[string]string{"field-delimiter": ";"}, base.Options)
	assert.Equal(t, map[string]string{"field-delimiter": ";", "null-literal": "NULL"}, derived.Options)
}
