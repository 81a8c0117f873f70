package cloudtasksio

import (
	"fmt"
	"time"
)

// DefaultWriterOptions returns the writer defaults that the zero value of each WriterOptions
// field stands for: 1000 tasks in flight, the client's single connection, a transient budget
// of 8 attempts backing off from 100ms to at most 10s, a NOT_FOUND budget of 3 attempts
// backing off from 500ms to at most 2s, and no per-queue metrics.
func DefaultWriterOptions() WriterOptions {
	return WriterOptions{
		MaxInFlightTasks:               1000,
		RecoveryInitialBackoff:         100 * time.Millisecond,
		RecoveryMaxBackoff:             10 * time.Second,
		RecoveryMaxAttempts:            8,
		NotFoundRecoveryInitialBackoff: 500 * time.Millisecond,
		NotFoundRecoveryMaxBackoff:     2 * time.Second,
		NotFoundRecoveryMaxAttempts:    3,
	}
}

// resolve fills zero fields with defaults and rejects negative or inconsistent values.
func (o WriterOptions) resolve() (WriterOptions, error) {
	d := DefaultWriterOptions()
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxInFlightTasks", &o.MaxInFlightTasks, d.MaxInFlightTasks},
		{"ChannelPoolSize", &o.ChannelPoolSize, 0},
		{"RecoveryMaxAttempts", &o.RecoveryMaxAttempts, d.RecoveryMaxAttempts},
		{"NotFoundRecoveryMaxAttempts", &o.NotFoundRecoveryMaxAttempts, d.NotFoundRecoveryMaxAttempts},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return o, fmt.Errorf("cloudtasksio: WriterOptions.%s is %d; it must be positive (0 means the default %d)", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"RecoveryInitialBackoff", &o.RecoveryInitialBackoff, d.RecoveryInitialBackoff},
		{"RecoveryMaxBackoff", &o.RecoveryMaxBackoff, d.RecoveryMaxBackoff},
		{"NotFoundRecoveryInitialBackoff", &o.NotFoundRecoveryInitialBackoff, d.NotFoundRecoveryInitialBackoff},
		{"NotFoundRecoveryMaxBackoff", &o.NotFoundRecoveryMaxBackoff, d.NotFoundRecoveryMaxBackoff},
	}
	for _, f := range durations {
		if *f.v < 0 {
			return o, fmt.Errorf("cloudtasksio: WriterOptions.%s is %v; it must be positive (0 means the default %v)", f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.RecoveryMaxBackoff < o.RecoveryInitialBackoff {
		return o, &backoffError{budget: "Recovery", initial: o.RecoveryInitialBackoff, max: o.RecoveryMaxBackoff}
	}
	if o.NotFoundRecoveryMaxBackoff < o.NotFoundRecoveryInitialBackoff {
		return o, &backoffError{budget: "NotFoundRecovery", initial: o.NotFoundRecoveryInitialBackoff, max: o.NotFoundRecoveryMaxBackoff}
	}
	return o, nil
}

// backoffError reports a retry budget whose maximum backoff is below its initial one. budget
// is the field prefix: "Recovery" or "NotFoundRecovery".
type backoffError struct {
	budget       string
	initial, max time.Duration
}

func (e *backoffError) Error() string {
	return fmt.Sprintf("cloudtasksio: WriterOptions.%sMaxBackoff %v is below the initial backoff %sInitialBackoff %v",
		e.budget, e.max, e.budget, e.initial)
}
