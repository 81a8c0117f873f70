package cloudtasksio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	register.Function1x2(longKeyError)
	register.Function1x2(longQueueError)
}

// longError is an error far longer than maxErrorText whose end, which a cut text loses, is
// "END-" + tail.
func longError(tail string) error {
	return errors.New(strings.Repeat("the key service said no; ", 150) + "END-" + tail)
}

// longKeyError is a TaskIDFn that fails every element with a long error: one text for ids
// that start with "a", another for the rest.
func longKeyError(o urlOrder) (string, error) {
	if strings.HasPrefix(o.ID, "a") {
		return "", longError("A")
	}
	return "", longError("B")
}

// longQueueError is a QueueFn that fails with a long error.
func longQueueError(urlOrder) (Queue, error) { return Queue{}, longError("QUEUE") }

func TestTheWholeTextOfEachDistinctFailureIsLoggedAtDebugOncePerBundle(t *testing.T) {
	srv := newBundleServer(t)
	logs := captureLogs(t)
	q, err := ParseQueue(bundleQueue)
	require.NoError(t, err)
	cfg := Config{Queue: q, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, TaskIDFn: longKeyError,
		OnFailure: LogAndDrop, EmulatorEndpoint: srv.Addr, Writer: WriterOptions{QueuePreflight: PreflightOff}}
	spec, err := compile(cfg, typeOf(urlOrder{}))
	require.NoError(t, err)
	f := &writeFn{Spec: spec}
	require.NoError(t, f.Setup())
	ctx := context.Background()
	for bundle := 1; bundle <= 2; bundle++ {
		logs.Reset()
		require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
		for i := range 6 {
			id := fmt.Sprintf("%c-secret-token-%d", "ab"[i%2], i)
			require.NoError(t, f.ProcessElement(ctx, 0, urlOrder{ID: id}, discardDeadLetters))
		}
		require.NoError(t, f.FinishBundle(ctx, discardDeadLetters))

		whole := logLines(logs, "the whole text of")
		require.Len(t, whole, 2, "bundle %d: one DEBUG line per distinct text", bundle)
		for i, tail := range []string{"END-A", "END-B"} {
			assert.Contains(t, whole[i], "level=DEBUG")
			assert.Contains(t, whole[i], "cloudtasksio: the whole text of the failure (TASK_ID) of an element for queue "+bundleQueue)
			assert.Contains(t, whole[i], tail, "the text is whole")
		}
		drops := logLines(logs, "cloudtasksio: dropped")
		require.Len(t, drops, 6)
		for _, d := range drops {
			assert.NotContains(t, d, "END-", "the WARN line's text is cut")
		}
		assert.NotContains(t, logs.String(), "secret-token", "no element value in the log")
	}
}

func TestTheWholeTextOfAQueueFnErrorIsLoggedAtDebug(t *testing.T) {
	srv := newBundleServer(t)
	logs := captureLogs(t)
	cfg := Config{QueueFn: longQueueError, HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()},
		EmulatorEndpoint: srv.Addr, Writer: WriterOptions{QueuePreflight: PreflightOff}}
	spec, err := compile(cfg, typeOf(urlOrder{}))
	require.NoError(t, err)
	f := &writeFn{Spec: spec}
	require.NoError(t, f.Setup())
	ctx := context.Background()
	require.NoError(t, f.StartBundle(ctx, discardDeadLetters))
	err = f.ProcessElement(ctx, 0, urlOrder{ID: "1"}, discardDeadLetters)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "END-QUEUE", "the bundle's error is cut")
	whole := logLines(logs, "the whole text of the QueueFn's error")
	require.Len(t, whole, 1)
	assert.Contains(t, whole[0], "level=DEBUG")
	assert.Contains(t, whole[0], "END-QUEUE")
}

func TestTheWholeTextOfAnExactlyOnceFailureIsLoggedAtDebug(t *testing.T) {
	logs := captureLogs(t)
	cfg := Config{Queue: Queue{Project: "p", Location: "l", Name: "q"}, Delivery: ExactlyOnce, TaskIDFn: longKeyError,
		HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, EmulatorEndpoint: "127.0.0.1:1"}
	spec, err := compile(cfg, typeOf(urlOrder{}))
	require.NoError(t, err)
	f := &stageFn{Spec: spec}
	require.NoError(t, f.Setup())
	err = f.ProcessElement(context.Background(), urlOrder{ID: "a-secret-token", URL: "https://example.com/"}, func(envelope) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(TASK_ID)")
	assert.NotContains(t, err.Error(), "END-A", "the bundle's error is cut")
	whole := logLines(logs, "the whole text of an element's failure in exactly-once mode")
	require.Len(t, whole, 1)
	assert.Contains(t, whole[0], "END-A")
	assert.NotContains(t, logs.String(), "secret-token")
}

func TestABundleLogsAtMostSoManyWholeTexts(t *testing.T) {
	logs := captureLogs(t)
	var d fullErrorTexts
	ctx := context.Background()
	for i := range 2 * maxFullTextsPerBundle {
		d.log(ctx, CodeSerialization, bundleQueue, fmt.Sprint("failure ", i))
		d.log(ctx, CodeSerialization, bundleQueue, fmt.Sprint("failure ", i))
	}
	assert.Len(t, logLines(logs, "the whole text of"), maxFullTextsPerBundle)
	d.reset()
	logs.Reset()
	d.log(ctx, CodeSerialization, bundleQueue, "failure 0")
	assert.Len(t, logLines(logs, "the whole text of"), 1, "a new bundle logs again")
}
