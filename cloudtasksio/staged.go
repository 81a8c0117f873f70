package cloudtasksio

import (
	"fmt"
	"math"
	"time"
)

// StagedOptions tune exactly-once creation. They are checked at construction and again on
// each worker; a value out of range is an error naming the field.
type StagedOptions struct {
	// NameRetention is how long the queue is assumed to remember a task name (H). Default 1h;
	// positive, at most 31 days.
	NameRetention time.Duration
	// ClockSkewAllowance is the clock error allowed between workers (E). Default 5m; from 0
	// to 24h.
	ClockSkewAllowance time.Duration
	// RequestTimeout bounds each create call (S). Default 20s; positive, at most 30m.
	RequestTimeout time.Duration
	// VerifyQueueRetention reads the queue's tombstone_ttl before the first create and fails
	// when it is shorter than NameRetention. Default true.
	VerifyQueueRetention bool
	// ExpiredEnvelopePolicy decides what happens to a staged task past its deadline.
	ExpiredEnvelopePolicy ExpiredEnvelopePolicy
}

// DefaultStagedOptions returns the exactly-once defaults: 1h retention, 5m clock skew, 20s
// request timeout, retention verified, expired envelopes fail the bundle.
func DefaultStagedOptions() StagedOptions {
	return StagedOptions{
		NameRetention:         time.Hour,
		ClockSkewAllowance:    5 * time.Minute,
		RequestTimeout:        20 * time.Second,
		VerifyQueueRetention:  true,
		ExpiredEnvelopePolicy: ExpiredFail,
	}
}

// staged checks the delivery guarantee and the staged options, and returns the staged options
// exactly-once creation uses (the defaults when Staged is nil).
func (c Config) staged() (StagedOptions, error) {
	switch c.Delivery {
	case AtLeastOnce:
		if c.Staged != nil {
			return StagedOptions{}, errFields([]string{"Staged", "Delivery"}, func(n namer) string {
				return n("Staged") + " is set but " + n("Delivery") + " is not ExactlyOnce: staged options apply to exactly-once delivery only"
			})
		}
		return StagedOptions{}, nil
	case ExactlyOnce:
	default:
		return StagedOptions{}, errField("Delivery", "%v is not AtLeastOnce or ExactlyOnce", c.Delivery)
	}
	if c.QueueFn != nil {
		return StagedOptions{}, errFields([]string{"Delivery", "QueueFn"}, func(n namer) string {
			return n("Delivery") + " ExactlyOnce requires a fixed " + n("Queue") + ", not " + n("QueueFn")
		})
	}
	if c.OnFailure != FailBundle {
		return StagedOptions{}, errFields([]string{"Delivery", "OnFailure"}, func(n namer) string {
			return n("Delivery") + " ExactlyOnce requires " + n("OnFailure") + " FailBundle"
		})
	}
	staged := DefaultStagedOptions()
	if c.Staged != nil {
		staged = *c.Staged
	}
	if err := staged.validate(); err != nil {
		return StagedOptions{}, err
	}
	return staged, nil
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

// validate checks the staged options: each duration within its bounds (retention and timeout
// positive, skew not negative), a known policy, and a creation window H - E - S of at least
// one millisecond. Errors are field errors naming Staged.<field>.
func (o StagedOptions) validate() error {
	for _, d := range []struct {
		field     string
		v, max    time.Duration
		allowZero bool
	}{
		{"Staged.NameRetention", o.NameRetention, maxNameRetention, false},
		{"Staged.ClockSkewAllowance", o.ClockSkewAllowance, maxClockSkew, true},
		{"Staged.RequestTimeout", o.RequestTimeout, maxRequestTimeout, false},
	} {
		switch {
		case d.v < 0 && d.allowZero:
			return errField(d.field, "%v must not be negative", d.v)
		case d.v <= 0 && !d.allowZero:
			return errField(d.field, "%v must be positive", d.v)
		case d.v > d.max:
			return errField(d.field, "%v must be at most %v", d.v, d.max)
		}
	}
	if o.ExpiredEnvelopePolicy < ExpiredFail || o.ExpiredEnvelopePolicy > ExpiredDrop {
		return errField("Staged.ExpiredEnvelopePolicy", "%v is not a known policy", o.ExpiredEnvelopePolicy)
	}
	if o.creationWindow() < time.Millisecond {
		// The window is the three durations together: the option form blames the first one given.
		h, e, s := "Staged.NameRetention", "Staged.ClockSkewAllowance", "Staged.RequestTimeout"
		return errFields([]string{h, e, s}, func(n namer) string {
			return fmt.Sprintf("%s %v - %s %v - %s %v leaves less than 1ms to create a task",
				n(h), o.NameRetention, n(e), o.ClockSkewAllowance, n(s), o.RequestTimeout)
		})
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
