package xlang

import (
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// instantField is a field of an instant's logical type as other SDKs send it.
func instantField(name, urn string) *pipepb.Field {
	rep := atomicType(pipepb.AtomicType_INT64, false)
	if urn == urnMicrosInstant {
		rep = &pipepb.FieldType{TypeInfo: &pipepb.FieldType_RowType{RowType: &pipepb.RowType{Schema: &pipepb.Schema{Fields: []*pipepb.Field{
			{Name: "seconds", Type: atomicType(pipepb.AtomicType_INT64, false)},
			{Name: "micros", Type: atomicType(pipepb.AtomicType_INT64, false)},
		}}}}}
	}
	return &pipepb.Field{Name: name, Type: &pipepb.FieldType{TypeInfo: &pipepb.FieldType_LogicalType{LogicalType: &pipepb.LogicalType{
		Urn: urn, Representation: rep}}}}
}

// eventSchema has a Python Timestamp (micros_instant) and a Java DATETIME (millis_instant).
func eventSchema() *pipepb.Schema {
	return &pipepb.Schema{Id: "events", Fields: []*pipepb.Field{
		{Name: "id", Type: atomicType(pipepb.AtomicType_STRING, false)},
		instantField("at", urnMicrosInstant),
		instantField("seen", urnMillisInstant),
	}}
}

func TestRowsWithInstantsAreReadAndTheirInstantsAreRFC3339InTheBody(t *testing.T) {
	s := eventSchema()
	rt, err := rowType(s)
	require.NoError(t, err)
	at := time.Date(2026, 5, 1, 9, 30, 0, 123456000, time.UTC)
	rv := reflect.New(rt).Elem()
	rv.Field(0).SetString("e-1")
	rv.Field(1).Set(reflect.ValueOf(microsInstant{Seconds: at.Unix(), Micros: int64(at.Nanosecond() / 1000)}))
	rv.Field(2).Set(reflect.ValueOf(millisInstant(at.UnixMilli())))

	fn := &toTaskFn{Rows: true, RowType: beam.EncodedType{T: rt}, Body: formats.JSON(), ScheduleTimeField: "at", Queue: "projects/p/locations/l/queues/q"}
	require.NoError(t, fn.Setup())
	tasks, failed, err := runToTask(fn, rv.Interface())
	require.NoError(t, err)
	require.Empty(t, failed)
	task := tasks[0].(httpTask)
	assert.JSONEq(t, `{"id":"e-1","at":"2026-05-01T09:30:00.123456Z","seen":"2026-05-01T09:30:00.123Z"}`, string(task.Body))
	assert.Equal(t, at, task.ScheduleTime, "an instant can be the schedule time")

	// The error row gives the instants back in their logical types.
	errType, err := errorRowType(input{Rows: true, Schema: s, RowType: rt})
	require.NoError(t, err)
	back, err := schema.FromType(errType)
	require.NoError(t, err)
	element := back.GetFields()[0].GetType().GetRowType().GetSchema()
	assert.Equal(t, urnMicrosInstant, element.GetFields()[1].GetType().GetLogicalType().GetUrn())
	assert.Equal(t, urnMillisInstant, element.GetFields()[2].GetType().GetLogicalType().GetUrn())
}

func TestAnInstantCanBeTheScheduleTimeField(t *testing.T) {
	expand(t, newRequest(t, rowCoder(t, eventSchema()), with(baseConfig(), "schedule_time_field", "seen", "task_id_field", "id")))
	msg := expandError(t, newRequest(t, rowCoder(t, eventSchema()), with(baseConfig(), "task_id_field", "at")))
	assert.Contains(t, msg, `task_id_field names "at", which holds logical type "beam:logical_type:micros_instant:v1"`)
}
