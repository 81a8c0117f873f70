// Package deadletter holds the failed-element contract shared by sinks that route elements
// they could not write to a dead-letter output: FailedElement, and the helpers that put the
// input element into a dead letter (ElementEncoder, EncodeElement) and give it back for a
// replay (DecodeElement, DecodeElementAs). Package deadletter/pubsubdl publishes dead letters
// to a Pub/Sub topic; it lives apart so that a program that only writes tasks does not link
// the Pub/Sub client. ToPubSub and PubSubConfig here are that output under the names the
// project's design contract gives it; they need a program that links pubsubdl.
package deadletter

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func init() {
	beam.RegisterType(reflect.TypeFor[FailedElement]())
}

// FailedElement describes one input element that a sink could not write and that its failure
// policy routed to a dead-letter output instead of failing the bundle.
//
// It is plain data so that it can be encoded by Beam between transforms and published as is.
// Error never contains the payload or credentials.
type FailedElement struct {
	// Connector names the sink that produced the failure, for example "cloudtasks".
	Connector string
	// Destination identifies where the element was going, for example
	// "projects/P/locations/L/queues/Q". Empty when the destination itself could not be resolved.
	Destination string
	// Payload is the request the sink built for the element, in the sink's wire format (for
	// Cloud Tasks, the whole Task protobuf). It is empty when building the request itself
	// failed, which is how a consumer tells a rejected request from an unbuildable element.
	Payload []byte
	// Code classifies the failure. The Cloud Tasks sink uses "SERIALIZATION" (the task could
	// not be built), "TASK_ID" (the task-id function failed), "INVALID_ARGUMENT" (the task is
	// invalid) and "TASK_TOO_LARGE" (the task is over 1 MiB, or the gRPC transport refused it
	// for its size), and, when it isolates a failing queue, the queue's own code:
	// "NOT_FOUND", "PERMISSION_DENIED" or "FAILED_PRECONDITION"; see the Code constants of
	// package cloudtasksio.
	Code string
	// Error is a bounded, human-readable description of the failure.
	Error string
	// Element is the input element the failure belongs to, encoded with the Beam coder that
	// Beam infers for its Go type (EncodeElement), so that DecodeElement gives the element
	// back for a replay. Sinks fill it for every failure they route, including those where
	// no request could be built. It is empty when the sink could not encode the element
	// (Error then says why), when the dead letter was published to Pub/Sub in a reduced form
	// that left it out, or when the dead letter was made by a version that did not carry it.
	Element []byte
	// ElementType names the Go type of Element (ElementTypeName), for example
	// "github.com/acme/orders.Order" or "string", so that DecodeElement can refuse to decode
	// it as another type. Empty when the type is unknown.
	ElementType string
}
