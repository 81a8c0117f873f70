package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// grpcTooLarge is what grpc-go's server answers, before any handler runs, to a request over
// its receive limit (4 MiB by default): the same code as a quota rejection.
func grpcTooLarge() error {
	return status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5242973 vs. 4194304)")
}

func TestClassifyTellsASizeRefusalFromAQuotaRejection(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		class Class
	}{
		{"grpc-go server", grpcTooLarge(), TooLarge},
		{"grpc-go after decompression", status.Error(codes.ResourceExhausted, "grpc: received message after decompression larger than max (9000000 vs. 4194304)"), TooLarge},
		{"grpc-go client send", status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (5242973 vs. 4194304)"), TooLarge},
		{"gRPC C++", status.Error(codes.ResourceExhausted, "Sent message larger than max (5242973 vs. 4194304)"), TooLarge},
		{"grpc-java", status.Error(codes.ResourceExhausted, "gRPC message exceeds maximum size 4194304: 5242973"), TooLarge},
		{"wrapped by gax", apiErrWith(t, grpcTooLarge()), TooLarge},
		{"under a transient status", &layered{codes.Unavailable, grpcTooLarge()}, TooLarge},
		{"beside a quota rejection", joinErrs(status.Error(codes.ResourceExhausted, "Quota exceeded"), grpcTooLarge()), TooLarge},
		{"quota rejection", status.Error(codes.ResourceExhausted, "Quota exceeded for quota metric 'Task creates' of service cloudtasks.googleapis.com"), Transient},
		{"size words under another code", status.Error(codes.InvalidArgument, "Task size larger than max"), Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.class, Classify(c.err, false))
			throttled, _ := throttle(c.err)
			assert.Equal(t, c.name == "quota rejection" || c.name == "beside a quota rejection", throttled,
				"only a quota rejection tells the adaptive limit that the queue is throttled")
		})
	}
}

func TestAMessageTooLargeGoesToTheFailurePolicyOnceAndLeavesTheAdaptiveLimitAlone(t *testing.T) {
	for _, c := range []struct {
		name      string
		answer    error
		throttled bool
	}{
		{"size refusal", grpcTooLarge(), false},
		// The control: the same code as a quota rejection is retried and lowers the rate of
		// the paced queue.
		{"quota rejection", status.Error(codes.ResourceExhausted, "Quota exceeded"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive()
				o := baseOptions()
				o.Adaptive = a
				// Paced from the first create: one quota rejection lowers the rate (in slow
				// start one alone is taken for noise, and nothing would show it was counted).
				o.StartRate = 1000
				f := scripted(map[string][]error{"big": {c.answer}})
				h := newHarness(t, f, o)
				for _, id := range []string{"small-1", "big", "small-2"} {
					require.NoError(t, h.submitID(id))
				}
				require.NoError(t, h.flush(), "one element's failure is not the batch's")
				l := a.Queue(testQueue)
				if c.throttled {
					assert.Equal(t, 2, f.count("big"), "a quota rejection is retried")
					assert.Equal(t, 1, l.Decreases, "and tells the adaptive limit, which lowers the rate")
					assert.NotContains(t, h.rejected, "big")
					return
				}
				assert.Equal(t, 1, f.count("big"), "sent once: a size refusal is never retried")
				assert.GreaterOrEqual(t, l.Rate, 1000.0, "the adaptive limit is not told: the rate did not come down")
				assert.Zero(t, l.Decreases, "nor lowered")
				assert.True(t, l.PausedUntil.IsZero(), "nor the queue paused")
				require.Contains(t, h.rejected, "big", "the failure policy decides")
				err := h.rejected["big"]
				assert.ErrorIs(t, err, ErrTaskTooLarge)
				assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the RPC error is still wrapped")
				assert.Contains(t, err.Error(), "refused for its size")
				assert.NotContains(t, err.Error(), "SECRET", "no body or header in the error")
				assert.ElementsMatch(t, []string{"small-1", "small-2"}, h.created)
				assert.Equal(t, []string{"big:RESOURCE_EXHAUSTED"}, h.failed, "the attempt is counted by its status")
			})
		})
	}
}

// rejections is an Observer that keeps the rejected requests' errors.
type rejections map[string]error

func (rejections) Created(context.Context, *Request[string], bool)         {}
func (rejections) AttemptFailed(context.Context, *Request[string], string) {}
func (r rejections) Rejected(_ context.Context, req *Request[string], err error) error {
	r[req.Tag] = err
	return nil
}

// TestAnOversizedRequestRefusedByARealTransportIsTooLarge sends a 5 MiB request to
// cloudtaskstest through the Cloud Tasks client: grpc-go refuses it before the server reads
// it, and the engine hands it to the failure policy after one attempt.
func TestAnOversizedRequestRefusedByARealTransportIsTooLarge(t *testing.T) {
	srv := cloudtaskstest.NewServer(cloudtaskstest.WithoutDispatch())
	t.Cleanup(func() { srv.Close() })
	_, err := srv.CreateQueue(testQueue)
	require.NoError(t, err)
	ctx := context.Background()
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	a := NewAdaptive()
	o := baseOptions()
	o.Adaptive = a
	got := rejections{}
	e := New[string](CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
		return client.CreateTask(ctx, req)
	}), o, got)
	big := newRequest("big")
	big.Create.Task.GetHttpRequest().Body = []byte(strings.Repeat("x", 5<<20))
	require.NoError(t, e.Submit(ctx, big))
	require.NoError(t, e.Flush(ctx))

	require.Contains(t, got, "big")
	assert.ErrorIs(t, got["big"], ErrTaskTooLarge)
	assert.Contains(t, got["big"].Error(), "larger than max", "the transport's own words, cut short")
	assert.Less(t, len(got["big"].Error()), 1024)
	assert.Equal(t, 1, big.Attempts())
	assert.Zero(t, a.Queue(testQueue).Decreases)
	assert.Empty(t, srv.Tasks(testQueue))
}

// apiErrWith wraps a status error the way gax hands it to the client's caller.
func apiErrWith(t *testing.T, err error) error {
	t.Helper()
	ae, ok := apierror.FromError(err)
	require.True(t, ok)
	return ae
}

func joinErrs(errs ...error) error { return errors.Join(errs...) }
