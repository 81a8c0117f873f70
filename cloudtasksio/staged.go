package cloudtasksio

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// compileDelivery checks the delivery guarantee and the staged options.
func compileDelivery(cfg Config, spec *sinkSpec) error {
	switch cfg.Delivery {
	case AtLeastOnce:
		if cfg.Staged != nil {
			return errors.New("cloudtasksio: Config.Staged is set but Config.Delivery is not ExactlyOnce")
		}
		return nil
	case ExactlyOnce:
	default:
		return fmt.Errorf("cloudtasksio: Config.Delivery %v is not AtLeastOnce or ExactlyOnce", cfg.Delivery)
	}
	if cfg.QueueFn != nil {
		return errors.New("cloudtasksio: Config.Delivery ExactlyOnce requires a fixed Config.Queue, not Config.QueueFn")
	}
	if cfg.OnFailure != FailBundle {
		return errors.New("cloudtasksio: Config.Delivery ExactlyOnce requires Config.OnFailure FailBundle")
	}
	staged := DefaultStagedOptions()
	if cfg.Staged != nil {
		staged = *cfg.Staged
	}
	if err := staged.validate(); err != nil {
		return err
	}
	spec.Staged = staged
	return nil
}

// Upper bounds of the staged durations. They are far above any sensible value, keep every sum
// and difference of the three far from overflowing, and turn a typo into an error.
const (
	// maxNameRetention is the longest a task lives in a queue: no queue keeps a name longer.
	maxNameRetention = 31 * 24 * time.Hour
	// maxClockSkew is a day: clocks further apart than that are broken, not skewed.
	maxClockSkew = 24 * time.Hour
	// maxRequestTimeout bounds one create call.
	maxRequestTimeout = 30 * time.Minute
)

// stagedError reports a StagedOptions field whose value is out of range. field is empty for
// a window that the three durations together leave too short.
type stagedError struct{ field, msg string }

func (e *stagedError) Error() string {
	if e.field == "" {
		return "cloudtasksio: StagedOptions: " + e.msg
	}
	return "cloudtasksio: StagedOptions." + e.field + " " + e.msg
}

// validate checks the staged options: each duration within its bounds (retention and timeout
// positive, skew not negative), a known policy, and a creation window H - E - S of at least
// one millisecond.
func (o StagedOptions) validate() error {
	for _, d := range []struct {
		field     string
		v, max    time.Duration
		allowZero bool
	}{
		{"NameRetention", o.NameRetention, maxNameRetention, false},
		{"ClockSkewAllowance", o.ClockSkewAllowance, maxClockSkew, true},
		{"RequestTimeout", o.RequestTimeout, maxRequestTimeout, false},
	} {
		switch {
		case d.v < 0 && d.allowZero:
			return &stagedError{d.field, fmt.Sprintf("%v must not be negative", d.v)}
		case d.v <= 0 && !d.allowZero:
			return &stagedError{d.field, fmt.Sprintf("%v must be positive", d.v)}
		case d.v > d.max:
			return &stagedError{d.field, fmt.Sprintf("%v must be at most %v", d.v, d.max)}
		}
	}
	if o.ExpiredEnvelopePolicy < ExpiredFail || o.ExpiredEnvelopePolicy > ExpiredDrop {
		return &stagedError{"ExpiredEnvelopePolicy", fmt.Sprintf("%v is not a known policy", o.ExpiredEnvelopePolicy)}
	}
	if o.creationWindow() < time.Millisecond {
		return &stagedError{"", fmt.Sprintf("NameRetention %v - ClockSkewAllowance %v - RequestTimeout %v leaves less than 1ms to create a task",
			o.NameRetention, o.ClockSkewAllowance, o.RequestTimeout)}
	}
	return nil
}

// creationWindow is H - E - S rounded down to whole milliseconds, or -1 when it is negative.
// It never overflows, whatever the values: each subtraction is checked before it is made.
func (o StagedOptions) creationWindow() time.Duration {
	h, e, s := o.NameRetention, o.ClockSkewAllowance, o.RequestTimeout
	if h < 0 || e < 0 || s < 0 || e > h || s > h-e {
		return -1
	}
	return (h - e - s).Truncate(time.Millisecond)
}

// latestEnvelopeTime is the latest instant Unix nanoseconds can hold (in the year 2262).
var latestEnvelopeTime = time.Unix(0, math.MaxInt64)

// envelopeDeadline is origin + window in Unix nanoseconds. A window reaching past what an int64
// can hold (a NameRetention of centuries) saturates instead of wrapping into the past, which
// would expire every envelope.
func envelopeDeadline(origin time.Time, window time.Duration) int64 {
	deadline := origin.Add(window)
	if deadline.After(latestEnvelopeTime) {
		return math.MaxInt64
	}
	return deadline.UnixNano()
}
