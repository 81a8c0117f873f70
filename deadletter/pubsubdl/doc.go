// Package pubsubdl publishes dead letters (deadletter.FailedElement values, such as the
// PCollection that cloudtasksio.Write returns under the DeadLetter policy) to a Pub/Sub
// topic, and reads them back from the messages (FromMessage).
//
// It is a package of its own so that importing cloudtasksio or deadletter does not link the
// Pub/Sub client into programs that never publish dead letters. Its transform keeps the step
// name "deadletter.ToPubSub" and its metrics keep the namespace "deadletter" that they had
// when they lived in package deadletter, so a running streaming job can be updated in place
// and dashboards keep their queries.
package pubsubdl
