package cloudtasksio

import (
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	cloudtasksbeta "cloud.google.com/go/cloudtasks/apiv2beta3"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// This file holds every cache a worker process keeps between bundles, shared by all the DoFn
// instances of the process; https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/tuning.md
// ("What a worker process keeps") is the user's view. Each is a gcpconn.Cache: one creation
// (a client, a queue read) per key at a time, its result shared by every instance waiting for
// it, no lock held while it runs, and a failure remembered for gcpconn.FailureTTL (30s), during
// which the key's callers get the same error at once, then tried again (unless the failure is
// marked gcpconn.Transient: then the next caller tries again at once).
//
// Two kinds of key, two kinds of bound:
//
//   - a client setting (clientSpec): the pipeline fixes its settings at construction, so these
//     caches hold a handful of entries whatever the data. They have no bound and are kept for
//     the life of the process: a client is never closed, so no bundle finds its client closed
//     under it (portable runners never call Teardown).
//   - a queue: these grow with the queues a QueueFn writes to, so each is bounded by
//     queueStateIdleTTL (an entry unused that long is dropped) and maxQueueStates (beyond it
//     the least recently used entry is dropped). A dropped entry is rebuilt on the queue's
//     next task: the queue is read again, or its limit starts afresh. Measured for issue 19
//     (BenchmarkQueueFnStateOverManyQueues, docs/performance.md "Memory over many queues"):
//     at 100,000 queues a process holds 99 MB RSS, 186 MB and growing without the bounds.
//
// TestEveryProcessCacheIsDeclaredInCachesGo keeps every such cache in this file, and
// TestPerQueueCachesAreBoundedAndClientCachesAreNot checks the bounds of the per-queue ones. The dead-letter publishers (one per topic, client
// setting and FlushTimeout, unbounded like the clients) live in package deadletter/pubsubdl, as publishers.

// queueStateIdleTTL is how long a worker process keeps what it knows about a queue it no
// longer writes to.
const queueStateIdleTTL = 10 * time.Minute

// maxQueueStates bounds the queues a worker process keeps state for, per kind of state; a
// process writing to more queues than this at once reads the least recently used ones again
// when it comes back to them.
const maxQueueStates = 10_000

// v2Clients holds the Cloud Tasks clients the creates go through (sharedClient).
// Key: clientSpec. Bound: none, kept for the life of the process (one per client setting).
var v2Clients = clientCache[*cloudtasks.Client]{dial: cloudtasks.NewClient, what: "Cloud Tasks"}

// betaClients holds the Cloud Tasks v2beta3 clients of the exactly-once retention check, the
// only API that reports a queue's task-name retention (verifyRetention).
// Key: clientSpec. Bound: none, kept for the life of the process (one per client setting).
var betaClients = clientCache[*cloudtasksbeta.Client]{dial: cloudtasksbeta.NewClient, what: "Cloud Tasks v2beta3"}

// adaptives holds the adaptive concurrency state that the create DoFns of one client setting
// share (adaptiveFor), and apart from it the state of the delete DoFns (adaptiveState): the
// limits belong to what the requests go through, so engines writing through different clients
// (another endpoint, another identity) do not share them.
// Key: adaptiveKey (clientSpec, creates or deletes). Bound: none for the states, two per client
// setting; each state keeps a concurrency limit per queue, bounded by newAdaptive like the
// per-queue caches below (a limit is dropped only once nothing is in flight to its queue and
// no engine waits for it).
var adaptives gcpconn.Cache[adaptiveKey, *engine.Adaptive]

// newAdaptive returns an adaptive concurrency state whose per-queue limits are bounded like
// every per-queue state of the process.
func newAdaptive() *engine.Adaptive {
	a := engine.NewAdaptive()
	a.IdleTTL, a.MaxQueues = queueStateIdleTTL, maxQueueStates
	return a
}

// preflights holds what the queue preflight found about a queue for the tasks of one key
// (queuePreflighter.check): a queue read that failed, or found the queue misconfigured under
// PreflightFail, is a failure, kept for gcpconn.FailureTTL. A queue dropped from it is read
// again on its next use, and its warnings logged again.
// Key: preflightKey (client setting, queue, QueuePreflight mode, kinds of task).
// Bound: queueStateIdleTTL and maxQueueStates.
var preflights = gcpconn.Cache[preflightKey, *preflightResult]{IdleTTL: queueStateIdleTTL, MaxEntries: maxQueueStates}

// queueHealths holds what the queue health (WriterOptions.QueueHealthInterval) knows of each
// queue: when it was last read, the latest read's state, overrides and stats, and what was
// reported of them (queueHealthWatch). Only a bundle writing to its queue uses an entry, and
// starts its reads, so the reads of a queue no longer written to stop at once and its entry is
// dropped after queueStateIdleTTL.
// Key: healthKey (client setting, queue).
// Bound: queueStateIdleTTL and maxQueueStates.
var queueHealths = gcpconn.Cache[healthKey, *queueHealth]{IdleTTL: queueStateIdleTTL, MaxEntries: maxQueueStates}

// destinationFailures holds the queues whose failure (NOT_FOUND after its budget,
// PERMISSION_DENIED, FAILED_PRECONDITION) a worker process met under DestinationIsolate
// (writeFn.DestinationFailed), so that the next elements for them go to the failure policy at
// once, by every instance of the process.
// Key: destinationKey (client setting, queue).
// Bound: destinationFailureTTL after the queue's last failure, and maxQueueStates (the least
// recently failed queue is forgotten first).
var destinationFailures = failedDestinations{TTL: destinationFailureTTL, MaxEntries: maxQueueStates}

// verified holds the exactly-once retention verdicts (verifyRetention): that a queue keeps
// task names at least as long as the staged options assume, or that the server cannot say
// (an emulator without the v2beta3 API). A failed check is a failure, kept for
// gcpconn.FailureTTL: the bundles meanwhile fail at once with its error. A read that failed for
// the moment (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) is not kept.
// Key: retentionKey (client setting, queue, required retention).
// Bound: queueStateIdleTTL and maxQueueStates.
var verified = gcpconn.Cache[retentionKey, *retentionVerdict]{IdleTTL: queueStateIdleTTL, MaxEntries: maxQueueStates}
