package xlang

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
)

// This file decodes the configuration row a caller sends (Beam's row encoding of its schema)
// into plain Go values, whatever its schema: the fields are checked against the transform's
// afterwards, so that a field of a wrong name or type is reported as such instead of failing
// the decoding. Beam's own Go decoder builds a Go struct type from the schema first and
// panics on a field name that is not a Go identifier ("http-url").

// value is one decoded field: its type as the caller sent it and its value, nil for null, else
// string, int64 (every integer type), bool, float64 (FLOAT and DOUBLE), []byte, []value (an
// array or iterable), []entry (a map) or map[string]value (a row).
type value struct {
	Type *pipepb.FieldType
	V    any
}

// entry is one key and value of a map.
type entry struct{ Key, Value value }

// maxDepth bounds how deeply the configuration's rows, arrays and maps may nest.
const maxDepth = 16

// errTruncated is the error of a row whose bytes end before its fields do.
var errTruncated = errors.New("the encoded row ends early")

// decodeRow decodes one row of schema s from b, which it must use up.
func decodeRow(s *pipepb.Schema, b []byte) (map[string]value, error) {
	d := &decoder{b: b}
	row, err := d.row(s, 0)
	if err != nil {
		return nil, err
	}
	if len(d.b) > 0 {
		return nil, fmt.Errorf("%d bytes are left after the row's last field", len(d.b))
	}
	return row, nil
}

type decoder struct{ b []byte }

func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || n > len(d.b) {
		return nil, errTruncated
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out, nil
}

func (d *decoder) varint() (int64, error) {
	u, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errTruncated
	}
	d.b = d.b[n:]
	return int64(u), nil
}

func (d *decoder) length() (int, error) {
	n, err := d.varint()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > int64(len(d.b)) {
		return 0, errTruncated
	}
	return int(n), nil
}

// row reads Beam's row encoding: the number of fields, a bitmap of the null ones, then each
// field that is not null. A row of fewer fields than its schema leaves the rest null.
func (d *decoder) row(s *pipepb.Schema, depth int) (map[string]value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the configuration nests deeper than %d levels", maxDepth)
	}
	n, err := d.varint()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(s.GetFields())) {
		return nil, fmt.Errorf("the encoded row has %d fields, its schema %d", n, len(s.GetFields()))
	}
	nbytes, err := d.length()
	if err != nil {
		return nil, err
	}
	nulls, err := d.take(nbytes)
	if err != nil {
		return nil, err
	}
	out := map[string]value{}
	for i, f := range s.GetFields() {
		if _, dup := out[f.GetName()]; dup {
			return nil, fmt.Errorf("the schema has two fields named %s", quoteName(f.GetName()))
		}
		if int64(i) >= n || i/8 < len(nulls) && nulls[i/8]&(1<<(i%8)) != 0 {
			out[f.GetName()] = value{Type: f.GetType()}
			continue
		}
		v, err := d.value(f.GetType(), depth+1)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", quoteName(f.GetName()), err)
		}
		out[f.GetName()] = value{Type: f.GetType(), V: v}
	}
	return out, nil
}

// nullable reads the marker of a nullable array element or map value and says whether a value
// follows.
func (d *decoder) nullable(t *pipepb.FieldType) (bool, error) {
	if !t.GetNullable() {
		return true, nil
	}
	b, err := d.take(1)
	if err != nil {
		return false, err
	}
	return b[0] != 0, nil
}

func (d *decoder) value(t *pipepb.FieldType, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("the configuration nests deeper than %d levels", maxDepth)
	}
	switch ti := t.GetTypeInfo().(type) {
	case *pipepb.FieldType_AtomicType:
		return d.atomic(ti.AtomicType)
	case *pipepb.FieldType_RowType:
		return d.row(ti.RowType.GetSchema(), depth)
	case *pipepb.FieldType_LogicalType:
		return d.value(ti.LogicalType.GetRepresentation(), depth+1)
	case *pipepb.FieldType_ArrayType:
		return d.iterable(ti.ArrayType.GetElementType(), depth)
	case *pipepb.FieldType_IterableType:
		return d.iterable(ti.IterableType.GetElementType(), depth)
	case *pipepb.FieldType_MapType:
		n, err := d.int32()
		if err != nil {
			return nil, err
		}
		if n < 0 || int(n) > len(d.b) {
			return nil, errTruncated
		}
		out := make([]entry, 0, n)
		for range n {
			k, err := d.value(ti.MapType.GetKeyType(), depth+1)
			if err != nil {
				return nil, err
			}
			e := entry{Key: value{Type: ti.MapType.GetKeyType(), V: k}, Value: value{Type: ti.MapType.GetValueType()}}
			if present, err := d.nullable(ti.MapType.GetValueType()); err != nil {
				return nil, err
			} else if present {
				if e.Value.V, err = d.value(ti.MapType.GetValueType(), depth+1); err != nil {
					return nil, err
				}
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("type %s is not one this decoder knows", typeName(t))
}

// iterable reads Beam's iterable encoding: a big-endian int32 count and the elements, or -1
// and blocks of elements each preceded by its varint count, ended by a 0.
func (d *decoder) iterable(elem *pipepb.FieldType, depth int) ([]value, error) {
	n, err := d.int32()
	if err != nil {
		return nil, err
	}
	var out []value
	read := func(count int64) error {
		if count < 0 || count > int64(len(d.b)) {
			return errTruncated
		}
		for range count {
			v := value{Type: elem}
			present, err := d.nullable(elem)
			if err != nil {
				return err
			}
			if present {
				if v.V, err = d.value(elem, depth+1); err != nil {
					return err
				}
			}
			out = append(out, v)
		}
		return nil
	}
	if n >= 0 {
		return out, read(int64(n))
	}
	for {
		count, err := d.varint()
		if err != nil {
			return nil, err
		}
		if count == 0 {
			return out, nil
		}
		if err := read(count); err != nil {
			return nil, err
		}
	}
}

func (d *decoder) int32() (int32, error) {
	b, err := d.take(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

func (d *decoder) atomic(a pipepb.AtomicType) (any, error) {
	switch a {
	case pipepb.AtomicType_BYTE:
		b, err := d.take(1)
		if err != nil {
			return nil, err
		}
		return int64(int8(b[0])), nil
	case pipepb.AtomicType_INT16:
		b, err := d.take(2)
		if err != nil {
			return nil, err
		}
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case pipepb.AtomicType_INT32:
		v, err := d.varint()
		return int64(int32(v)), err
	case pipepb.AtomicType_INT64:
		return d.varint()
	case pipepb.AtomicType_FLOAT:
		b, err := d.take(4)
		if err != nil {
			return nil, err
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case pipepb.AtomicType_DOUBLE:
		b, err := d.take(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case pipepb.AtomicType_BOOLEAN:
		b, err := d.take(1)
		if err != nil {
			return nil, err
		}
		return b[0] != 0, nil
	case pipepb.AtomicType_STRING, pipepb.AtomicType_BYTES:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		b, err := d.take(n)
		if err != nil {
			return nil, err
		}
		if a == pipepb.AtomicType_STRING {
			return string(b), nil
		}
		return append([]byte(nil), b...), nil
	}
	return nil, fmt.Errorf("atomic type %v is not one this decoder knows", a)
}

// typeName writes a schema type as errors show it: "STRING", "MAP<STRING, STRING>",
// "ARRAY<INT64>", "ROW", or the logical type's URN.
func typeName(t *pipepb.FieldType) string {
	switch ti := t.GetTypeInfo().(type) {
	case *pipepb.FieldType_AtomicType:
		return ti.AtomicType.String()
	case *pipepb.FieldType_RowType:
		var names []string
		for _, f := range ti.RowType.GetSchema().GetFields() {
			names = append(names, quoteName(f.GetName()))
		}
		return "ROW(" + strings.Join(names, ", ") + ")"
	case *pipepb.FieldType_ArrayType:
		return "ARRAY<" + typeName(ti.ArrayType.GetElementType()) + ">"
	case *pipepb.FieldType_IterableType:
		return "ITERABLE<" + typeName(ti.IterableType.GetElementType()) + ">"
	case *pipepb.FieldType_MapType:
		return "MAP<" + typeName(ti.MapType.GetKeyType()) + ", " + typeName(ti.MapType.GetValueType()) + ">"
	case *pipepb.FieldType_LogicalType:
		return "logical type " + quoteName(ti.LogicalType.GetUrn())
	}
	return "an unknown type"
}
