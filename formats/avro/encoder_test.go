package avro

import (
	"math/big"
	"reflect"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

func schemaOf[T any](t testing.TB) *bodyformat.Schema {
	t.Helper()
	s, err := bodyformat.NewSchema(reflect.TypeFor[T]())
	require.NoError(t, err)
	return s
}

func encoderFor[T any](t testing.TB, f formats.Format) *bodyformat.Encoder {
	t.Helper()
	enc, err := bodyformat.NewEncoder(f, schemaOf[T](t))
	require.NoError(t, err)
	return enc
}

func ptr[T any](v T) *T { return &v }

func encodeString(t *testing.T, enc *bodyformat.Encoder, elem any) string {
	t.Helper()
	body, err := enc.Encode(elem)
	require.NoError(t, err)
	return string(body)
}

const orderSchema = `{
  "type": "record", "name": "Order", "namespace": "example",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "qty", "type": "int"},
    {"name": "total", "type": "long"},
    {"name": "note", "type": ["null", "string"]},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "paid", "type": "boolean"}
  ]
}`

type avroOrder struct {
	ID     string   `json:"id"`
	Qty    int32    `json:"qty"`
	Total  int64    `json:"total"`
	Note   *string  `json:"note"`
	Tags   []string `json:"tags"`
	Paid   bool     `json:"paid"`
	Target string   `cloudtasks:"url"`
}

func TestAvroBytesOfAKnownElement(t *testing.T) {
	enc := encoderFor[avroOrder](t, formats.Avro(orderSchema))
	got, err := enc.Encode(avroOrder{ID: "A1", Qty: -3, Total: 300, Tags: []string{"x"}, Paid: true, Target: "https://x.test"})
	require.NoError(t, err)
	want := []byte{
		0x04, 'A', '1', // string: length 2 zigzag-encoded as 4, then the bytes
		0x05,       // int -3: zigzag 5
		0xd8, 0x04, // long 300: zigzag 600 = 0b100_1011000 -> 0x58|0x80, 0x04
		0x00,                  // union branch 0: null
		0x02, 0x02, 'x', 0x00, // array: block of 1 item ("x": length 1 -> 2), then the 0 end marker
		0x01, // boolean true
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "", enc.ContentType())

	got, err = enc.Encode(&avroOrder{ID: "", Note: ptr("hi")})
	require.NoError(t, err)
	assert.Equal(t, []byte{0x00, 0x00, 0x00, 0x02, 0x04, 'h', 'i', 0x00, 0x00}, got)
}

const richSchema = `{
  "type": "record", "name": "Rich",
  "fields": [
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "wait", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["OPEN", "CLOSED"]}},
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
      {"name": "name", "type": "string"},
      {"name": "postal", "type": ["null", "string"], "default": null}
    ]}},
    {"name": "ratio", "type": "float"},
    {"name": "score", "type": "double"},
    {"name": "blob", "type": "bytes"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "small", "type": "int"},
    {"name": "count", "type": ["null", "long"]},
    {"name": "lines", "type": ["null", {"type": "array", "items": "Customer"}]}
  ]
}`

type richCustomer struct {
	Name   string  `json:"name"`
	Postal *string `json:"postal"`
}

type richElem struct {
	At       time.Time        `json:"at"`
	Day      time.Time        `json:"day"`
	Wait     time.Duration    `json:"wait"`
	Status   string           `json:"status"`
	Hash     [4]byte          `json:"hash"`
	Attrs    map[string]int64 `json:"attrs"`
	Customer richCustomer     `json:"customer"`
	Ratio    float32          `json:"ratio"`
	Score    float64          `json:"score"`
	Blob     []byte           `json:"blob"`
	Price    *big.Rat         `json:"price"`
	Small    int              `json:"small"`
	Count    *int64           `json:"count"`
	Lines    []richCustomer   `json:"lines"`
	Key      string           `cloudtasks:"task-id"`
}

func TestAvroRoundTripsThroughHamba(t *testing.T) {
	enc := encoderFor[richElem](t, formats.Avro(richSchema))
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	day := time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC)
	elem := richElem{
		At: at, Day: day, Wait: 1500 * time.Millisecond, Status: "CLOSED", Hash: [4]byte{1, 2, 3, 4},
		Attrs: map[string]int64{"b": 2, "a": -1}, Customer: richCustomer{Name: "Alice", Postal: ptr("100-0001")},
		Ratio: 0.5, Score: -2.25, Blob: []byte{9, 8}, Price: big.NewRat(1234, 100), Small: -70000,
		Count: ptr(int64(5)), Lines: []richCustomer{{Name: "Bob"}},
	}
	b, err := enc.Encode(elem)
	require.NoError(t, err)

	sch, err := hamba.Parse(richSchema)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, hamba.Unmarshal(sch, b, &back))
	assert.Equal(t, at, back["at"].(time.Time).UTC())
	assert.Equal(t, day, back["day"].(time.Time).UTC())
	assert.Equal(t, 1500*time.Millisecond, back["wait"])
	assert.Equal(t, "CLOSED", back["status"])
	assert.Equal(t, [4]byte{1, 2, 3, 4}, back["hash"])
	assert.Equal(t, map[string]any{"a": int64(-1), "b": int64(2)}, back["attrs"])
	assert.Equal(t, map[string]any{"name": "Alice", "postal": "100-0001"}, back["customer"])
	assert.Equal(t, float32(0.5), back["ratio"])
	assert.Equal(t, -2.25, back["score"])
	assert.Equal(t, []byte{9, 8}, back["blob"])
	assert.Equal(t, 0, big.NewRat(1234, 100).Cmp(back["price"].(*big.Rat)))
	assert.Equal(t, -70000, back["small"])
	assert.Equal(t, int64(5), back["count"])
	// hamba decodes a non-null union branch of a complex type as {"<type>": value}.
	assert.Equal(t, map[string]any{"array": []any{map[string]any{"name": "Bob", "postal": nil}}}, back["lines"])

	// Nil pointers and slices take the union's null branch.
	elem.Count, elem.Lines, elem.Customer.Postal = nil, nil, nil
	b, err = enc.Encode(elem)
	require.NoError(t, err)
	back = nil
	require.NoError(t, hamba.Unmarshal(sch, b, &back))
	assert.Nil(t, back["count"])
	assert.Nil(t, back["lines"])
	assert.Equal(t, map[string]any{"name": "Alice", "postal": nil}, back["customer"])
}

func TestAvroMapKeysAreWrittenInSortedOrder(t *testing.T) {
	type m struct {
		Attrs map[string]int32 `json:"attrs"`
	}
	enc := encoderFor[m](t, formats.Avro(`{"type":"record","name":"M","fields":[{"name":"attrs","type":{"type":"map","values":"int"}}]}`))
	for range 5 {
		b, err := enc.Encode(m{Attrs: map[string]int32{"b": 1, "a": 2, "c": 3}})
		require.NoError(t, err)
		assert.Equal(t, []byte{0x06, 0x02, 'a', 0x04, 0x02, 'b', 0x02, 0x02, 'c', 0x06, 0x00}, b)
	}
}

func TestAvroPlainElement(t *testing.T) {
	s, err := bodyformat.NewSchema(reflect.TypeFor[string]())
	require.NoError(t, err)
	enc, err := bodyformat.NewEncoder(formats.Avro(`"string"`), s)
	require.NoError(t, err)
	assert.Equal(t, "\x06abc", encodeString(t, enc, "abc"))
	_, err = bodyformat.NewEncoder(formats.Avro(`"long"`), s)
	assert.ErrorContains(t, err, "the element value: Go type string does not fit avro long")
}

type avroNode struct {
	Value string    `json:"value"`
	Next  *avroNode `json:"next"`
}

func TestAvroRecursiveRecord(t *testing.T) {
	schema := `{"type":"record","name":"Node","fields":[{"name":"value","type":"string"},{"name":"next","type":["null","Node"]}]}`
	enc := encoderFor[avroNode](t, formats.Avro(schema))
	b, err := enc.Encode(avroNode{Value: "a", Next: &avroNode{Value: "b"}})
	require.NoError(t, err)
	assert.Equal(t, []byte{0x02, 'a', 0x02, 0x02, 'b', 0x00}, b)
}

// A value of a recursive record type that points back into itself is an element error, not a
// recursion that overflows the stack and kills the worker process; a long list that ends is
// encoded.
func TestAvroACyclicValueIsAnErrorNotAStackOverflow(t *testing.T) {
	schema := `{"type":"record","name":"Node","fields":[{"name":"value","type":"string"},{"name":"next","type":["null","Node"]}]}`
	enc := encoderFor[avroNode](t, formats.Avro(schema))
	loop := &avroNode{Value: "a"}
	loop.Next = &avroNode{Value: "b", Next: loop}
	_, err := enc.Encode(*loop)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the value holds a cycle: a record Node contains itself")
	assert.NotContains(t, err.Error(), `"a"`, "the data is not quoted")

	for _, n := range []int{500, 5000} {
		long := &avroNode{Value: "end"}
		for range n {
			long = &avroNode{Value: "x", Next: long}
		}
		b, err := enc.Encode(*long)
		require.NoError(t, err, "a list of %d links that ends", n)
		assert.Len(t, b, n*3+5, "%d links (the value x, then the union branch of the next), then the end and its null branch", n)
	}
}

func TestAvroUnionPicksTheFirstFittingBranch(t *testing.T) {
	schema := `{"type":"record","name":"U","fields":[{"name":"who","type":[
	  {"type":"record","name":"Robot","fields":[{"name":"serial","type":"long"}]},
	  {"type":"record","name":"Person","fields":[{"name":"name","type":"string"}]}]}]}`
	type person struct {
		Name string `json:"name"`
	}
	type u struct {
		Who person `json:"who"`
	}
	enc := encoderFor[u](t, formats.Avro(schema))
	b, err := enc.Encode(u{Who: person{Name: "z"}})
	require.NoError(t, err)
	assert.Equal(t, []byte{0x02, 0x02, 'z'}, b)
}

func TestAvroElementErrorsNameTheFieldNotTheData(t *testing.T) {
	schema := `{"type":"record","name":"E","fields":[
	  {"name":"status","type":{"type":"enum","name":"S","symbols":["OPEN"]}},
	  {"name":"small","type":"int"},
	  {"name":"must","type":"string"}]}`
	type e struct {
		Status string  `json:"status"`
		Small  int64   `json:"small"`
		Must   *string `json:"must"`
	}
	enc := encoderFor[e](t, formats.Avro(schema))
	_, err := enc.Encode(e{Status: "private-status", Must: ptr("")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `field Status (body name "status"): the value is not a symbol of enum S`)
	assert.NotContains(t, err.Error(), "private-status")

	_, err = enc.Encode(e{Status: "OPEN", Small: 1 << 40, Must: ptr("")})
	assert.ErrorContains(t, err, `field Small (body name "small"): the value is out of the range of avro int`)

	_, err = enc.Encode(e{Status: "OPEN"})
	assert.ErrorContains(t, err, `field Must (body name "must") is nil but its avro type string has no null branch`)
}

func TestAvroConstructionRejections(t *testing.T) {
	rec := func(fields string) string {
		return `{"type":"record","name":"R","fields":[` + fields + `]}`
	}
	cases := []struct {
		name   string
		typ    reflect.Type
		schema string
		want   string
	}{
		{"not a record", reflect.TypeFor[struct{ A string }](), `"string"`, "must be a record, not string"},
		{"schema field without Go field", reflect.TypeFor[struct {
			A string `json:"a"`
		}](), rec(`{"name":"a","type":"string"},{"name":"b","type":"string"}`), `schema field "b" has no matching field in the element type`},
		{"Go field not in schema", reflect.TypeFor[struct {
			A string `json:"a"`
			B string `json:"b"`
		}](), rec(`{"name":"a","type":"string"}`), `field B (body name "b"): record R has no field named "b"`},
		{"string for int", reflect.TypeFor[struct {
			A string `json:"a"`
		}](), rec(`{"name":"a","type":"int"}`), `field A (body name "a"): Go type string does not fit avro int`},
		{"float64 for float", reflect.TypeFor[struct {
			A float64 `json:"a"`
		}](), rec(`{"name":"a","type":"float"}`), "Go type float64 does not fit avro float"},
		{"uint64 for long", reflect.TypeFor[struct {
			A uint64 `json:"a"`
		}](), rec(`{"name":"a","type":"long"}`), "Go type uint64 does not fit avro long"},
		{"interface", reflect.TypeFor[struct {
			A any `json:"a"`
		}](), rec(`{"name":"a","type":"string"}`), "is an interface"},
		{"time for plain long", reflect.TypeFor[struct {
			A time.Time `json:"a"`
		}](), rec(`{"name":"a","type":"long"}`), "Go type time.Time does not fit avro long"},
		{"duration for timestamp", reflect.TypeFor[struct {
			A time.Duration `json:"a"`
		}](), rec(`{"name":"a","type":{"type":"long","logicalType":"timestamp-millis"}}`), "does not fit avro long (logical type timestamp-millis)"},
		{"wrong fixed size", reflect.TypeFor[struct {
			A [3]byte `json:"a"`
		}](), rec(`{"name":"a","type":{"type":"fixed","name":"F","size":4}}`), "want [4]byte"},
		{"pointer union without null", reflect.TypeFor[struct {
			A *string `json:"a"`
		}](), rec(`{"name":"a","type":["int","string"]}`), "can be nil but the avro union has no null branch"},
		{"no fitting branch", reflect.TypeFor[struct {
			A bool `json:"a"`
		}](), rec(`{"name":"a","type":["null","string"]}`), "fits no branch of the avro union"},
		{"nested mismatch", reflect.TypeFor[struct {
			C struct{ Zip int } `json:"c"`
		}](), rec(`{"name":"c","type":{"type":"record","name":"C","fields":[{"name":"Zip","type":"string"}]}}`), `field C (body name "c") > Zip: Go type int does not fit avro string`},
		{"map with int keys", reflect.TypeFor[struct {
			M map[int]string `json:"m"`
		}](), rec(`{"name":"m","type":{"type":"map","values":"string"}}`), "does not fit avro map"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := bodyformat.NewSchema(c.typ)
			require.NoError(t, err)
			_, err = bodyformat.NewEncoder(formats.Avro(c.schema), s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestAvroRejectsBadSchemaOption(t *testing.T) {
	assert.ErrorContains(t, bodyformat.Validate(formats.Avro("")), `option "schema" is required`)
	assert.ErrorContains(t, bodyformat.Validate(formats.Format{Name: formats.NameAvro}), `option "schema" is required`)
	assert.ErrorContains(t, bodyformat.Validate(formats.Avro(`{"type":"record","name":"R"}`)), `option "schema" does not parse`)
	assert.ErrorContains(t, bodyformat.Validate(formats.Avro(`{"type":"nope"}`)), `option "schema" does not parse`)
	assert.ErrorContains(t, bodyformat.Validate(formats.Avro(`"string"`).With("codec", "snappy")), `unknown option "codec"`)
	assert.NoError(t, bodyformat.Validate(formats.Avro(orderSchema)))
	// The same record name in two schemas does not clash.
	assert.NoError(t, bodyformat.Validate(formats.Avro(`{"type":"record","name":"Order","fields":[{"name":"x","type":"int"}]}`)))
}

// inner is embedded in a nested record, which the avro format rejects.
type inner struct{ X string }

func TestAvroOptionErrorsNameTheSchemaOption(t *testing.T) {
	for _, f := range []formats.Format{Format(""), Format("{"), {Name: formats.NameAvro}} {
		var oe *bodyformat.OptionError
		require.ErrorAs(t, bodyformat.Validate(f), &oe, "%v", f.Options)
		assert.Equal(t, []string{"schema"}, oe.Options)
	}
}

func TestFormatIsFormatsAvro(t *testing.T) {
	assert.Equal(t, formats.Avro(orderSchema), Format(orderSchema))
	enc := encoderFor[avroOrder](t, Format(orderSchema))
	assert.Equal(t, "avro/binary", enc.DefaultContentType())
	assert.Equal(t, ContentType, enc.DefaultContentType())
	assert.Equal(t, "", enc.ContentType(), "a header may replace it")
}

func TestAvroRejectsAnEmbeddedStructInANestedRecord(t *testing.T) {
	type nested struct {
		inner
		Name string `json:"name"`
	}
	type elem struct {
		C nested `json:"c"`
	}
	schema := `{"type":"record","name":"R","fields":[{"name":"c","type":{"type":"record","name":"C","fields":[{"name":"name","type":"string"}]}}]}`
	_, err := bodyformat.NewEncoder(formats.Avro(schema), schemaOf[elem](t))
	assert.ErrorContains(t, err, `field C (body name "c"): embedded field inner is not supported`)
}
