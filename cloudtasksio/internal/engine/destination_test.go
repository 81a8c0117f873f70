package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// destinationObserver records created requests and the failures about their queues, and
// answers each of those with answer.
type destinationObserver struct {
	nopObserver[string]
	created  []string
	failures map[string]string // id -> code
	errs     map[string]error  // id -> the error handed over
	answer   error
}

func newDestinationObserver(answer error) *destinationObserver {
	return &destinationObserver{failures: map[string]string{}, errs: map[string]error{}, answer: answer}
}

func (o *destinationObserver) Created(_ context.Context, r *Request[string], _ bool) {
	o.created = append(o.created, r.Tag)
}

func (o *destinationObserver) DestinationFailed(_ context.Context, r *Request[string], code string, err error) error {
	o.failures[r.Tag] = code
	o.errs[r.Tag] = err
	return o.answer
}

func TestFailuresAboutAQueueGoToTheDestinationObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notFound := status.Error(codes.NotFound, "queue missing")
		f := scripted(map[string][]error{
			"missing":   {notFound, notFound, notFound},
			"forbidden": {status.Error(codes.PermissionDenied, "not allowed")},
			"disabled":  {status.Error(codes.FailedPrecondition, "queue disabled")},
		})
		obs := newDestinationObserver(nil)
		e := New[string](f, baseOptions(), obs)
		ctx := context.Background()
		for _, id := range []string{"missing", "forbidden", "disabled", "fine"} {
			require.NoError(t, e.Submit(ctx, newRequest(id)))
		}
		require.NoError(t, e.Flush(ctx), "the observer dealt with every failure: the engine keeps running")

		assert.Equal(t, []string{"fine"}, obs.created)
		assert.Equal(t, map[string]string{"missing": "NOT_FOUND", "forbidden": "PERMISSION_DENIED", "disabled": "FAILED_PRECONDITION"}, obs.failures)
		assert.Equal(t, 3, f.count("missing"), "NOT_FOUND is handed over once its budget is spent")
		assert.Equal(t, 1, f.count("forbidden"), "PERMISSION_DENIED is not retried")
		assert.Equal(t, codes.PermissionDenied, status.Code(obs.errs["forbidden"]), "the error wraps the RPC error")
		assert.Contains(t, obs.errs["missing"].Error(), "NOT_FOUND retry budget of 3 attempts exhausted")
		assert.NotContains(t, obs.errs["missing"].Error(), "SECRET")
	})
}

func TestAFailureNotAboutOneQueueStaysTerminalWithADestinationObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"a": {status.Error(codes.Unauthenticated, "bad credentials")}})
		obs := newDestinationObserver(nil)
		e := New[string](f, baseOptions(), obs)
		ctx := context.Background()
		require.NoError(t, e.Submit(ctx, newRequest("a")))
		err := e.Flush(ctx)
		require.Error(t, err)
		assert.Equal(t, codes.Unauthenticated, status.Code(err))
		assert.Empty(t, obs.failures)
	})
}

func TestADestinationObserversErrorFailsTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"a": {status.Error(codes.PermissionDenied, "not allowed")}})
		stop := errors.New("the bundle fails")
		e := New[string](f, baseOptions(), newDestinationObserver(stop))
		ctx := context.Background()
		require.NoError(t, e.Submit(ctx, newRequest("a")))
		assert.Same(t, stop, e.Flush(ctx))
	})
}
