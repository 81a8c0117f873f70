package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// layered is an error that carries its own status and wraps another error,
// the shape a status nested under another status takes.
type layered struct {
	code  codes.Code
	inner error
}

func (l *layered) Error() string              { return l.code.String() + ": " + l.inner.Error() }
func (l *layered) GRPCStatus() *status.Status { return status.New(l.code, "outer "+l.code.String()) }
func (l *layered) Unwrap() error              { return l.inner }

func apiErr(t *testing.T, c codes.Code) error {
	t.Helper()
	ae, ok := apierror.FromError(status.Error(c, "from gax"))
	require.True(t, ok)
	return ae
}

func TestClassifyFollowsThePrecedenceOverTheWholeChain(t *testing.T) {
	st := func(c codes.Code) error { return status.Error(c, "msg") }
	httpErr, ok := apierror.FromError(&googleapi.Error{Code: 503, Message: "backend unavailable"})
	require.True(t, ok)

	cases := []struct {
		name      string
		err       error
		named     bool
		class     Class
		outermost string
	}{
		{"unavailable", st(codes.Unavailable), false, Transient, "UNAVAILABLE"},
		{"deadline exceeded status", st(codes.DeadlineExceeded), false, Transient, "DEADLINE_EXCEEDED"},
		{"resource exhausted", st(codes.ResourceExhausted), false, Transient, "RESOURCE_EXHAUSTED"},
		{"bare context deadline", context.DeadlineExceeded, false, Transient, "DEADLINE_EXCEEDED"},
		{"wrapped context deadline", fmt.Errorf("rpc: %w", context.DeadlineExceeded), false, Transient, "DEADLINE_EXCEEDED"},
		{"transient nested under INVALID_ARGUMENT", &layered{codes.InvalidArgument, st(codes.Unavailable)}, false, Transient, "INVALID_ARGUMENT"},
		{"transient in a joined error", errors.Join(st(codes.InvalidArgument), st(codes.ResourceExhausted)), false, Transient, "INVALID_ARGUMENT"},
		{"context deadline nested under PERMISSION_DENIED", &layered{codes.PermissionDenied, context.DeadlineExceeded}, false, Transient, "PERMISSION_DENIED"},
		{"not found", st(codes.NotFound), false, NotFound, "NOT_FOUND"},
		{"not found behind a plain error in a join", errors.Join(errors.New("no status"), st(codes.NotFound)), false, NotFound, "NOT_FOUND"},
		{"already exists named", st(codes.AlreadyExists), true, Deduplicated, "ALREADY_EXISTS"},
		{"already exists unnamed", st(codes.AlreadyExists), false, Terminal, "ALREADY_EXISTS"},
		{"invalid argument", st(codes.InvalidArgument), false, Invalid, "INVALID_ARGUMENT"},
		{"invalid argument nested under INTERNAL", &layered{codes.Internal, st(codes.InvalidArgument)}, false, Terminal, "INTERNAL"},
		{"invalid argument nested under UNKNOWN", &layered{codes.Unknown, st(codes.InvalidArgument)}, false, Terminal, "UNKNOWN"},
		{"not found nested under INVALID_ARGUMENT", &layered{codes.InvalidArgument, st(codes.NotFound)}, false, Invalid, "INVALID_ARGUMENT"},
		{"permission denied", st(codes.PermissionDenied), false, Terminal, "PERMISSION_DENIED"},
		{"failed precondition", st(codes.FailedPrecondition), false, Terminal, "FAILED_PRECONDITION"},
		{"internal", st(codes.Internal), false, Terminal, "INTERNAL"},
		{"unknown status", st(codes.Unknown), false, Terminal, "UNKNOWN"},
		{"no status", errors.New("connection reset"), false, Terminal, "UNKNOWN"},
		{"context canceled has no status", context.Canceled, false, Terminal, "UNKNOWN"},
		{"nil", nil, false, Terminal, "UNKNOWN"},
		{"apierror unavailable", apiErr(t, codes.Unavailable), false, Transient, "UNAVAILABLE"},
		{"wrapped apierror not found", fmt.Errorf("create: %w", apiErr(t, codes.NotFound)), false, NotFound, "NOT_FOUND"},
		{"wrapped apierror invalid argument", fmt.Errorf("create: %w", apiErr(t, codes.InvalidArgument)), false, Invalid, "INVALID_ARGUMENT"},
		{"wrapped apierror already exists named", fmt.Errorf("create: %w", apiErr(t, codes.AlreadyExists)), true, Deduplicated, "ALREADY_EXISTS"},
		{"apierror from HTTP 503", httpErr, false, Transient, "UNAVAILABLE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.class, Classify(tc.err, tc.named))
			assert.Equal(t, tc.outermost, OutermostCode(tc.err))
		})
	}
}

// cyclic wraps itself: a buggy custom error must not hang classification.
type cyclic struct{}

func (c *cyclic) Error() string { return "cyclic" }
func (c *cyclic) Unwrap() error { return c }

func TestClassifyTerminatesOnACyclicChain(t *testing.T) {
	assert.Equal(t, Terminal, Classify(&cyclic{}, false))
	assert.Equal(t, "UNKNOWN", OutermostCode(&cyclic{}))
}

func TestCodeNameIsCanonicalUpperSnake(t *testing.T) {
	want := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	for c, name := range want {
		assert.Equal(t, name, CodeName(c), "code %d", c)
	}
	assert.Equal(t, "CODE_42", CodeName(codes.Code(42)))
}

func TestClassString(t *testing.T) {
	assert.Equal(t, "Transient", Transient.String())
	assert.Equal(t, "NotFound", NotFound.String())
	assert.Equal(t, "Deduplicated", Deduplicated.String())
	assert.Equal(t, "Invalid", Invalid.String())
	assert.Equal(t, "Terminal", Terminal.String())
	assert.Equal(t, "Class(0)", Class(0).String())
}

// panicky is a custom error whose methods panic, as a buggy error type can.
type panicky struct{}

func (panicky) Error() string              { panic("Error") }
func (panicky) Unwrap() error              { panic("Unwrap") }
func (panicky) GRPCStatus() *status.Status { panic("GRPCStatus") }

// endless builds a new link on every Unwrap: a chain without end and without a repeated node
// (its slice field makes it incomparable).
type endless struct{ depth []int }

func (e endless) Error() string { return "endless" }
func (e endless) Unwrap() error { return endless{depth: append(e.depth, 0)} }

func TestClassifyIsTotalOnATypedNilStatusError(t *testing.T) {
	var typedNil *apierror.APIError
	for name, err := range map[string]error{
		"typed nil alone":                          typedNil,
		"wrapped typed nil":                        fmt.Errorf("create: %w", typedNil),
		"typed nil joined with invalid argument":   errors.Join(status.Error(codes.InvalidArgument, "bad"), typedNil),
		"typed nil under INVALID_ARGUMENT":         &layered{codes.InvalidArgument, typedNil},
		"panicking methods under INVALID_ARGUMENT": &layered{codes.InvalidArgument, panicky{}},
	} {
		t.Run(name, func(t *testing.T) {
			require.NotPanics(t, func() { Classify(err, true) })
			require.NotPanics(t, func() { OutermostCode(err) })
			assert.Equal(t, Terminal, Classify(err, true), "an unreadable chain fails the batch: never a dead letter, never a dedup")
		})
	}
}

func TestClassifyFindsATransientStatusAtAnyDepth(t *testing.T) {
	var err error = status.Error(codes.Unavailable, "deep outage")
	for i := range 1000 {
		err = fmt.Errorf("layer %d: %w", i, err)
	}
	outer := &layered{codes.InvalidArgument, err}
	assert.Equal(t, Transient, Classify(outer, false), "an outage never reaches a failure policy, however deep")
	assert.Equal(t, "INVALID_ARGUMENT", OutermostCode(outer))
}

func TestAnEndlessChainIsUnreadableNotADeadLetter(t *testing.T) {
	assert.Equal(t, Terminal, Classify(&layered{codes.InvalidArgument, endless{}}, false))
	assert.Equal(t, Transient, Classify(&layered{codes.Unavailable, endless{}}, false), "a transient status read before the cut still counts")
	assert.Equal(t, "INVALID_ARGUMENT", OutermostCode(&layered{codes.InvalidArgument, endless{}}))
}
