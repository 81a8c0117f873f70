package cloudtasksio

import (
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// AdaptiveConcurrency selects whether the writer adapts how many creates it keeps in flight
// to a queue to the answers of Cloud Tasks (WriterOptions.AdaptiveConcurrency).
//
// With it on, each worker process keeps one concurrency limit per queue (and client setting),
// shared by every bundle and DoFn instance of the process writing to that queue. The limit
// starts at MaxInFlightTasks, where it holds nothing back, so a pipeline that is never
// throttled runs exactly as with it off. When Cloud Tasks answers RESOURCE_EXHAUSTED (the
// queue takes creates faster than its quota allows), the limit drops to half of what was in
// flight, at most once per round trip however many creates of that round are rejected, and
// never below 1; every create that succeeds raises it again by 1/limit, about one more create
// in flight per round trip, back up to MaxInFlightTasks. A rejected create still retries on
// the transient budget; when the rejection carries a google.rpc.RetryInfo delay, that request
// waits at least that long before its next attempt and the queue's other creates from the
// process wait too. The sink adds no rate setting: the service's answers drive the limit.
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

// adaptives holds the adaptive concurrency state of each client setting for the life of the
// worker process, in the same kind of cache as the shared clients: the limits belong to what
// the creates go through, so engines writing through different clients (another endpoint,
// another identity) do not share them.
var adaptives gcpconn.Cache[clientSpec, *engine.Adaptive]

// adaptiveFor returns the process-wide adaptive concurrency state that a create DoFn of spec
// shares with every other one using the same client setting, or nil when it is off.
func adaptiveFor(spec *sinkSpec) *engine.Adaptive {
	if !spec.Writer.AdaptiveConcurrency.on() {
		return nil
	}
	a, _ := adaptives.Get(spec.Client, func() (*engine.Adaptive, error) { return engine.NewAdaptive(), nil })
	return a
}
