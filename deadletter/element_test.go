package deadletter_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// order looks like a sink's element type: body fields and struct-tag metadata.
type order struct {
	ID       string            `json:"id"`
	Amount   float64           `json:"amount"`
	Items    []string          `json:"items"`
	Note     *string           `json:"note"`
	Headers  map[string]string `cloudtasks:"headers"`
	Schedule time.Time         `cloudtasks:"schedule-time"`
	Deadline time.Duration     `cloudtasks:"dispatch-deadline"`
	TaskID   string            `cloudtasks:"task-id"`
}

func init() { beam.RegisterType(reflect.TypeFor[order]()) }

func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	b, name, err := deadletter.EncodeElement(v)
	require.NoError(t, err)
	require.NotEmpty(t, b)
	got, err := deadletter.DecodeElement[T](deadletter.FailedElement{Code: "SERIALIZATION", Element: b, ElementType: name})
	require.NoError(t, err)
	return got
}

func TestDecodeElementGivesBackTheEncodedElement(t *testing.T) {
	note := "leave at the door"
	o := order{ID: "o-1", Amount: 12.5, Items: []string{"a", "b"}, Note: &note,
		Headers: map[string]string{"X-Tenant": "t1"}, Schedule: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Deadline: 30 * time.Second, TaskID: "order-o-1"}
	got := roundTrip(t, o)
	assert.Equal(t, o.ID, got.ID)
	assert.Equal(t, o.Amount, got.Amount)
	assert.Equal(t, o.Items, got.Items)
	require.NotNil(t, got.Note)
	assert.Equal(t, note, *got.Note)
	assert.Equal(t, o.Headers, got.Headers)
	assert.True(t, o.Schedule.Equal(got.Schedule), "schedule %v, got %v", o.Schedule, got.Schedule)
	assert.Equal(t, o.Deadline, got.Deadline)
	assert.Equal(t, o.TaskID, got.TaskID)

	assert.Equal(t, "a,b,c\n", roundTrip(t, "a,b,c\n"))
	assert.Equal(t, []byte{0, 1, 2, 0xff}, roundTrip(t, []byte{0, 1, 2, 0xff}))
	assert.Equal(t, int64(-42), roundTrip(t, int64(-42)))
}

func TestElementTypeNameIsThePackagePathAndName(t *testing.T) {
	assert.Equal(t, "github.com/beam-cloudtasks/beam-cloudtasks/deadletter_test.order", deadletter.ElementTypeName(reflect.TypeFor[order]()))
	assert.Equal(t, "string", deadletter.ElementTypeName(reflect.TypeFor[string]()))
	assert.Equal(t, "[]uint8", deadletter.ElementTypeName(reflect.TypeFor[[]byte]()))
	assert.Equal(t, "time.Time", deadletter.ElementTypeName(reflect.TypeFor[time.Time]()))
}

func TestDecodeElementRefusesAnotherType(t *testing.T) {
	b, name, err := deadletter.EncodeElement("just a string")
	require.NoError(t, err)
	_, err = deadletter.DecodeElement[[]byte](deadletter.FailedElement{Element: b, ElementType: name})
	require.ErrorIs(t, err, deadletter.ErrElementType)
	assert.Contains(t, err.Error(), "it holds a string, not a []uint8")
	assert.NotContains(t, err.Error(), "just a string", "the error never repeats the element")
}

func TestDecodeElementOfADeadLetterWithoutElementSaysSo(t *testing.T) {
	_, err := deadletter.DecodeElement[order](deadletter.FailedElement{Code: "INVALID_ARGUMENT", Payload: []byte("task")})
	require.ErrorIs(t, err, deadletter.ErrNoElement)
	assert.Contains(t, err.Error(), "INVALID_ARGUMENT")
}

func TestDecodeElementOfBytesThatAreNoElementIsABoundedError(t *testing.T) {
	secret := bytes.Repeat([]byte("SECRET"), 10000)
	for name, fe := range map[string]deadletter.FailedElement{
		"garbage":   {Element: secret},
		"truncated": {Element: []byte{0x80}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := deadletter.DecodeElement[order](fe)
			require.Error(t, err)
			assert.Less(t, len(err.Error()), 1024, "bounded")
			assert.NotContains(t, err.Error(), "SECRET")
		})
	}
	// A string coder reads a length prefix: bytes beyond it are left over, not ignored.
	b, name, err := deadletter.EncodeElement("abc")
	require.NoError(t, err)
	_, err = deadletter.DecodeElement[string](deadletter.FailedElement{Element: append(b, 'x'), ElementType: name})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "left over")
}

func TestAnElementTypeWithoutCoderIsAnError(t *testing.T) {
	_, err := deadletter.NewElementEncoder(reflect.TypeFor[chan int]())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no coder for element type chan int")
	_, err = deadletter.NewElementEncoder(nil)
	require.Error(t, err)
}

// TestTheElementSurvivesTheFailedElementCoder checks that a dead letter moved between
// pipeline steps (encoded with the Beam coder of FailedElement) keeps its element.
func TestTheElementSurvivesTheFailedElementCoder(t *testing.T) {
	b, name, err := deadletter.EncodeElement(order{ID: "o-7", Items: []string{"x"}})
	require.NoError(t, err)
	fe := deadletter.FailedElement{Connector: "cloudtasks", Destination: "projects/p/locations/l/queues/q",
		Code: "SERIALIZATION", Error: "boom", Element: b, ElementType: name}

	var buf bytes.Buffer
	ft := reflect.TypeFor[deadletter.FailedElement]()
	require.NoError(t, beam.NewElementEncoder(ft).Encode(fe, &buf))
	decoded, err := beam.NewElementDecoder(ft).Decode(&buf)
	require.NoError(t, err)
	got := decoded.(deadletter.FailedElement)
	assert.Equal(t, fe, got)
	o, err := deadletter.DecodeElement[order](got)
	require.NoError(t, err)
	assert.Equal(t, "o-7", o.ID)
}

func TestDecodeElementErrorsWrap(t *testing.T) {
	_, err := deadletter.DecodeElement[string](deadletter.FailedElement{})
	assert.True(t, errors.Is(err, deadletter.ErrNoElement))
	assert.True(t, strings.HasPrefix(err.Error(), "deadletter: DecodeElement: "))
}

func TestDecodeElementAsTakesTheTypeAtRunTime(t *testing.T) {
	b, name, err := deadletter.EncodeElement(order{ID: "o-9"})
	require.NoError(t, err)
	fe := deadletter.FailedElement{Element: b, ElementType: name}
	got, err := deadletter.DecodeElementAs(fe, reflect.TypeFor[order]())
	require.NoError(t, err)
	assert.Equal(t, order{ID: "o-9"}, got)

	_, err = deadletter.DecodeElementAs(fe, reflect.TypeFor[string]())
	assert.ErrorIs(t, err, deadletter.ErrElementType)
	_, err = deadletter.DecodeElementAs(fe, nil)
	assert.Error(t, err)
}

// unprintable panics with itself when printed, so fmt's own recovery of that panic panics again.
type unprintable struct{}

func (unprintable) String() string { panic(unprintable{}) }

// brittle is an element type whose coder, registered by the user, panics with an unprintable
// value for a brittle element marked bad, and with a plain text for one marked worse.
type brittle struct{ Bad, Worse bool }

func encodeBrittle(b brittle) []byte {
	if b.Bad {
		panic(unprintable{})
	}
	if b.Worse {
		panic(strings.Repeat("w", 1<<20))
	}
	return []byte{0}
}

func decodeBrittle(b []byte) brittle {
	if len(b) != 1 {
		panic(unprintable{})
	}
	return brittle{}
}

func init() { beam.RegisterCoder(reflect.TypeFor[brittle](), encodeBrittle, decodeBrittle) }

func TestACoderPanickingWithAnUnprintableValueIsAnError(t *testing.T) {
	enc, err := deadletter.NewElementEncoder(reflect.TypeFor[brittle]())
	require.NoError(t, err)
	_, err = enc.Encode(brittle{})
	require.NoError(t, err)

	require.NotPanics(t, func() { _, err = enc.Encode(brittle{Bad: true}) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked: a deadletter_test.unprintable that panics when formatted")

	require.NotPanics(t, func() { _, err = enc.Encode(brittle{Worse: true}) })
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 1024, "bounded")

	// Two bytes behind their length prefix, which decodeBrittle refuses.
	fe := deadletter.FailedElement{Element: []byte{2, 0, 0}, ElementType: enc.TypeName()}
	require.NotPanics(t, func() { _, err = deadletter.DecodeElement[brittle](fe) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deadletter_test.unprintable")
}
