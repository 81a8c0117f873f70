package cloudtasksio

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func TestLogAndDropWritesAWarningWithoutThePayload(t *testing.T) {
	logs := captureLogs(t)
	f := &writeFn{Spec: &sinkSpec{Config: Config{OnFailure: LogAndDrop}}, createBase: createBase[*pendingTask]{metrics: newSinkMetrics(false)}}
	task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://example.com/", Body: []byte("secret-body"), Headers: map[string]string{"Authorization": "secret-header"}}}}
	for i := 0; i < 3; i++ {
		assert.NoError(t, f.applyPolicy(context.Background(), 0, "projects/p/locations/l/queues/q",
			&elementFailure{code: CodeInvalidArgument, task: task, err: errors.New("the service said no")}), "a dropped element does not fail the bundle")
	}
	lines := logLines(logs, "cloudtasksio: dropped")
	require.Equal(t, 3, len(lines))
	for _, line := range lines {
		assert.Contains(t, line, "level=WARN")
		assert.Contains(t, line, "projects/p/locations/l/queues/q")
		assert.Contains(t, line, "INVALID_ARGUMENT")
		assert.Contains(t, line, "the service said no")
		assert.NotContains(t, line, "secret")
	}
}

func TestDeadLetterCarriesTheEventTimeAndBoundedError(t *testing.T) {
	type emitted struct {
		et beam.EventTime
		fe deadletter.FailedElement
	}
	var out []emitted
	f := &writeFn{Spec: &sinkSpec{Config: Config{OnFailure: DeadLetter}}, createBase: createBase[*pendingTask]{metrics: newSinkMetrics(false)},
		failureRouter: failureRouter{emit: func(et beam.EventTime, fe deadletter.FailedElement) { out = append(out, emitted{et, fe}) }}}
	require.NoError(t, f.applyPolicy(context.Background(), 1234, "projects/p/locations/l/queues/q",
		&elementFailure{code: CodeSerialization, err: errors.New(strings.Repeat("x", 5000))}))
	require.Len(t, out, 1)
	assert.Equal(t, beam.EventTime(1234), out[0].et)
	assert.Equal(t, Connector, out[0].fe.Connector)
	assert.Equal(t, CodeSerialization, out[0].fe.Code)
	assert.Empty(t, out[0].fe.Payload, "no task was built")
	assert.LessOrEqual(t, len(out[0].fe.Error), maxErrorText)
	assert.Contains(t, out[0].fe.Error, "[truncated]")
}

// TestTheBundleFailsWithItsFirstFailure checks that the bundle error is the earliest failure,
// whether it came from the FailBundle policy (a rejected task) or from the engine (a terminal
// status), when both happen while the bundle finishes.
func TestTheBundleFailsWithItsFirstFailure(t *testing.T) {
	invalid := status.Error(codes.InvalidArgument, "bad task")
	denied := status.Error(codes.PermissionDenied, "no permission")
	for _, c := range []struct {
		name                string
		invalidAt, deniedAt time.Duration
		want, notWant       string
	}{
		{"policy first", 10 * time.Millisecond, 20 * time.Millisecond, "under the FailBundle policy", "PERMISSION_DENIED"},
		{"engine first", 20 * time.Millisecond, 10 * time.Millisecond, "PERMISSION_DENIED", "under the FailBundle policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				creator := engine.CreatorFunc(func(_ context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
					if req.GetTask().GetHttpRequest().GetUrl() == "https://example.com/invalid" {
						time.Sleep(c.invalidAt)
						return nil, invalid
					}
					time.Sleep(c.deniedAt)
					return nil, denied
				})
				f := &writeFn{Spec: &sinkSpec{Config: Config{OnFailure: FailBundle}}, createBase: createBase[*pendingTask]{metrics: newSinkMetrics(false)}}
				writer, err := DefaultWriterOptions().resolve()
				require.NoError(t, err)
				f.engine = engine.New(creator, engineOptions(writer), f)
				ctx := context.Background()
				for _, url := range []string{"https://example.com/invalid", "https://example.com/denied"} {
					req := &cloudtaskspb.CreateTaskRequest{Parent: "projects/p/locations/l/queues/q", Task: &cloudtaskspb.Task{
						MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: url}}}}
					require.NoError(t, f.engine.Submit(ctx, &engine.Request[*pendingTask]{Create: req, Tag: &pendingTask{queue: req.Parent}}))
				}
				err = f.FinishBundle(ctx, nil)
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
				assert.NotContains(t, err.Error(), c.notWant)
			})
		})
	}
}

// TestADeadLetterWhoseElementCannotBeEncodedIsStillEmitted checks that an encoding failure
// costs the dead letter only its element: it is emitted, says why in Error (within the
// bound), and is counted.
func TestADeadLetterWhoseElementCannotBeEncodedIsStillEmitted(t *testing.T) {
	var out []deadletter.FailedElement
	f := &writeFn{Spec: &sinkSpec{Config: Config{OnFailure: DeadLetter}}, createBase: createBase[*pendingTask]{metrics: newSinkMetrics(false)},
		failureRouter: failureRouter{emit: func(_ beam.EventTime, fe deadletter.FailedElement) { out = append(out, fe) }}}
	var err error
	f.elemEnc, err = deadletter.NewElementEncoder(reflect.TypeFor[string]()) // as Setup does
	require.NoError(t, err)
	ctx := context.Background()
	queue := "projects/p/locations/l/queues/q"

	require.NoError(t, f.applyPolicy(ctx, 1, queue, &elementFailure{code: CodeSerialization, elem: "fine", err: errors.New("bad body")}))
	require.NoError(t, f.applyPolicy(ctx, 1, queue, &elementFailure{code: CodeSerialization, elem: 42, err: errors.New(strings.Repeat("e", 5000))}))
	require.Len(t, out, 2)

	assert.NotEmpty(t, out[0].Element)
	assert.Equal(t, "string", out[0].ElementType)
	assert.Equal(t, "bad body", out[0].Error)
	got, err := deadletter.DecodeElement[string](out[0])
	require.NoError(t, err)
	assert.Equal(t, "fine", got)

	assert.Empty(t, out[1].Element, "an int is no string")
	assert.Equal(t, CodeSerialization, out[1].Code)
	assert.LessOrEqual(t, len(out[1].Error), maxErrorText)
	assert.Contains(t, out[1].Error, "[truncated]")
	assert.Contains(t, out[1].Error, "the dead letter carries no element: deadletter: encoding an element of type string")
}
