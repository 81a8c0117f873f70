package bodyformat

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func TestRawSendsTheSingleBodyFieldAsGiven(t *testing.T) {
	type text struct {
		Body string `json:"body"`
		URL  string `cloudtasks:"url"`
	}
	enc := encoderFor[text](t, formats.Raw())
	assert.Equal(t, "a=1&b=%2\x00ü", encodeString(t, enc, text{Body: "a=1&b=%2\x00ü", URL: "https://x.test"}))
	assert.Equal(t, "", enc.ContentType())

	type binary struct {
		Data []byte
		Key  string `cloudtasks:"task-id"`
	}
	benc := encoderFor[binary](t, formats.Raw())
	b, err := benc.Encode(binary{Data: []byte{0xff, 0x00, 0x01}})
	require.NoError(t, err)
	assert.Equal(t, []byte{0xff, 0x00, 0x01}, b)

	for _, elem := range []any{"plain", []byte("plain")} {
		s, err := NewSchema(reflect.TypeOf(elem))
		require.NoError(t, err)
		enc, err := NewEncoder(formats.Raw(), s)
		require.NoError(t, err)
		assert.Equal(t, "plain", encodeString(t, enc, elem))
	}
}

func TestRawRejections(t *testing.T) {
	cases := []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{"two body fields", reflect.TypeFor[struct{ A, B string }](), "has 2 body fields [A B]"},
		{"no body field", reflect.TypeFor[struct {
			U string `cloudtasks:"url"`
		}](), "has 0 body fields"},
		{"int field", reflect.TypeFor[struct{ N int }](), "raw: field N has Go type int"},
		{"pointer field", reflect.TypeFor[struct{ P *string }](), "raw: field P has Go type *string"},
		{"string slice", reflect.TypeFor[struct{ S []string }](), "raw: field S"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSchema(c.typ)
			require.NoError(t, err)
			_, err = NewEncoder(formats.Raw(), s)
			assert.ErrorContains(t, err, c.want)
		})
	}
}
