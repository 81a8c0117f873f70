package xlang

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// order builds a row of orderSchema's Go type; a nil id is a null.
func order(t *testing.T, id *string, amount int64, url, at string) any {
	t.Helper()
	rt, err := schema.ToType(orderSchema())
	require.NoError(t, err)
	rv := reflect.New(rt).Elem()
	rv.Field(0).Set(reflect.ValueOf(id))
	rv.Field(1).SetInt(amount)
	rv.Field(2).SetString(url)
	rv.Field(3).SetString(at)
	return rv.Interface()
}

// setUpToTask returns a set-up toTaskFn for orderSchema rows.
func setUpToTask(t *testing.T, fn toTaskFn) *toTaskFn {
	t.Helper()
	rt, err := schema.ToType(orderSchema())
	require.NoError(t, err)
	fn.Rows, fn.RowType, fn.Queue = true, beam.EncodedType{T: rt}, "projects/p/locations/l/queues/q"
	if fn.Body.Name == "" {
		fn.Body = formats.JSON()
	}
	require.NoError(t, fn.Setup())
	return &fn
}

// runToTask runs fn on one element and returns what it emitted and its error.
func runToTask(fn *toTaskFn, elem any) (tasks []any, failed []deadletter.FailedElement, err error) {
	err = fn.ProcessElement(context.Background(), elem, func(y beam.Y) { tasks = append(tasks, y) },
		func(fe deadletter.FailedElement) { failed = append(failed, fe) })
	return tasks, failed, err
}

func TestARowBecomesATaskElement(t *testing.T) {
	fn := setUpToTask(t, toTaskFn{TaskIDField: "id", URLField: "url", ScheduleTimeField: "at"})
	id := "order-1"
	tasks, failed, err := runToTask(fn, order(t, &id, 42, "https://example.com/o/1", "2026-05-01T09:30:00Z"))
	require.NoError(t, err)
	assert.Empty(t, failed)
	require.Len(t, tasks, 1)
	task := tasks[0].(httpTask)
	assert.JSONEq(t, `{"id":"order-1","amount":42,"url":"https://example.com/o/1","at":"2026-05-01T09:30:00Z"}`, string(task.Body),
		"the whole row is the JSON body, named as its schema names its fields")
	assert.Equal(t, "order-1", task.Key)
	assert.Equal(t, "https://example.com/o/1", task.URL)
	assert.Equal(t, time.Date(2026, 5, 1, 9, 30, 0, 0, time.UTC), task.ScheduleTime)
	assert.NotEmpty(t, task.Element, "the row is kept for its error row")

	tasks, _, err = runToTask(fn, order(t, nil, 1, "", ""))
	require.NoError(t, err)
	task = tasks[0].(httpTask)
	assert.Empty(t, task.Key, "a null id leaves the key empty: the sink's TASK_ID failure")
	assert.True(t, task.ScheduleTime.IsZero())
	_, err = httpTaskKey(task)
	assert.ErrorIs(t, err, errNoKey)
}

func TestBytesAreTheBodyAsTheyAre(t *testing.T) {
	fn := &toTaskFn{RowType: beam.EncodedType{T: reflect.TypeFor[[]byte]()}, AppEngine: true}
	require.NoError(t, fn.Setup())
	tasks, _, err := runToTask(fn, []byte("raw body"))
	require.NoError(t, err)
	assert.Equal(t, appEngineTask{Body: []byte("raw body")}, tasks[0])
}

func TestARowWhoseTaskCannotBeBuiltGoesToTheFailurePolicy(t *testing.T) {
	id := "order-1"
	bad := order(t, &id, 1, "", "tomorrow at nine")
	for _, c := range []struct {
		policy   string
		err      bool
		deadLtrs int
	}{{onFailureFail, true, 0}, {onFailureLogAndDrop, false, 0}, {onFailureDeadLetter, false, 1}} {
		t.Run(c.policy, func(t *testing.T) {
			fn := setUpToTask(t, toTaskFn{ScheduleTimeField: "at", OnFailure: c.policy})
			tasks, failed, err := runToTask(fn, bad)
			assert.Empty(t, tasks)
			assert.Len(t, failed, c.deadLtrs)
			if c.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `schedule_time_field "at": the value is not an RFC 3339 time`)
				assert.NotContains(t, err.Error(), "tomorrow at nine", "the value is never repeated")
			} else {
				assert.NoError(t, err)
			}
			for _, fe := range failed {
				assert.Equal(t, cloudtasksio.CodeSerialization, fe.Code)
				assert.Equal(t, "projects/p/locations/l/queues/q", fe.Destination)
				assert.NotContains(t, fe.Error, "tomorrow at nine")
			}
		})
	}
}

func TestAFailureBecomesAnErrorRowCarryingTheElement(t *testing.T) {
	s := orderSchema()
	in := input{Rows: true, Schema: s}
	var err error
	in.RowType, err = rowType(s)
	require.NoError(t, err)
	errType, err := errorRowType(in)
	require.NoError(t, err)

	toTask := setUpToTask(t, toTaskFn{TaskIDField: "id"})
	tasks, _, err := runToTask(toTask, order(t, nil, 7, "", ""))
	require.NoError(t, err)
	element, typeName, err := deadletter.EncodeElement(tasks[0].(httpTask))
	require.NoError(t, err)
	fe := deadletter.FailedElement{Connector: cloudtasksio.Connector, Destination: "projects/p/locations/l/queues/q", Code: cloudtasksio.CodeTaskID,
		Error: "the TaskIDFn failed", Element: element, ElementType: typeName}

	fn := &errorRowFn{Rows: true, RowType: beam.EncodedType{T: in.RowType}, ErrorType: beam.EncodedType{T: errType}, Step: "WriteToCloudTasks"}
	require.NoError(t, fn.Setup())
	var rows []any
	require.NoError(t, fn.ProcessElement(context.Background(), fe, func(z beam.Z) { rows = append(rows, z) }))
	require.Len(t, rows, 1)
	got, err := json.Marshal(rows[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"Element":{"Id":null,"Amount":7,"Url":"","At":""},"Msg":"the TaskIDFn failed",
		"Stack":"in WriteToCloudTasks (cloudtasksio.Write of beam-cloudtasks, Go SDK): code TASK_ID","Code":"TASK_ID",
		"Destination":"projects/p/locations/l/queues/q"}`, string(got))
	assert.Equal(t, []string{"element", "msg", "stack", "code", "destination"}, fieldNames(errType))
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		out = append(out, schemaFieldName(t.Field(i)))
	}
	return out
}

func TestAnErrorRowOfBytesCarriesTheBytes(t *testing.T) {
	errType, err := errorRowType(input{})
	require.NoError(t, err)
	element, typeName, err := deadletter.EncodeElement(httpTask{Body: []byte("raw")})
	require.NoError(t, err)
	fn := &errorRowFn{RowType: beam.EncodedType{T: reflect.TypeFor[[]byte]()}, ErrorType: beam.EncodedType{T: errType}}
	require.NoError(t, fn.Setup())
	var rows []any
	require.NoError(t, fn.ProcessElement(context.Background(), deadletter.FailedElement{Code: "INVALID_ARGUMENT", Element: element, ElementType: typeName},
		func(z beam.Z) { rows = append(rows, z) }))
	assert.Equal(t, []byte("raw"), reflect.ValueOf(rows[0]).Field(errorFieldElement).Bytes())
}
