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

// Upper limits of the integer WriterOptions. They are far above any useful value and exist so
// that a typo fails at construction instead of exhausting a worker: every DoFn instance
// allocates for MaxInFlightTasks, and every connection of the pool stays open.
const (
	maxInFlightTasks   = 100_000
	maxChannelPoolSize = 64
	maxAttempts        = 1_000
)

// rangeError reports a WriterOptions field whose value is out of range.
type rangeError struct{ field, msg string }

func (e *rangeError) Error() string { return "cloudtasksio: WriterOptions." + e.field + " " + e.msg }

// resolve fills zero fields with defaults and rejects negative or inconsistent values.
func (o WriterOptions) resolve() (WriterOptions, error) {
	d := DefaultWriterOptions()
	ints := []struct {
		name     string
		v        *int
		def, max int
	}{
		{"MaxInFlightTasks", &o.MaxInFlightTasks, d.MaxInFlightTasks, maxInFlightTasks},
		{"ChannelPoolSize", &o.ChannelPoolSize, 0, maxChannelPoolSize},
		{"RecoveryMaxAttempts", &o.RecoveryMaxAttempts, d.RecoveryMaxAttempts, maxAttempts},
		{"NotFoundRecoveryMaxAttempts", &o.NotFoundRecoveryMaxAttempts, d.NotFoundRecoveryMaxAttempts, maxAttempts},
	}
	for _, f := range ints {
		if *f.v < 0 || *f.v > f.max {
			return o, &rangeError{field: f.name, msg: fmt.Sprintf("is %d; it must lie in 1..%d (0 means the default %d)", *f.v, f.max, f.def)}
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
