package cloudtasksio

import (
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A user's code may panic with a value that cannot be printed: its String or Error method
// panics with a value of its own kind. fmt recovers the first panic of such a method but not
// the second, so formatting the value with fmt.Sprint panics again inside the recovery.

// stringBomb panics with itself when printed through its String method.
type stringBomb struct{}

func (stringBomb) String() string { panic(stringBomb{}) }

// errorBomb panics with itself when printed through its Error method.
type errorBomb struct{}

func (errorBomb) Error() string { panic(errorBomb{}) }

// explosive marshals itself, and panics with a value that cannot be printed for the values
// "string" and "error".
type explosive string

func (e explosive) MarshalJSON() ([]byte, error) {
	switch e {
	case "string":
		panic(stringBomb{})
	case "error":
		panic(errorBomb{})
	}
	return []byte(`"` + string(e) + `"`), nil
}

type explosiveOrder struct {
	ID   string    `json:"id"`
	Note explosive `json:"note"`
}

func serializeOrPanicWithABomb(o plainOrder) (*cloudtaskspb.Task, error) {
	switch o.ID {
	case "string":
		panic(stringBomb{})
	case "error":
		panic(errorBomb{})
	}
	return panicOnBad(o)
}

func init() { register.Function1x2(serializeOrPanicWithABomb) }

func TestABodyFieldPanickingWithAnUnprintableValueIsADeadLetter(t *testing.T) {
	srv := newBundleServer(t)
	f := bundleWriteFnFor(t, srv, Config{HTTP: jsonTarget(), OnFailure: DeadLetter}, explosiveOrder{})
	dls, err := runBundle(t, f, explosiveOrder{ID: "1", Note: "fine"}, explosiveOrder{ID: "2", Note: "string"},
		explosiveOrder{ID: "3", Note: "error"}, explosiveOrder{ID: "4"})
	require.NoError(t, err, "one element's panic must not fail the bundle under DeadLetter")
	assert.Len(t, srv.Tasks(bundleQueue), 2)
	require.Len(t, dls, 2)
	for i, want := range []string{"cloudtasksio.stringBomb", "cloudtasksio.errorBomb"} {
		assert.Equal(t, CodeSerialization, dls[i].Code)
		assert.Contains(t, dls[i].Error, "building the task panicked: ")
		assert.Contains(t, dls[i].Error, want, "the panic value is named by its type")
		assert.NotEmpty(t, dls[i].Element, "the element travels with its dead letter")
	}
}

func TestASerializerPanickingWithAnUnprintableValueIsADeadLetter(t *testing.T) {
	srv := newBundleServer(t)
	f := bundleWriteFnFor(t, srv, Config{Serializer: serializeOrPanicWithABomb, OnFailure: DeadLetter}, plainOrder{})
	dls, err := runBundle(t, f, plainOrder{ID: "1"}, plainOrder{ID: "string"}, plainOrder{ID: "error"}, plainOrder{ID: "2"})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(bundleQueue), 2)
	require.Len(t, dls, 2)
	for i, want := range []string{"cloudtasksio.stringBomb", "cloudtasksio.errorBomb"} {
		assert.Equal(t, CodeSerialization, dls[i].Code)
		assert.Contains(t, dls[i].Error, "the Serializer failed: panicked: ")
		assert.Contains(t, dls[i].Error, want)
	}
}

func TestCall1x2TurnsAPanicWithAnUnprintableValueIntoAnError(t *testing.T) {
	f := reflectx.ToFunc1x2(reflectx.MakeFunc(serializeOrPanicWithABomb))
	for _, id := range []string{"string", "error"} {
		var err error
		require.NotPanics(t, func() { _, err = call1x2(f, plainOrder{ID: id}) }, id)
		require.Error(t, err, id)
		assert.Contains(t, err.Error(), "panicked: ", id)
		assert.LessOrEqual(t, len(err.Error()), len("panicked: ")+maxErrorText, id)
	}
}
