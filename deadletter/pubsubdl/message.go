package pubsubdl

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Attribute names of the Pub/Sub messages that ToPubSub publishes. The message data is the
// FailedElement's Payload unchanged; everything else travels in these attributes. An
// attribute whose value would be empty is left out of the message.
const (
	// AttrConnector carries FailedElement.Connector, for example "cloudtasks".
	AttrConnector = "connector"
	// AttrDestination carries FailedElement.Destination, for example
	// "projects/P/locations/L/queues/Q".
	AttrDestination = "destination"
	// AttrCode carries FailedElement.Code, for example "INVALID_ARGUMENT".
	AttrCode = "code"
	// AttrError carries FailedElement.Error, cut to MaxAttributeBytes (see TruncatedMarker).
	AttrError = "error"
	// AttrEventTime carries the failed element's event time in UTC, formatted with
	// time.RFC3339Nano (trailing zeros of the fraction dropped), for example
	// "2026-03-04T05:06:07.089Z". It is absent when the time has no RFC 3339 form, as with
	// Beam's minimum and maximum timestamps.
	AttrEventTime = "eventTime"
	// AttrWorker identifies the worker process that published the message: its host name
	// and a random suffix chosen when the process first publishes.
	AttrWorker = "worker"
	// AttrBundle identifies the bundle that published the message, unique within the
	// worker. A bundle that the runner retries publishes its messages again under a new id.
	AttrBundle = "bundle"
)

// MaxAttributeBytes is the most bytes of any attribute value ToPubSub publishes: Pub/Sub's
// own limit for attribute values. A longer value is cut at a character boundary and ends
// with TruncatedMarker, the whole within this limit.
const MaxAttributeBytes = 1024

// TruncatedMarker is "...[truncated]", the end of an attribute value that was cut to
// MaxAttributeBytes and of the FailedElement.Error of a failure whose text was cut.
const TruncatedMarker = boundedtext.Marker

// attrValue makes s fit a Pub/Sub attribute: valid UTF-8 (invalid bytes become U+FFFD) and
// at most MaxAttributeBytes, cut with TruncatedMarker.
func attrValue(s string) string {
	return boundedtext.Cut(strings.ToValidUTF8(s, "\uFFFD"), MaxAttributeBytes)
}

// eventTimeAttr formats et for AttrEventTime, or returns "" when it has no RFC 3339 form.
func eventTimeAttr(et mtime.Time) string {
	if et <= mtime.MinTimestamp || et >= mtime.MaxTimestamp {
		return ""
	}
	t := et.ToTime().UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// newMessage builds the message that carries fe.
func newMessage(fe deadletter.FailedElement, et mtime.Time, worker, bundle string) *pubsub.Message {
	attrs := make(map[string]string, 7)
	for k, v := range map[string]string{
		AttrConnector:   fe.Connector,
		AttrDestination: fe.Destination,
		AttrCode:        fe.Code,
		AttrError:       fe.Error,
		AttrEventTime:   eventTimeAttr(et),
		AttrWorker:      worker,
		AttrBundle:      bundle,
	} {
		if v != "" {
			attrs[k] = attrValue(v)
		}
	}
	return &pubsub.Message{Data: fe.Payload, Attributes: attrs}
}

// FromMessage is the inverse of the mapping ToPubSub publishes: it rebuilds the
// FailedElement that msg carries (Payload from the data, the other fields from the
// attributes) and the failed element's event time. Use it in the consumer of a dead-letter
// subscription, for example to hand the element to cloudtasksio.FailedTask and re-create the
// task once the cause is fixed.
//
// The event time is the zero time.Time when the message has no AttrEventTime attribute; a
// present but unreadable one is an error naming the attribute. An Error value that ToPubSub
// cut to MaxAttributeBytes comes back cut, ending with TruncatedMarker. Attributes that do not
// belong to a FailedElement (AttrWorker, AttrBundle, any added by others) are ignored.
func FromMessage(msg *pubsub.Message) (deadletter.FailedElement, time.Time, error) {
	if msg == nil {
		return deadletter.FailedElement{}, time.Time{}, errors.New("pubsubdl: FromMessage: the message is nil")
	}
	a := msg.Attributes
	fe := deadletter.FailedElement{
		Connector:   a[AttrConnector],
		Destination: a[AttrDestination],
		Payload:     msg.Data,
		Code:        a[AttrCode],
		Error:       a[AttrError],
	}
	var et time.Time
	if v, ok := a[AttrEventTime]; ok {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fe, time.Time{}, fmt.Errorf("pubsubdl: FromMessage: attribute %q is not an RFC 3339 time (%d bytes)", AttrEventTime, len(v))
		}
		et = t
	}
	return fe, et, nil
}
