package bodyformat

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func encoderFor[T any](t *testing.T, f formats.Format) *Encoder {
	t.Helper()
	enc, err := NewEncoder(f, schemaOf[T](t))
	require.NoError(t, err)
	return enc
}

func encodeString(t *testing.T, enc *Encoder, elem any) string {
	t.Helper()
	b, err := enc.Encode(elem)
	require.NoError(t, err)
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// formOrder is the reference's form table: metadata fields never become form fields.
type formOrder struct {
	OrderID    string            `json:"order_id"`
	Note       string            `json:"note"`
	Tags       []string          `json:"tags"`
	Categories *string           `json:"categories"`
	Target     string            `cloudtasks:"url"`
	Trace      map[string]string `cloudtasks:"headers"`
}

func TestFormEncodesReferenceRow(t *testing.T) {
	enc := encoderFor[formOrder](t, formats.FormURLEncoded())
	got := encodeString(t, enc, formOrder{
		OrderID: "42", Note: "東京 + pickup", Tags: []string{"urgent", "gift"},
		Categories: ptr("books,sale"), Target: "https://api.example.com/orders",
		Trace: map[string]string{"X-Trace-Id": "t"},
	})
	assert.Equal(t, "order_id=42&note=%E6%9D%B1%E4%BA%AC+%2B+pickup&tags=urgent&tags=gift&categories=books%2Csale", got)
	assert.Equal(t, "application/x-www-form-urlencoded", enc.ContentType())
}

func TestFormKeepsEmptyStringAndOmitsNulls(t *testing.T) {
	enc := encoderFor[formOrder](t, formats.FormURLEncoded())
	assert.Equal(t, "order_id=43&note=", encodeString(t, enc, formOrder{OrderID: "43"}))
	// An empty slice adds nothing, like a nil one.
	assert.Equal(t, "order_id=43&note=", encodeString(t, enc, formOrder{OrderID: "43", Tags: []string{}}))
	// An empty string inside a slice is a field with an empty value.
	assert.Equal(t, "order_id=43&note=&tags=&tags=a", encodeString(t, enc, formOrder{OrderID: "43", Tags: []string{"", "a"}}))
}

func TestFormEncodesBracketAndDottedNames(t *testing.T) {
	type nested struct {
		Items    []string `json:"items[]"`
		Name     string   `json:"customer.name"`
		Postal   string   `json:"customer[postalCode]"`
		Priority string   `json:"attributes[priority]"`
	}
	enc := encoderFor[nested](t, formats.FormURLEncoded())
	got := encodeString(t, enc, nested{Items: []string{"book", "pen"}, Name: "Alice", Postal: "100-0001", Priority: "high"})
	assert.Equal(t, "items%5B%5D=book&items%5B%5D=pen&customer.name=Alice&customer%5BpostalCode%5D=100-0001&attributes%5Bpriority%5D=high", got)
}

func TestFormEncodesJSONTextInOneField(t *testing.T) {
	type jsonParam struct {
		Payload string `json:"payload"`
	}
	enc := encoderFor[jsonParam](t, formats.FormURLEncoded())
	got := encodeString(t, enc, jsonParam{Payload: `{"items":["book","pen"],"name":"Alice","postalCode":"100-0001"}`})
	assert.Equal(t, "payload=%7B%22items%22%3A%5B%22book%22%2C%22pen%22%5D%2C%22name%22%3A%22Alice%22%2C%22postalCode%22%3A%22100-0001%22%7D", got)
}

func TestFormEncodesAmpersandEqualsAndPercentAsData(t *testing.T) {
	type pair struct {
		Query string `json:"q"`
		Body  string `json:"body"`
	}
	enc := encoderFor[pair](t, formats.FormURLEncoded())
	// A value that looks like an encoded form is data: '&', '=' and '%' are encoded again.
	got := encodeString(t, enc, pair{Query: "a=1&b=2", Body: "items%5B0%5D=book"})
	assert.Equal(t, "q=a%3D1%26b%3D2&body=items%255B0%255D%3Dbook", got)
}

func TestFormEscapesOnlyOutsideTheUnreservedSet(t *testing.T) {
	type one struct {
		V string `json:"v"`
	}
	enc := encoderFor[one](t, formats.FormURLEncoded())
	got := encodeString(t, enc, one{V: "AZaz09*-._ ~!'()/?#+\n\x00é"})
	assert.Equal(t, "v=AZaz09*-._+%7E%21%27%28%29%2F%3F%23%2B%0A%00%C3%A9", got)
}

func TestFormPointerFields(t *testing.T) {
	type ptrs struct {
		A *string    `json:"a"`
		B *[]string  `json:"b"`
		C []*string  `json:"c"`
		D *[]*string `json:"d"`
	}
	enc := encoderFor[ptrs](t, formats.FormURLEncoded())
	assert.Equal(t, "", encodeString(t, enc, ptrs{}))
	got := encodeString(t, enc, ptrs{A: ptr(""), B: &[]string{"x", "y"}, C: []*string{ptr("1")}, D: &[]*string{ptr("2"), ptr("3")}})
	assert.Equal(t, "a=&b=x&b=y&c=1&d=2&d=3", got)
}

func TestFormNilSliceEntryFailsTheElement(t *testing.T) {
	type withPtrs struct {
		Tags []*string `json:"tags"`
	}
	enc := encoderFor[withPtrs](t, formats.FormURLEncoded())
	_, err := enc.Encode(withPtrs{Tags: []*string{ptr("confidential-tag"), nil}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `field Tags (body name "tags")`)
	assert.Contains(t, err.Error(), "entry 1 is nil")
	assert.NotContains(t, err.Error(), "confidential-tag")
}

func TestFormAllNullElementHasEmptyBodyAndContentType(t *testing.T) {
	type opt struct {
		A *string
	}
	enc := encoderFor[opt](t, formats.FormURLEncoded())
	b, err := enc.Encode(opt{})
	require.NoError(t, err)
	assert.Empty(t, b)
	assert.Equal(t, FormContentType, enc.ContentType())
}

func TestFormAcceptsNamedStringTypes(t *testing.T) {
	type status string
	type elem struct {
		S  status   `json:"s"`
		SS []status `json:"ss"`
	}
	enc := encoderFor[elem](t, formats.FormURLEncoded())
	assert.Equal(t, "s=open&ss=a+b", encodeString(t, enc, elem{S: "open", SS: []status{"a b"}}))
}

func TestFormRejectsNonStringFields(t *testing.T) {
	cases := map[string]reflect.Type{
		"Count":   reflect.TypeFor[struct{ Count int }](),
		"Ok":      reflect.TypeFor[struct{ Ok bool }](),
		"Price":   reflect.TypeFor[struct{ Price float64 }](),
		"Ids":     reflect.TypeFor[struct{ Ids []int }](),
		"Raw":     reflect.TypeFor[struct{ Raw []byte }](),
		"Attrs":   reflect.TypeFor[struct{ Attrs map[string]string }](),
		"When":    reflect.TypeFor[struct{ When time.Time }](),
		"Nested":  reflect.TypeFor[struct{ Nested struct{ A string } }](),
		"Matrix":  reflect.TypeFor[struct{ Matrix [][]string }](),
		"PtrPtr":  reflect.TypeFor[struct{ PtrPtr **string }](),
		"Any":     reflect.TypeFor[struct{ Any any }](),
		"Counter": reflect.TypeFor[struct{ Counter *int }](),
	}
	for field, typ := range cases {
		t.Run(field, func(t *testing.T) {
			s, err := NewSchema(typ)
			require.NoError(t, err)
			_, err = NewEncoder(formats.FormURLEncoded(), s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "form-urlencoded: field "+field+" ")
			assert.Contains(t, err.Error(), "convert the value to a string")
		})
	}
	s, err := NewSchema(reflect.TypeFor[string]())
	require.NoError(t, err)
	_, err = NewEncoder(formats.FormURLEncoded(), s)
	assert.ErrorContains(t, err, "has no field names")
}
