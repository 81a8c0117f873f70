package xlang

import (
	"testing"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAConfigurationRowIsDecodedWhateverItsFieldNames(t *testing.T) {
	s, row := configRow(t, map[string]any{"http.url": "https://example.com", "sink_in_flight_max_tasks": int64(-3), "flag": true,
		"rate": 62.5, "http_headers": map[string]string{"X-A": "1", "X-B": "2"}})
	m, err := decodeRow(s, row)
	require.NoError(t, err)
	assert.Equal(t, "https://example.com", m["http.url"].V)
	assert.Equal(t, int64(-3), m["sink_in_flight_max_tasks"].V)
	assert.Equal(t, true, m["flag"].V)
	assert.Equal(t, 62.5, m["rate"].V)
	assert.Equal(t, []entry{
		{Key: value{Type: atomicType(pipepb.AtomicType_STRING, false), V: "X-A"}, Value: value{Type: atomicType(pipepb.AtomicType_STRING, false), V: "1"}},
		{Key: value{Type: atomicType(pipepb.AtomicType_STRING, false), V: "X-B"}, Value: value{Type: atomicType(pipepb.AtomicType_STRING, false), V: "2"}},
	}, m["http_headers"].V)
	assert.Equal(t, "MAP<STRING, STRING>", typeName(m["http_headers"].Type))
}

func TestNullFieldsAndShortRowsDecodeAsNull(t *testing.T) {
	s := &pipepb.Schema{Fields: []*pipepb.Field{
		{Name: "a", Type: atomicType(pipepb.AtomicType_STRING, true)},
		{Name: "b", Type: atomicType(pipepb.AtomicType_INT64, true)},
	}}
	m, err := decodeRow(s, rowBytes(t, s, nil, int64(5)))
	require.NoError(t, err)
	assert.Nil(t, m["a"].V)
	assert.Equal(t, int64(5), m["b"].V)

	m, err = decodeRow(s, []byte{1, 0, 1, 'x'}) // one field encoded of two: the rest is null
	require.NoError(t, err)
	assert.Equal(t, "x", m["a"].V)
	assert.Nil(t, m["b"].V)
}

func TestABrokenRowIsAnErrorNotAPanic(t *testing.T) {
	s, row := configRow(t, map[string]any{"project": "p", "http_headers": map[string]string{"X": "y"}})
	for n := range row {
		_, err := decodeRow(s, row[:n])
		assert.Error(t, err, "cut after %d of %d bytes", n, len(row))
	}
	_, err := decodeRow(s, append(row, 0))
	assert.ErrorContains(t, err, "1 bytes are left")
	_, err = decodeRow(s, []byte{9, 0})
	assert.ErrorContains(t, err, "the encoded row has 9 fields, its schema 2")
}

func FuzzDecodeRow(f *testing.F) {
	s := &pipepb.Schema{Fields: []*pipepb.Field{
		{Name: "s", Type: atomicType(pipepb.AtomicType_STRING, true)},
		{Name: "m", Type: &pipepb.FieldType{Nullable: true, TypeInfo: &pipepb.FieldType_MapType{MapType: &pipepb.MapType{
			KeyType: atomicType(pipepb.AtomicType_STRING, false), ValueType: atomicType(pipepb.AtomicType_STRING, true)}}}},
		{Name: "a", Type: &pipepb.FieldType{Nullable: true, TypeInfo: &pipepb.FieldType_ArrayType{ArrayType: &pipepb.ArrayType{
			ElementType: atomicType(pipepb.AtomicType_INT16, true)}}}},
		{Name: "r", Type: &pipepb.FieldType{Nullable: true, TypeInfo: &pipepb.FieldType_RowType{RowType: &pipepb.RowType{Schema: &pipepb.Schema{
			Fields: []*pipepb.Field{{Name: "output", Type: atomicType(pipepb.AtomicType_DOUBLE, true)}}}}}}},
	}}
	f.Add([]byte{4, 0, 1, 's', 0, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{4, 1, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeRow(s, b)
	})
}
