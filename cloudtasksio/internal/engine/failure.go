package engine

import (
	"context"
	"errors"
	"fmt"
)

// This file holds how the engine fails and the errors it builds: failRequest
// and fail capture the first terminal error and stop sending, createError is
// a bounded message that still wraps the RPC error, and errorText reads an
// error's text safely.

// failRequest makes r's failure the engine's terminal error, telling the
// FailureObserver, unless the engine has already failed.
func (e *Engine[T]) failRequest(ctx context.Context, r *Request[T], err error) {
	if e.err != nil {
		return
	}
	e.fail(err)
	if e.failure != nil {
		e.failure.Failed(ctx, r, err)
	}
}

// fail keeps err if it is the first terminal error, abandons the parked
// requests and cancels the attempts in flight.
func (e *Engine[T]) fail(err error) {
	if e.err != nil {
		return
	}
	e.err = err
	e.parked, e.quotaParked = nil, 0
	e.adaptive.dropHeld()
	e.noteThrottled()
	e.cancel()
}

// ErrTaskTooLarge marks the error Observer.Rejected receives for a request
// refused for its size (TooLarge): errors.Is(err, ErrTaskTooLarge).
var ErrTaskTooLarge = errors.New("task too large")

// createError is a bounded, payload-free message that still wraps the RPC
// error, so errors.Is and status.Code see through it. kind, when set, is a
// sentinel errors.Is also matches.
type createError struct {
	msg   string
	cause error
	kind  error
}

func (e *createError) Error() string { return e.msg }
func (e *createError) Unwrap() error { return e.cause }

// Is reports whether target is the error's kind.
func (e *createError) Is(target error) bool { return e.kind != nil && target == e.kind }

// maxMessage bounds the status message quoted in engine errors.
const maxMessage = 200

// errorText is err.Error(), or a fixed text when that method panics (a typed
// nil, for example).
func errorText(err error) (text string) {
	defer func() {
		if recover() != nil {
			text = "an error whose text cannot be read"
		}
	}()
	if isNilValue(err) {
		return fmt.Sprintf("a nil %T", err)
	}
	return err.Error()
}
