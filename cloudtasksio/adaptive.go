package cloudtasksio

import (
	"context"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
)

// AdaptiveConcurrency selects whether the writer adapts how many creates it keeps in flight
// to a queue to the answers of Cloud Tasks (WriterOptions.AdaptiveConcurrency).
//
// With it on, each worker process keeps one state per queue (and client setting), shared by every
// bundle and DoFn instance of the process writing to that queue, so that the process acts as one
// client of the queue's create quota however many instances it runs. A queue starts in slow start
// (unless WriterOptions.AdaptiveStartRate is set, below): one create in flight, plus what 100
// creates a second keep in flight over the round trip, a limit that doubles every round trip while creates succeed (and
// the limit is in use), spread over the round trip up to MaxInFlightTasks and growing on past it
// while the process's instances together use it; a pipeline that is never throttled reaches
// MaxInFlightTasks within a few dozen round trips of its first create to the queue (about a second
// at 20 ms) and keeps it for the life of the process. The first RESOURCE_EXHAUSTED answer (the
// queue takes creates faster than its quota allows) ends slow start for that queue: from then on
// the process starts the queue's creates at a rate, spaced evenly, beginning a little below the
// rate the queue had just accepted; each later rejection lowers the rate by a tenth, or to the
// rate the queue accepted when that is lower, at most once per round trip however many creates of
// that round are rejected, and the rate grows by 5% per second of the rate the first rejection set
// while it is what holds creates back and they succeed, faster the longer no rejection comes. docs/configuration.md has
// the figures. A rejected create still retries on the transient budget; when the rejection carries
// a google.rpc.RetryInfo delay, that request waits at least that long before its next attempt and
// the queue's other creates from the process wait too. WriterOptions.AdaptiveStartRate skips
// slow start: a process that knows its share of a queue's quota starts the queue paced at it,
// and the answers drive the rate from there as after a first rejection (it is where the rate
// starts, not a cap). Beyond that the sink
// adds no rate setting: the service's answers drive the limit and the rate (docs/tuning.md,
// "Many workers and the start-up").
//
// With it off, every request retries on its own schedule: a queue held over its quota keeps
// rejecting retries, requests run out of RecoveryMaxAttempts and bundles fail
// (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/performance.md has the measurement).
type AdaptiveConcurrency int

const (
	// AdaptiveConcurrencyDefault is the sink's default, AdaptiveConcurrencyOn.
	AdaptiveConcurrencyDefault AdaptiveConcurrency = iota
	// AdaptiveConcurrencyOn adapts the creates in flight to each queue, as described on
	// AdaptiveConcurrency.
	AdaptiveConcurrencyOn
	// AdaptiveConcurrencyOff keeps up to MaxInFlightTasks creates in flight per DoFn instance
	// whatever Cloud Tasks answers, and ignores RetryInfo delays.
	AdaptiveConcurrencyOff
)

// String returns the constant's name ("AdaptiveConcurrencyOn", ...), or
// "AdaptiveConcurrency(<n>)" for a value that is none of them.
func (a AdaptiveConcurrency) String() string {
	return enumName("AdaptiveConcurrency", int(a), "AdaptiveConcurrencyDefault", "AdaptiveConcurrencyOn", "AdaptiveConcurrencyOff")
}

// validate rejects a value that is not one of the constants, as a field error of
// WriterOptions (the caller adds the package prefix).
func (a AdaptiveConcurrency) validate() error {
	if a < AdaptiveConcurrencyDefault || a > AdaptiveConcurrencyOff {
		return errField("Writer.AdaptiveConcurrency", "is %d; it must be AdaptiveConcurrencyDefault, AdaptiveConcurrencyOn or AdaptiveConcurrencyOff", int(a))
	}
	return nil
}

// on reports whether adaptive concurrency runs: AdaptiveConcurrencyDefault means on.
func (a AdaptiveConcurrency) on() bool { return a != AdaptiveConcurrencyOff }

// adaptiveFor returns the process-wide adaptive concurrency state that a create DoFn of spec
// shares with every other one using the same client setting, or nil when it is off.
func adaptiveFor(spec *sinkSpec) *engine.Adaptive {
	return adaptiveState(spec.Writer, spec.client, false)
}

// adaptiveState returns the process-wide adaptive concurrency state of the creates (deletes
// false) or the deletes that go through client, or nil when w turns it off. Deletes keep
// states of their own: a DeleteTask is not a create, and a queue's create quota does not
// limit it.
func adaptiveState(w WriterOptions, client clientSpec, deletes bool) *engine.Adaptive {
	if !w.AdaptiveConcurrency.on() {
		return nil
	}
	// The creation cannot fail or wait: no context to honour.
	a, _ := adaptives.Get(context.Background(), adaptiveKey{client: client, deletes: deletes}, func() (*engine.Adaptive, error) { return newAdaptive(), nil })
	return a
}

// adaptiveKey selects a process-wide adaptive concurrency state: one per client setting for
// creates, and one per client setting for deletes.
type adaptiveKey struct {
	client  clientSpec
	deletes bool
}
