package cloudtasksio

import (
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One rule for a bad header value, whatever is wrong with it (CR, LF, NUL or bytes that are
// not UTF-8): a value of the element's headers field is found while the task is built
// (SERIALIZATION, no task); a value in a task a Serializer built is found by the checks of a
// built task (INVALID_ARGUMENT, the task as payload); a fixed header's is a construction error.

func TestABadHeadersFieldValueIsASerializationFailureWhateverIsWrongWithIt(t *testing.T) {
	srv := newBundleServer(t)
	f := bundleWriteFnFor(t, srv, Config{HTTP: jsonTarget(), OnFailure: DeadLetter}, headerOrder{})
	dls, err := runBundle(t, f,
		headerOrder{ID: "lf", Headers: map[string]string{"X-Sig": "secret\nmore"}},
		headerOrder{ID: "utf8", Headers: map[string]string{"X-Sig": "secret\xc3\x28"}},
		headerOrder{ID: "good", Headers: map[string]string{"X-Sig": "fine"}})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(bundleQueue), 1)
	require.Len(t, dls, 2)
	for _, dl := range dls {
		assert.Equal(t, CodeSerialization, dl.Code, dl.Error)
		assert.Empty(t, dl.Payload, "the task was not built")
		assert.Contains(t, dl.Error, `headers field header "X-Sig" has a value`)
		assert.NotContains(t, dl.Error, "secret", "a header value is never repeated")
	}
}

func init() { register.Function1x2(serializeWithHeader) }

// serializeWithHeader builds a task whose X-Sig header is the order's id.
func serializeWithHeader(o plainOrder) (*cloudtaskspb.Task, error) {
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://example.com/orders", Headers: map[string]string{"X-Sig": o.ID}}}}, nil
}

func TestABadHeaderValueInASerializersTaskIsInvalidArgumentWhateverIsWrongWithIt(t *testing.T) {
	srv := newBundleServer(t)
	f := bundleWriteFnFor(t, srv, Config{Serializer: serializeWithHeader, OnFailure: DeadLetter}, plainOrder{})
	dls, err := runBundle(t, f, plainOrder{ID: "secret\nmore"}, plainOrder{ID: "secret\xc3\x28"}, plainOrder{ID: "fine"})
	require.NoError(t, err)
	assert.Len(t, srv.Tasks(bundleQueue), 1)
	require.Len(t, dls, 2)
	for _, dl := range dls {
		assert.Equal(t, CodeInvalidArgument, dl.Code, dl.Error)
		assert.NotEmpty(t, dl.Payload, "the dead letter carries the task")
		assert.NotContains(t, dl.Error, "secret", "a header value is never repeated")
	}
}

func TestAFixedHeaderValueThatIsNotUTF8IsAConstructionError(t *testing.T) {
	target := jsonTarget()
	target.Headers = map[string]string{"X-Sig": "secret\xff"}
	_, err := compile(Config{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: target}, typeOf(headerOrder{}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `header "X-Sig" has a value that is not valid UTF-8`)
	assert.NotContains(t, err.Error(), "secret")
}
