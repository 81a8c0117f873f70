// Package cloudtasksio writes the elements of a Beam PCollection as Google Cloud Tasks.
//
// A pipeline that reads fast but must call an endpoint that cannot take the stream at source
// speed writes one task per element with [Write]; the queue then delivers the requests at the
// pace configured on it, retries them and can schedule them ahead. The sink itself never
// paces: it creates tasks as fast as Cloud Tasks accepts them, and a bundle that succeeds has
// had every one of its elements accepted, skipped, or handed to the failure policy.
//
// A [Config] names the destination (a fixed [Queue], or a QueueFn per element) and how each
// element becomes a task: an [HTTPTarget] or [AppEngineTarget] with a body format from package
// formats and `cloudtasks:"..."` struct-tag metadata on the element type, or a Serializer
// function of your own. [TryWrite] reports a bad Config at pipeline construction; [Write]
// panics instead. [WriteWithResult] also returns the tasks it created ([CreatedTask]: queue,
// task name, key, times), to record which element became which task or to start a step once
// they exist. [Delete] (and [TryDelete]) deletes the task Write named from each element's key,
// to cancel it or, followed by a create under a new key, to change it. [ConfigFromOptions]
// builds a Config from the flat option keys that templates take as flags (the [option keys]
// reference lists them).
//
// # Failures and dead letters
//
// Four failures belong to one element and go to the [FailurePolicy] in Config.OnFailure:
// the task could not be built ([CodeSerialization]), the element gave no task-id key
// ([CodeTaskID]), Cloud Tasks answered INVALID_ARGUMENT ([CodeInvalidArgument]), or the task
// is too large to create: over 1 MiB, never sent, or refused for its size by the gRPC
// transport ([CodeTaskTooLarge]; never retried, never taken for a quota throttle). Every
// other failure (a queue function error, a status that is not retried, an exhausted retry
// budget) fails the bundle whatever the policy, except that under
// Config.OnDestinationFailure [DestinationIsolate] a failure of one queue (NOT_FOUND after its
// budget, PERMISSION_DENIED, FAILED_PRECONDITION) goes to the policy for that queue's elements
// only ([CodeNotFound], [CodePermissionDenied], [CodeFailedPrecondition]). Transient
// statuses (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED) and NOT_FOUND are retried
// inside the sink with backoff; see [WriterOptions].
//
// Under [DeadLetter], Write returns one deadletter.FailedElement per routed failure, with
// Connector set to [Connector] ("cloudtasks"), Destination the queue path, Code one of the Code constants,
// except for CodeSerialization Payload the task in wire format ([FailedTask] reads it
// back), and Element the input element encoded with the Beam coder of its type
// (deadletter.DecodeElement gives it back for a replay). Dead letters are at least once: a
// retried bundle emits them again.
//
// # Dead letters and windows
//
// Every dead letter carries the event time of the element it stands for. Its window is that of
// the element being processed when the failure became known, which is not always its own:
//
//   - A failure found while building the task (SERIALIZATION, TASK_ID, a task the sink
//     itself finds invalid) is emitted while that element is processed: its own window.
//   - An INVALID_ARGUMENT answer from Cloud Tasks arrives asynchronously. When it is
//     collected while a later element of the bundle is processed, the dead letter lands in
//     that later element's window; when it is collected as the bundle finishes, it lands in
//     the global window, because Beam Go runs FinishBundle in the global window (a Beam Go
//     limitation: FinishBundle has no element window to emit into).
//
// In a pipeline that never windows this does not matter. With windowed input, apply
// beam.WindowInto to the dead letters before any step that depends on windows: the
// timestamps are right, so re-windowing puts each dead letter back in its element's window.
//
// # Exactly-once and runners
//
// The mode is experimental: it has run on prism only, and its API may change.
//
// With Delivery set to [ExactlyOnce] every task is named before a beam.Reshuffle and created
// after it, so a retried create bundle re-sends the same names and Cloud Tasks deduplicates
// them (ALREADY_EXISTS counts as success). A task without a key of yours gets a random
// 128-bit id, and a random id is only stable where Reshuffle checkpoints its output, so that a
// retry reads the stored envelopes instead of staging the element again: Dataflow does. On
// other runners (Flink restarting from a checkpoint, a rerun on prism) the stage step can run
// again and draw new ids, creating duplicates; give those pipelines a task-id key (Config.TaskIDFn
// or a `cloudtasks:"task-id"` field), whose name depends only on the element. In this mode
// there is no failure policy and no dead letter: every failure fails the bundle. See
// [StagedOptions] for the creation deadline and the [exactly-once] guide for the recovery window.
//
// # Metrics
//
// The sink reports Beam metrics in namespace [MetricsNamespace] ("cloudtasksio"); the
// Metric constants and functions hold their names. Counters count an element once, however
// many create attempts it took (a bundle the runner retries counts its elements again), except
// errorClass, which counts attempts:
//
//	name                                    kind          counts
//	numRecordsSend                          counter       Elements whose task Cloud Tasks accepted (including
//	                                                      ALREADY_EXISTS for a named task), once per element however
//	                                                      many attempts it took.
//	numBytesSend                            counter       Wire size of those tasks, once per element: payload volume,
//	                                                      not bytes on the network.
//	numRecordsSendErrors                    counter       At-least-once: elements that reached the failure policy,
//	                                                      whatever the policy then did; exactly-once: envelopes whose
//	                                                      failure failed the bundle (see below).
//	recordsSkipped                          counter       Elements your serializer skipped by returning (nil, nil).
//	tasksTooLarge                           counter       Elements whose task was too large to create (code
//	                                                      TASK_TOO_LARGE): over 1 MiB in wire format, so never sent, or
//	                                                      refused by the gRPC transport for its size.
//	tasksDeduplicated                       counter       ALREADY_EXISTS answers for named tasks: replays absorbed by
//	                                                      Cloud Tasks.
//	deadLetterElementsNotEncoded            counter       Dead letters emitted without their element
//	                                                      (FailedElement.Element) because Beam's coder could not encode
//	                                                      it; each one's Error says why.
//	errorClass.<CODE>.errors                counter       Every failed attempt, retried or not, by the outermost gRPC
//	                                                      status (UNAVAILABLE, NOT_FOUND, INVALID_ARGUMENT, ...).
//	inFlightTasks                           gauge         Creates in flight in the reporting DoFn instance.
//	parkedTasks                             gauge         Creates waiting out a retry backoff, or held back by adaptive
//	                                                      concurrency while their queue is throttled.
//	adaptiveConcurrencyLimit                gauge         The adaptive limit on creates in flight of the most throttled
//	                                                      queue the bundle wrote to, rounded down and set when the
//	                                                      bundle ends; not set with sink.in-flight.adaptive=off.
//	createAttemptLatencyMillis              distribution  How long each create attempt's CreateTask call took, in whole
//	                                                      milliseconds: one sample per attempt, failed and retried ones
//	                                                      included.
//	createAttemptsPerTask                   distribution  Attempts each accepted task took, the first included: one
//	                                                      sample per element counted in numRecordsSend, so its count is
//	                                                      numRecordsSend and its sum the attempts that ended in those
//	                                                      tasks.
//	numRecordsDeleted                       counter       Delete: elements whose task was deleted, once per element
//	                                                      however many attempts it took.
//	tasksAlreadyGone                        counter       Delete: elements whose task was not there, because it ran, was
//	                                                      deleted already or was never created (Cloud Tasks answered
//	                                                      NOT_FOUND about the task).
//	deleteAttemptLatencyMillis              distribution  Delete: what createAttemptLatencyMillis is for creates, for
//	                                                      each DeleteTask call.
//	destination.<queue path>.recordsSend    counter       With PerDestinationMetrics: numRecordsSend per queue.
//	destination.<queue path>.sendErrors     counter       With PerDestinationMetrics: numRecordsSendErrors per queue.
//	destination.<queue path>.recordsDeleted counter       With PerDestinationMetrics: numRecordsDeleted per queue.
//	queueFailures                           counter       With OnDestinationFailure: DestinationIsolate: elements sent
//	                                                      to the failure policy because their queue failed, each also in
//	                                                      numRecordsSendErrors.
//	destination.<queue path>.queueFailures  counter       With PerDestinationMetrics: queueFailures per queue, the
//	                                                      queues that failed.
//
// One counter lies outside that namespace, in [ThrottlingMetricsNamespace]
// ("dataflow-throttling-metrics"), one in which Dataflow's Java worker reads throttled time:
//
//	throttling-msecs                        counter       Milliseconds during which the DoFn instance held at least one
//	                                                      create back under a quota, added once per bundle when it ends
//	                                                      or fails.
//
// The queue preflight (WriterOptions.QueuePreflight) adds counters of what it found, once per
// worker process and queue:
//
//	queuePreflightPaused                    counter       Queues found PAUSED: tasks are stored but not dispatched.
//	queuePreflightDisabled                  counter       Queues found DISABLED: the same, for a queue a queue.yaml
//	                                                      upload left out.
//	queuePreflightUriOverride               counter       Queues whose httpTarget.uriOverride in enforce mode ALWAYS
//	                                                      replaces parts of the URL of every HTTP task.
//	queuePreflightRoutingOverride           counter       Queues whose appEngineRoutingOverride replaces the routing the
//	                                                      sink sets on App Engine tasks.
//	queuePreflightSkipped                   counter       Queue reads that failed: once per process and queue for
//	                                                      PERMISSION_DENIED and UNIMPLEMENTED (not tried again), once
//	                                                      per failed read for any other status (remembered for 30
//	                                                      seconds by the whole process, then tried again).
//
// With WriterOptions.QueueHealthInterval each worker process reads the queues it writes to
// again, once per queue and interval; the gauges are set when a bundle ends, from the latest
// read of each queue it wrote to:
//
//	queueState                              gauge         The worst state among the queues the bundle wrote to: 3
//	                                                      DISABLED, 2 PAUSED, 1 RUNNING (the numbers of Cloud Tasks'
//	                                                      Queue.State), 0 when the latest read of each of them failed.
//	queueTasks                              gauge         The tasks of the queue with the largest backlog among them,
//	                                                      from the stats.tasksCount of the v2beta3 API: tasks not yet
//	                                                      dispatched, being dispatched, or waiting for a retry.
//	queueOldestTaskAgeSeconds               gauge         How late the oldest task among those queues is, in whole
//	                                                      seconds: from its estimated arrival
//	                                                      (stats.oldestEstimatedArrivalTime: the earliest time at which
//	                                                      one of its tasks is due) to the read; 0 for an empty queue or
//	                                                      one whose tasks are all scheduled ahead.
//	queueHealthReads                        counter       Queue reads the queue health made, the preflight's reads
//	                                                      included: at most one per queue and interval in each worker
//	                                                      process, shared by its DoFn instances.
//	queueHealthReadErrors                   counter       Those reads that failed.
//	destination.<queue path>.queueState     gauge         With PerDestinationMetrics: queueState per queue.
//	destination.<queue path>.queueTasks     gauge         With PerDestinationMetrics: queueTasks per queue.
//	destination.<queue path>.queueOldestTaskAgeSeconds  gauge
//	                                                      With PerDestinationMetrics: queueOldestTaskAgeSeconds per
//	                                                      queue.
//
// Exactly-once mode adds:
//
//	expiredEnvelopesFailed                  counter       Staged tasks found past their creation deadline, by the
//	expiredEnvelopesAssumedCreated          counter       decision taken (each once).
//	expiredEnvelopesCreatedAnyway           counter
//	expiredEnvelopesDropped                 counter
//	stagedTaskAgeMillis                     distribution  Time from staging to the create step picking up the task.
//	stagedTaskRemainingMillis               distribution  Time left before the creation deadline at that moment: the
//	                                                      remaining replay budget.
//
// In exactly-once mode numRecordsSendErrors (and destination.<queue path>.sendErrors) counts
// the one envelope whose failure failed the bundle: an INVALID_ARGUMENT answer, another status
// that is not retried, an exhausted retry budget, an expiry under ExpiredFail (also counted in
// expiredEnvelopesFailed), or an envelope refused before sending (undecodable, staged for
// another queue, without a deadline). Envelopes in flight when the bundle failed are replayed,
// not counted, and a failed queue-retention check is not counted. An envelope that
// ExpiredAssumeCreated, ExpiredCreateAnyway or ExpiredDrop decided counts only in its
// expiredEnvelopes counter (one created anyway also counts in numRecordsSend once accepted).
// The [metrics] guide explains how to read them.
//
// # Examples
//
// example_test.go holds runnable examples, shown with the functions they illustrate by pkgsite
// and run by go test (go doc does not print examples): ExampleWrite (an HTTP target with a JSON
// body and struct-tag metadata), ExampleTryWrite (dead letters published with ToPubSub of
// package deadletter/pubsubdl, and a construction error) and ExampleConfigFromOptions (a
// Config built from option keys). The main packages under examples/ are whole pipelines.
//
// The user guide starts at the [overview]; [testing] shows a complete pipeline test.
//
// [option keys]: https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md
// [exactly-once]: https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/exactly-once.md
// [metrics]: https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/metrics.md
// [overview]: https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/overview.md
// [testing]: https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/testing.md
package cloudtasksio
