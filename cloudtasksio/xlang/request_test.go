package xlang

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// This file builds expansion requests the way Beam's Python SDK does (see
// testdata/python-request.txt, one recorded from apache-beam 2.77.0): an Impulse named
// impulse_input makes the input PCollection, whose coder is the rows' or bytes', and the
// configuration is a row whose schema Python infers from the keyword arguments' types.

// atomicType is a schema type of a.
func atomicType(a pipepb.AtomicType, nullable bool) *pipepb.FieldType {
	return &pipepb.FieldType{Nullable: nullable, TypeInfo: &pipepb.FieldType_AtomicType{AtomicType: a}}
}

// stringMap is the schema type of a map of strings to strings.
func stringMap() *pipepb.FieldType {
	return &pipepb.FieldType{TypeInfo: &pipepb.FieldType_MapType{MapType: &pipepb.MapType{
		KeyType: atomicType(pipepb.AtomicType_STRING, false), ValueType: atomicType(pipepb.AtomicType_STRING, false)}}}
}

// configRow encodes config as Python's implicit schema would: each value's type from its Go
// type (string, int64, bool, float64, map[string]string), in name order. It returns the
// schema and the encoded row.
func configRow(t *testing.T, config map[string]any) (*pipepb.Schema, []byte) {
	t.Helper()
	s := &pipepb.Schema{Id: "config"}
	names := make([]string, 0, len(config))
	for k := range config {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		var ft *pipepb.FieldType
		switch config[name].(type) {
		case string:
			ft = atomicType(pipepb.AtomicType_STRING, false)
		case int64:
			ft = atomicType(pipepb.AtomicType_INT64, false)
		case bool:
			ft = atomicType(pipepb.AtomicType_BOOLEAN, false)
		case float64:
			ft = atomicType(pipepb.AtomicType_DOUBLE, false)
		case map[string]string:
			ft = stringMap()
		default:
			t.Fatalf("configRow: no schema type for %T", config[name])
		}
		s.Fields = append(s.Fields, &pipepb.Field{Name: name, Type: ft})
	}
	values := make([]any, len(names))
	for i, name := range names {
		values[i] = config[name]
	}
	return s, rowBytes(t, s, values...)
}

// rowBytes encodes a row of schema s in Beam's row encoding, as any SDK writes it: the field
// count, the null bitmap, then each value (nil is null). It takes any field name, unlike Go's
// row coder, and the types configRow uses.
func rowBytes(t *testing.T, s *pipepb.Schema, values ...any) []byte {
	t.Helper()
	require.Len(t, values, len(s.GetFields()))
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(values)))
	nulls := make([]byte, (len(values)+7)/8)
	anyNull := false
	for i, v := range values {
		if v == nil {
			nulls[i/8] |= 1 << (i % 8)
			anyNull = true
		}
	}
	if anyNull {
		b = binary.AppendUvarint(b, uint64(len(nulls)))
		b = append(b, nulls...)
	} else {
		b = binary.AppendUvarint(b, 0)
	}
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	for _, v := range values {
		switch x := v.(type) {
		case nil:
		case string:
			b = str(b, x)
		case int64:
			b = binary.AppendUvarint(b, uint64(x))
		case bool:
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case float64:
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(x))
		case map[string]string:
			b = binary.BigEndian.AppendUint32(b, uint32(len(x)))
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				b = str(str(b, k), x[k])
			}
		default:
			t.Fatalf("rowBytes: cannot encode %T", v)
		}
	}
	return b
}

// orderSchema is the schema of the input rows of most tests: id (nullable string), amount
// (int64), url (string), at (string).
func orderSchema() *pipepb.Schema {
	return &pipepb.Schema{Id: "orders", Fields: []*pipepb.Field{
		{Name: "id", Type: atomicType(pipepb.AtomicType_STRING, true)},
		{Name: "amount", Type: atomicType(pipepb.AtomicType_INT64, false)},
		{Name: "url", Type: atomicType(pipepb.AtomicType_STRING, false)},
		{Name: "at", Type: atomicType(pipepb.AtomicType_STRING, false)},
	}}
}

// request is an expansion request under construction.
type request struct {
	req *jobpb.ExpansionRequest
}

// inputCoder is the input PCollection's coder: bytes, a row coder of a schema, or any URN.
func newRequest(t *testing.T, inputCoder *pipepb.Coder, config map[string]any) *request {
	t.Helper()
	s, row := configRow(t, config)
	payload, err := proto.Marshal(&pipepb.SchemaTransformPayload{Identifier: Identifier, ConfigurationSchema: s, ConfigurationRow: row})
	require.NoError(t, err)
	return &request{req: &jobpb.ExpansionRequest{
		Namespace: "external_1",
		Components: &pipepb.Components{
			Transforms: map[string]*pipepb.PTransform{"impulse_input": {
				UniqueName: "impulse_input", Spec: &pipepb.FunctionSpec{Urn: "beam:transform:impulse:v1"},
				Outputs: map[string]string{"out": "ref_PCollection_PCollection_1"},
			}},
			Pcollections: map[string]*pipepb.PCollection{"ref_PCollection_PCollection_1": {
				UniqueName: "1", CoderId: "ref_Coder_Input_1", IsBounded: pipepb.IsBounded_BOUNDED, WindowingStrategyId: "ref_Windowing_Windowing_1",
			}},
			WindowingStrategies: map[string]*pipepb.WindowingStrategy{"ref_Windowing_Windowing_1": {
				WindowFn:      &pipepb.FunctionSpec{Urn: urnGlobalWindow},
				WindowCoderId: "ref_Coder_GlobalWindowCoder_2", EnvironmentId: "ref_Environment_default_environment_1",
			}},
			Coders: map[string]*pipepb.Coder{
				"ref_Coder_Input_1":             inputCoder,
				"ref_Coder_GlobalWindowCoder_2": {Spec: &pipepb.FunctionSpec{Urn: "beam:coder:global_window:v1"}},
			},
			Environments: map[string]*pipepb.Environment{"ref_Environment_default_environment_1": {Urn: "beam:env:default:v1"}},
		},
		Transform: &pipepb.PTransform{
			UniqueName: "WriteToCloudTasks",
			Spec:       &pipepb.FunctionSpec{Urn: urnSchemaTransform, Payload: payload},
			Inputs:     map[string]string{"input": "ref_PCollection_PCollection_1"},
		},
	}}
}

// rowCoder is the coder of rows of s.
func rowCoder(t *testing.T, s *pipepb.Schema) *pipepb.Coder {
	t.Helper()
	payload, err := proto.Marshal(s)
	require.NoError(t, err)
	return &pipepb.Coder{Spec: &pipepb.FunctionSpec{Urn: urnRowCoder, Payload: payload}}
}

// bytesCoder is the coder of bytes.
func bytesCoder() *pipepb.Coder {
	return &pipepb.Coder{Spec: &pipepb.FunctionSpec{Urn: urnBytesCoder}}
}

// baseConfig is a valid configuration for rows; tests change it.
func baseConfig() map[string]any {
	return map[string]any{"project": "p", "location": "l", "queue": "q", "http_url": "https://example.com/orders", "emulator_endpoint": "127.0.0.1:9"}
}

// with returns config with the given key and value pairs added (a nil value removes the key).
func with(config map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range config {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// describe writes a transform map's ids and unique names, for failure messages.
func describe(ts map[string]*pipepb.PTransform) string {
	var lines []string
	for id, tr := range ts {
		lines = append(lines, fmt.Sprintf("%s %q %s", id, tr.GetUniqueName(), tr.GetSpec().GetUrn()))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
