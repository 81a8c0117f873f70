package bodyformat

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

type csvRow struct {
	ID     string   `json:"id"`
	Qty    int      `json:"qty"`
	Price  float64  `json:"price"`
	Paid   bool     `json:"paid"`
	Note   *string  `json:"note"`
	Ratio  *float32 `json:"ratio"`
	Target string   `cloudtasks:"url"`
}

func TestCSVDefaultOptions(t *testing.T) {
	enc := encoderFor[csvRow](t, formats.CSV())
	got := encodeString(t, enc, csvRow{ID: "A-1", Qty: -3, Price: 12.5, Paid: true, Note: ptr(`say "hi", bye`), Ratio: ptr(float32(0.25)), Target: "https://x.test"})
	assert.Equal(t, `A-1,-3,12.5,true,"say ""hi"", bye",0.25`, got)
	assert.Equal(t, "", enc.ContentType())

	// nil pointers write the null literal (empty by default); an empty string is quoted so a
	// reader can tell it from a null.
	got = encodeString(t, enc, csvRow{})
	assert.Equal(t, `"",0,0,false,,`, got)

	got = encodeString(t, enc, csvRow{ID: "multi\nline", Price: 1e21, Note: ptr("")})
	assert.Equal(t, "\"multi\nline\",0,1e+21,false,\"\",", got)
}

func TestCSVCustomDelimiterAndNullLiteral(t *testing.T) {
	f := formats.CSV().With(formats.OptionCSVFieldDelimiter, ";").With(formats.OptionCSVNullLiteral, "NULL")
	enc := encoderFor[csvRow](t, f)
	got := encodeString(t, enc, csvRow{ID: "a;b", Qty: 7, Price: 0.5, Note: nil, Ratio: nil})
	assert.Equal(t, `"a;b";7;0.5;false;NULL;NULL`, got)
	got = encodeString(t, enc, csvRow{ID: "NULL", Note: ptr("x,y")})
	assert.Equal(t, `"NULL";0;0;false;x,y;NULL`, got)
	got = encodeString(t, enc, csvRow{ID: ""})
	assert.Equal(t, `;0;0;false;NULL;NULL`, got)
}

func TestCSVTabDelimiterAndQuoteCharacter(t *testing.T) {
	f := formats.CSV().With(formats.OptionCSVFieldDelimiter, `\t`).With(formats.OptionCSVQuoteCharacter, "'")
	enc := encoderFor[csvRow](t, f)
	got := encodeString(t, enc, csvRow{ID: "it's", Note: ptr("a\tb"), Price: 2})
	assert.Equal(t, "'it''s'\t0\t2\tfalse\t'a\tb'\t", got)
}

func TestCSVDisabledQuoting(t *testing.T) {
	f := formats.CSV().With(formats.OptionCSVDisableQuoteCharacter, "true")
	enc := encoderFor[csvRow](t, f)
	assert.Equal(t, `say "hi",1,0,false,,`, encodeString(t, enc, csvRow{ID: `say "hi"`, Qty: 1}))
	_, err := enc.Encode(csvRow{ID: "secret,value"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `field ID (body name "id")`)
	assert.NotContains(t, err.Error(), "secret")
}

func TestCSVScalarTypes(t *testing.T) {
	type kinds struct {
		At    time.Time
		AtPtr *time.Time
		Blob  []byte
		Big   uint64
		Small int8
		F32   float32
		Tiny  float64
		Level upper // a string type with a JSON marshaler is still a string
	}
	enc := encoderFor[kinds](t, formats.CSV())
	at := time.Date(2024, 5, 6, 7, 8, 9, 500, time.UTC)
	got := encodeString(t, enc, kinds{At: at, AtPtr: &at, Blob: []byte{0, 1, 2, 0xff}, Big: 18446744073709551615, Small: -8, F32: 0.1, Tiny: 1e-7, Level: "hi"})
	assert.Equal(t, "2024-05-06T07:08:09.0000005Z,2024-05-06T07:08:09.0000005Z,AAEC/w==,18446744073709551615,-8,0.1,1e-07,hi", got)
	got = encodeString(t, enc, kinds{})
	assert.Equal(t, "0001-01-01T00:00:00Z,,,0,0,0,0,\"\"", got)
}

// A string element has no fields: writing it as a one-field record would quote a line that
// already holds a CSV record, so the csv format refuses it and points at raw.
func TestCSVRefusesAPlainElement(t *testing.T) {
	for _, s := range []*Schema{schemaOf[string](t), schemaOf[[]byte](t)} {
		_, err := NewEncoder(formats.CSV(), s)
		assert.ErrorContains(t, err, "has no fields to write as a record; to send a string that holds a CSV line as it is, use the raw format")
	}
}

func TestCSVRejectsNonScalarFields(t *testing.T) {
	cases := map[string]reflect.Type{
		"Tags":   reflect.TypeFor[struct{ Tags []string }](),
		"Attrs":  reflect.TypeFor[struct{ Attrs map[string]string }](),
		"Nested": reflect.TypeFor[struct{ Nested struct{ A string } }](),
		"Any":    reflect.TypeFor[struct{ Any any }](),
		"PP":     reflect.TypeFor[struct{ PP **string }](),
		"Cplx":   reflect.TypeFor[struct{ Cplx complex64 }](),
	}
	for field, typ := range cases {
		t.Run(field, func(t *testing.T) {
			s, err := NewSchema(typ)
			require.NoError(t, err)
			_, err = NewEncoder(formats.CSV(), s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "csv: field "+field+" has Go type")
		})
	}
}

func TestCSVRejectsBadOptions(t *testing.T) {
	cases := []struct {
		f    formats.Format
		want string
	}{
		{formats.CSV().With(formats.OptionCSVFieldDelimiter, ""), `"field-delimiter" must be exactly one character`},
		{formats.CSV().With(formats.OptionCSVFieldDelimiter, ";;"), `"field-delimiter" must be exactly one character`},
		{formats.CSV().With(formats.OptionCSVFieldDelimiter, "\n"), `"field-delimiter" must not be a line break`},
		{formats.CSV().With(formats.OptionCSVQuoteCharacter, "ab"), `"quote-character" must be exactly one character`},
		{formats.CSV().With(formats.OptionCSVFieldDelimiter, `"`), `"field-delimiter" and "quote-character" must differ`},
		{formats.CSV().With(formats.OptionCSVDisableQuoteCharacter, "sometimes"), `"disable-quote-character" must be true or false`},
		{formats.CSV().With(formats.OptionCSVDisableQuoteCharacter, "true").With(formats.OptionCSVQuoteCharacter, "'"), `"quote-character" and "disable-quote-character"=true`},
		{formats.CSV().With(formats.OptionCSVNullLiteral, "a,b"), `"null-literal" must not contain`},
		{formats.CSV().With("escape-character", `\`), `unknown option "escape-character"`},
	}
	for _, c := range cases {
		err := Validate(c.f)
		require.Error(t, err, c.f.Options)
		assert.Contains(t, err.Error(), c.want)
	}
	assert.NoError(t, Validate(formats.CSV().With(formats.OptionCSVDisableQuoteCharacter, "false").With(formats.OptionCSVQuoteCharacter, "'")))
}
