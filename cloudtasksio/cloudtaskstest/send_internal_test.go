package cloudtaskstest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
)

func TestAnAttemptsOutcomeBecomesTheServicesResponseStatus(t *testing.T) {
	for _, c := range []struct {
		r    result
		want codes.Code
	}{
		{result{timedOut: true}, codes.DeadlineExceeded},
		{result{err: errors.New("connection refused")}, codes.Unavailable},
		{result{code: 200}, codes.OK},
		{result{code: 204}, codes.OK},
		{result{code: 400}, codes.InvalidArgument},
		{result{code: 401}, codes.Unauthenticated},
		{result{code: 403}, codes.PermissionDenied},
		{result{code: 404}, codes.NotFound},
		{result{code: 409}, codes.Aborted},
		{result{code: 429}, codes.ResourceExhausted},
		{result{code: 500}, codes.Internal},
		{result{code: 501}, codes.Unimplemented},
		{result{code: 502}, codes.Internal},
		{result{code: 503}, codes.Unavailable},
		{result{code: 504}, codes.DeadlineExceeded},
		{result{code: 302}, codes.FailedPrecondition},
		{result{code: 418}, codes.FailedPrecondition},
	} {
		assert.Equal(t, int32(c.want), c.r.rpcStatus().GetCode(), "%+v", c.r)
	}
}
