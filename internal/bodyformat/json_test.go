package bodyformat

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

type jsonOrder struct {
	OrderID   string            `json:"order_id"`
	Amount    float64           `json:"amount"`
	Note      string            `json:"note,omitempty"`
	Count     int               `json:",string"`
	Trace     map[string]string `cloudtasks:"headers" json:"trace"`
	Key       string            `cloudtasks:"task-id"`
	Internal  string            `json:"-"`
	Lines     []jsonLine        `json:"lines"`
	Scheduled time.Time         `cloudtasks:"schedule-time"`
}

type jsonLine struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

func TestJSONEncodesOnlyBodyFieldsInOrder(t *testing.T) {
	enc := encoderFor[jsonOrder](t, formats.JSON())
	got := encodeString(t, enc, jsonOrder{
		OrderID: "42", Amount: 12.5, Count: 3,
		Trace: map[string]string{"X-Trace-Id": "t"}, Key: "k", Internal: "hidden",
		Lines:     []jsonLine{{"A-1", 2}},
		Scheduled: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	assert.Equal(t, `{"order_id":"42","amount":12.5,"Count":"3","lines":[{"sku":"A-1","qty":2}]}`, got)
	assert.Equal(t, "", enc.ContentType())

	got = encodeString(t, enc, &jsonOrder{OrderID: "43", Note: "<b>&"})
	assert.Equal(t, `{"order_id":"43","amount":0,"note":"\u003cb\u003e\u0026","Count":"0","lines":null}`, got)
}

type upper string

func (u upper) MarshalJSON() ([]byte, error) { return []byte(`"UP:` + string(u) + `"`), nil }

func TestJSONHonoursFieldMarshalers(t *testing.T) {
	type elem struct {
		Name upper     `json:"name"`
		At   time.Time `json:"at"`
	}
	enc := encoderFor[elem](t, formats.JSON())
	got := encodeString(t, enc, elem{Name: "x", At: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)})
	assert.Equal(t, `{"name":"UP:x","at":"2024-05-06T07:08:09Z"}`, got)
}

// money marshals itself through a pointer receiver only.
type money struct{ cents int }

func (m *money) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`"EUR %d.%02d"`, m.cents/100, m.cents%100)), nil
}

// A field whose type marshals itself through a pointer receiver is encoded with that method, as
// json.Marshal does for an addressable value, whether the element is a value or a pointer; the
// construction check accepts such a type for that reason.
func TestJSONHonoursPointerReceiverMarshalersOfFields(t *testing.T) {
	type elem struct {
		ID     string `json:"id"`
		Amount money  `json:"amount"`
	}
	enc := encoderFor[elem](t, formats.JSON())
	assert.Equal(t, `{"id":"1","amount":"EUR 12.34"}`, encodeString(t, enc, elem{ID: "1", Amount: money{1234}}))
	ptrEnc := encoderFor[*elem](t, formats.JSON())
	assert.Equal(t, `{"id":"1","amount":"EUR 0.05"}`, encodeString(t, ptrEnc, &elem{ID: "1", Amount: money{5}}))

	// A type json.Marshal could not encode by default passes construction only because its
	// pointer marshals it; so it must be encoded that way, not fail on every element.
	type withChan struct {
		Box pmarshal `json:"box"`
	}
	got := encodeString(t, encoderFor[withChan](t, formats.JSON()), withChan{})
	assert.Equal(t, `{"box":"boxed"}`, got)
}

// pmarshal holds a channel, which encoding/json cannot encode, and marshals itself through a
// pointer receiver.
type pmarshal struct{ C chan int }

func (p *pmarshal) MarshalJSON() ([]byte, error) { return []byte(`"boxed"`), nil }

// A PCollection of strings (or []byte) with the json format holds JSON documents: each is sent
// as it is, not encoded again as a JSON string, once it is known to be one JSON value.
func TestJSONPlainElementsAreDocumentsSentUnchanged(t *testing.T) {
	enc, err := NewEncoder(formats.JSON(), schemaOf[string](t))
	require.NoError(t, err)
	assert.Equal(t, `{"id": "a1", "n": [1, 2]}`, encodeString(t, enc, `{"id": "a1", "n": [1, 2]}`))
	assert.Equal(t, `"just a string"`, encodeString(t, enc, `"just a string"`))
	_, err = enc.Encode(`{"id": "secret-value"`)
	assert.EqualError(t, err, "formats: json: the element is not a JSON document: syntax error at byte offset 21 of 21")
	_, err = enc.Encode(`{"a":1} {"b":2}`)
	assert.ErrorContains(t, err, "the element is not a JSON document")
	assert.NotContains(t, err.Error(), `"a"`, "the error never quotes the element")

	enc, err = NewEncoder(formats.JSON(), schemaOf[[]byte](t))
	require.NoError(t, err)
	assert.Equal(t, `[true,null]`, encodeString(t, enc, []byte(`[true,null]`)))
	_, err = enc.Encode([]byte("not json"))
	assert.ErrorContains(t, err, "the element is not a JSON document")

	type onlyMeta struct {
		U string `cloudtasks:"url"`
	}
	enc = encoderFor[onlyMeta](t, formats.JSON())
	assert.Equal(t, `{}`, encodeString(t, enc, onlyMeta{U: "https://x.test"}))
}

type failingMarshaler struct{}

func (failingMarshaler) MarshalJSON() ([]byte, error) {
	return nil, errors.New("contains secret-token-123")
}

func TestJSONElementErrorsNameTheFieldNotTheData(t *testing.T) {
	type elem struct {
		Fine  string           `json:"fine"`
		Token failingMarshaler `json:"token"`
	}
	enc := encoderFor[elem](t, formats.JSON())
	_, err := enc.Encode(elem{Fine: "private-data"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `field Token (body name "token")`)
	assert.NotContains(t, err.Error(), "secret-token-123")
	assert.NotContains(t, err.Error(), "private-data")

	type num struct{ Ratio float64 }
	enc = encoderFor[num](t, formats.JSON())
	_, err = enc.Encode(num{Ratio: math.Inf(1)})
	assert.ErrorContains(t, err, "field Ratio")
}

func TestJSONRejectsUnencodableTypes(t *testing.T) {
	cases := map[string]reflect.Type{
		"C":    reflect.TypeFor[struct{ C chan int }](),
		"F":    reflect.TypeFor[struct{ F func() }](),
		"Z":    reflect.TypeFor[struct{ Z complex128 }](),
		"M":    reflect.TypeFor[struct{ M map[[2]int]string }](),
		"Deep": reflect.TypeFor[struct{ Deep []struct{ Ch chan string } }](),
	}
	for field, typ := range cases {
		t.Run(field, func(t *testing.T) {
			s, err := NewSchema(typ)
			require.NoError(t, err)
			_, err = NewEncoder(formats.JSON(), s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "json: field "+field+":")
		})
	}
}
