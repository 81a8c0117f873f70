package cloudtasksio

import (
	"fmt"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
)

// WriterOptions tune how fast and how persistently one worker creates tasks. The zero value
// of every field means its default. They do not pace delivery: the queue does that.
type WriterOptions struct {
	// MaxInFlightTasks caps the creates one DoFn instance has outstanding, counting those in
	// flight and those parked for a retry. Default 1000.
	MaxInFlightTasks int
	// ChannelPoolSize is the number of gRPC connections of the shared client. Each carries
	// about 100 concurrent creates. Default 0: the client's single connection. Not allowed
	// with an emulator.
	ChannelPoolSize int
	// RecoveryInitialBackoff is the first wait after UNAVAILABLE, DEADLINE_EXCEEDED or
	// RESOURCE_EXHAUSTED. Default 100ms.
	RecoveryInitialBackoff time.Duration
	// RecoveryMaxBackoff caps that wait as it doubles. Default 10s.
	RecoveryMaxBackoff time.Duration
	// RecoveryMaxAttempts is the number of attempts, the first included, before a transient
	// failure fails the bundle. Default 8.
	RecoveryMaxAttempts int
	// NotFoundRecoveryInitialBackoff is the first wait after NOT_FOUND. Default 500ms.
	NotFoundRecoveryInitialBackoff time.Duration
	// NotFoundRecoveryMaxBackoff caps the NOT_FOUND wait. Default 2s.
	NotFoundRecoveryMaxBackoff time.Duration
	// NotFoundRecoveryMaxAttempts is the number of NOT_FOUND attempts, the first included,
	// before the bundle fails. Kept short so a mistyped queue fails fast. Default 3.
	NotFoundRecoveryMaxAttempts int
	// AttemptTimeout bounds each create attempt in at-least-once mode: an attempt unanswered
	// after it is cancelled, counted as DEADLINE_EXCEEDED and retried on the transient budget
	// (RecoveryMaxAttempts), so a hung endpoint holds a slot of MaxInFlightTasks no longer.
	// Default 0: the Cloud Tasks client's own timeout, 20s. Otherwise positive, at most 30m.
	// Exactly-once mode bounds its attempts by StagedOptions.RequestTimeout and refuses it.
	AttemptTimeout time.Duration
	// PerDestinationMetrics adds recordsSend and sendErrors counters per queue. Default false.
	PerDestinationMetrics bool
	// QueuePreflight decides what a worker does when, reading a queue once as it first writes
	// there, it finds the queue PAUSED or DISABLED or with an override that replaces what the
	// sink sets: PreflightWarn (the default) logs and counts it by the end of the bundle, the
	// creates not waiting for the read; PreflightFail reads before the queue's first create
	// and fails the bundle; PreflightOff does not read the queue.
	QueuePreflight QueuePreflight
	// QueueHealthInterval, when set, has each worker process read every queue it writes to
	// again once this much time has passed since the queue's last read, the preflight's
	// included: at most one read per queue and interval per process, shared by every DoFn
	// instance. A bundle writing to the queue starts the read and never waits for it, so a
	// queue nothing writes to is not read. What a read finds acts as the preflight's findings
	// do in QueuePreflight's mode (a queue paused since: one WARN line under PreflightWarn;
	// under PreflightFail the bundles writing to it fail until a later read finds it fixed;
	// nothing under PreflightOff) and sets the gauges MetricQueueState, MetricQueueTasks and
	// MetricQueueOldestTaskAgeSeconds when a bundle ends. The backlog gauges need the v2beta3
	// API's Queue.stats; every read needs cloudtasks.queues.get. Default 0: off. Otherwise 10s
	// to 24h.
	QueueHealthInterval time.Duration
	// AdaptiveConcurrency lowers the creates in flight to a queue when Cloud Tasks answers
	// RESOURCE_EXHAUSTED and raises them again as creates succeed, per worker process and
	// queue, honouring RetryInfo delays (see AdaptiveConcurrency). Default on.
	AdaptiveConcurrency AdaptiveConcurrency
	// AdaptiveStartRate, in creates per second, is the rate at which each worker process
	// starts creating tasks in a queue it has not written to yet, when adaptive concurrency is
	// on: the process's share of the queue's create quota, such as the quota divided by the
	// worker processes that write to the queue at once. From there the rate follows Cloud
	// Tasks' answers, as it does after a first RESOURCE_EXHAUSTED (see AdaptiveConcurrency).
	// A rate above the share costs rejected attempts until the answers bring it down; one
	// below it costs a few seconds of throughput until it grows past. Default 0: slow start,
	// which learns the quota from the queue's answers and spends its first round trips doing
	// so (docs/tuning.md, "Many workers and the start-up"). It is where the rate starts, not a
	// cap: while creates succeed the rate grows past it. Otherwise 0.5 (the lowest rate the
	// writer paces at) to 1,000,000; not allowed with AdaptiveConcurrencyOff.
	AdaptiveStartRate float64
}

// DefaultWriterOptions returns the writer defaults that the zero value of each WriterOptions
// field stands for: 1000 tasks in flight, the client's single connection, a transient budget
// of 8 attempts backing off from 100ms to at most 10s, a NOT_FOUND budget of 3 attempts
// backing off from 500ms to at most 2s, the client's own 20s per create attempt, no per-queue
// metrics, the queue preflight in PreflightWarn mode, no queue health re-read, and adaptive
// concurrency on.
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
	// maxAdaptiveStartRate is far above any queue's create quota.
	maxAdaptiveStartRate = 1_000_000
)

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
			return o, errField("Writer."+f.name, "is %d; it must lie in 1..%d (0 means the default %d)", *f.v, f.max, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	// maxRecoveryBackoff bounds every recovery backoff: a typo such as 2562047h would park a
	// retry, and its bundle, for centuries.
	const maxRecoveryBackoff = 30 * 24 * time.Hour
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
			return o, errField("Writer."+f.name, "is %v; it must be positive (0 means the default %v)", *f.v, f.def)
		}
		if *f.v > maxRecoveryBackoff {
			return o, errField("Writer."+f.name, "is %v; it must be at most %v (a retry parked longer holds its bundle open as long)", *f.v, maxRecoveryBackoff)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.AttemptTimeout < 0 || o.AttemptTimeout > maxRequestTimeout {
		return o, errField("Writer.AttemptTimeout", "is %v; it must lie in 0..%v (0 means the client's own 20s)", o.AttemptTimeout, maxRequestTimeout)
	}
	if o.QueuePreflight < PreflightWarn || o.QueuePreflight > PreflightOff {
		return o, errField("Writer.QueuePreflight", "%v is not PreflightWarn, PreflightFail or PreflightOff", o.QueuePreflight)
	}
	if d := o.QueueHealthInterval; d != 0 && (d < minQueueHealthInterval || d > maxQueueHealthInterval) {
		return o, errField("Writer.QueueHealthInterval", "is %v; it must be 0 (off) or from 10s to 24h", d)
	}
	for _, budget := range []struct {
		name         string
		initial, max time.Duration
	}{
		{"Recovery", o.RecoveryInitialBackoff, o.RecoveryMaxBackoff},
		{"NotFoundRecovery", o.NotFoundRecoveryInitialBackoff, o.NotFoundRecoveryMaxBackoff},
	} {
		if budget.max < budget.initial {
			// Both fields make the rule; the option form blames the max when it was given.
			maxField, initialField := "Writer."+budget.name+"MaxBackoff", "Writer."+budget.name+"InitialBackoff"
			return o, errFields([]string{maxField, initialField}, func(n namer) string {
				return fmt.Sprintf("%s %v is below initial backoff %s %v; raise the max or lower the initial backoff",
					n(maxField), budget.max, n(initialField), budget.initial)
			})
		}
	}
	if err := o.AdaptiveConcurrency.validate(); err != nil {
		return o, err
	}
	if r := o.AdaptiveStartRate; r != 0 && !(r >= engine.MinStartRate && r <= maxAdaptiveStartRate) {
		return o, errField("Writer.AdaptiveStartRate", "is %v; it must be 0 (slow start) or lie in %v..%d creates per second", r, engine.MinStartRate, maxAdaptiveStartRate)
	}
	if o.AdaptiveStartRate > 0 && !o.AdaptiveConcurrency.on() {
		startField, adaptiveField := "Writer.AdaptiveStartRate", "Writer.AdaptiveConcurrency"
		return o, errFields([]string{startField, adaptiveField}, func(n namer) string {
			return fmt.Sprintf("%s %v is set with %s off; the start rate is where adaptive concurrency starts a queue: turn adaptive concurrency on or leave the start rate unset",
				n(startField), o.AdaptiveStartRate, n(adaptiveField))
		})
	}
	return o, nil
}
