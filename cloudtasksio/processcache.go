package cloudtasksio

import "time"

// What a worker process keeps between bundles, shared by every DoFn instance of the process
// (docs/tuning.md has the user's view):
//
//   - the Cloud Tasks clients (v2Clients, betaClients) and the adaptive concurrency state
//     (adaptives), one per client setting: a pipeline fixes its settings at construction, so
//     these hold a handful of entries whatever the data, and are kept for the life of the
//     process; a client is never closed, so no bundle can find its client closed under it;
//   - per queue: the queue preflight's findings (preflights), the exactly-once retention
//     verdicts (verified) and, inside each adaptive state, the queue's concurrency limit.
//     These grow with the queues a QueueFn writes to, so each is bounded: an entry unused for
//     queueStateIdleTTL is dropped, and beyond maxQueueStates entries the least recently used
//     one is (a limit only once nothing is in flight to its queue and no engine waits for
//     it). A dropped entry is rebuilt on the queue's next use: the preflight and the
//     retention check read the queue again, and the limit starts afresh.
//
// Every first-use check goes through a gcpconn.Cache: one read per key at a time, its result
// shared by every instance that waits for it, and a failure remembered for
// gcpconn.FailureTTL.

// queueStateIdleTTL is how long a worker process keeps what it knows about a queue it no
// longer writes to.
const queueStateIdleTTL = 10 * time.Minute

// maxQueueStates bounds the queues a worker process keeps state for, per kind of state; a
// process writing to more queues than this at once reads the least recently used ones again
// when it comes back to them.
const maxQueueStates = 10_000
