package pubsubdl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Attribute names of the Pub/Sub messages that ToPubSub publishes. The message data holds the
// FailedElement's Payload and Element (see AttrEncoding for the layout); everything else
// travels in these attributes. An attribute whose value would be empty is left out of the
// message.
const (
	// AttrConnector carries FailedElement.Connector, for example "cloudtasks".
	AttrConnector = "connector"
	// AttrDestination carries FailedElement.Destination, for example
	// "projects/P/locations/L/queues/Q".
	AttrDestination = "destination"
	// AttrCode carries FailedElement.Code, for example "INVALID_ARGUMENT".
	AttrCode = "code"
	// AttrError carries FailedElement.Error, cut to MaxAttributeBytes (see TruncatedMarker).
	// When the message was reduced (AttrOmitted), it ends with a note saying what was left
	// out.
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
	// AttrEncoding names the layout of the message data. With PubSubConfig.Encoding left
	// at its default, ToPubSub sets it to EncodingEnvelopeV1 for every dead letter that
	// carries an element (Element or ElementType set, as every dead letter of
	// cloudtasksio.Write does); without it the data is FailedElement.Payload unchanged, the
	// layout of dead letters that carry no element and of every message published before the
	// envelope existed. With Encoding EncodingJSONV1 it is EncodingJSONV1 on every message.
	AttrEncoding = "encoding"
	// AttrOmitted is present on a message that ToPubSub reduced to fit Pub/Sub's limits. It
	// lists what was left out, comma-separated, in the order it was left out: OmittedPayload
	// first, then (EncodingJSONV1 only) OmittedElementJSON, then OmittedElement.
	AttrOmitted = "omitted"
)

// Values of AttrEncoding and AttrOmitted.
const (
	// EncodingEnvelopeV1 is the AttrEncoding of data that is a dead-letter envelope, version
	// 1: the protocol-buffers wire encoding of the message
	//
	//	message DeadLetterEnvelope {
	//	  bytes  payload      = 1; // FailedElement.Payload
	//	  bytes  element      = 2; // FailedElement.Element
	//	  string element_type = 3; // FailedElement.ElementType
	//	}
	//
	// so that consumers in any language can read it with that definition. Empty fields are
	// left out; unknown fields are skipped by FromMessage, so later versions may add fields
	// under this name.
	EncodingEnvelopeV1 = "envelope-v1"
	// OmittedPayload in AttrOmitted: the Payload was left out.
	OmittedPayload = "payload"
	// OmittedElement in AttrOmitted: the Element was left out too.
	OmittedElement = "element"
)

// Envelope field numbers (EncodingEnvelopeV1).
const (
	envelopePayload     protowire.Number = 1
	envelopeElement     protowire.Number = 2
	envelopeElementType protowire.Number = 3
)

// maxElementTypeBytes bounds the element type name an envelope carries.
const maxElementTypeBytes = 1024

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

// maxMessageBytes is the size, as the Pub/Sub client measures it (the PubsubMessage's
// protocol-buffers size), above which the client refuses a message for topic: the publish
// request limit less the request's topic name and the message's own framing.
func maxMessageBytes(topic string) int {
	return pubsub.MaxPublishRequestBytes - (1 + len(topic) + protowire.SizeVarint(uint64(len(topic)))) - 5
}

// messageSize is a message's size as the Pub/Sub client measures it.
func messageSize(m *pubsub.Message) int {
	return proto.Size(&pubsubpb.PubsubMessage{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey})
}

// newMessage builds the message that carries fe, for a topic that takes messages of up to
// maxBytes (maxMessageBytes). When the whole dead letter does not fit, it leaves out the
// Payload, then the Element (see AttrOmitted) and reports reduced.
func newMessage(fe deadletter.FailedElement, et mtime.Time, worker, bundle string, maxBytes int) (msg *pubsub.Message, reduced bool) {
	attrs := attributes(fe, et, worker, bundle)
	envelope := len(fe.Element) > 0 || fe.ElementType != ""
	if envelope {
		attrs[AttrEncoding] = EncodingEnvelopeV1
	}
	data := func(payload, element []byte) []byte {
		if !envelope {
			return payload
		}
		return appendEnvelope(nil, payload, element, fe.ElementType)
	}
	msg = &pubsub.Message{Data: data(fe.Payload, fe.Element), Attributes: attrs}
	if messageSize(msg) <= maxBytes {
		return msg, false
	}
	// Leave out the payload, and the element too if that is not enough. The note and the
	// omitted attribute count towards the size as well, so each try is measured with them.
	reduce := func(omitElement bool) {
		omitted, sizes := []string{OmittedPayload}, []int{len(fe.Payload)}
		msg.Data = data(nil, fe.Element)
		if omitElement {
			omitted, sizes = append(omitted, OmittedElement), append(sizes, len(fe.Element))
			msg.Data = data(nil, nil)
		}
		attrs[AttrError] = attrValue(reducedNote(omitted, sizes) + strings.ToValidUTF8(fe.Error, "\uFFFD"))
		attrs[AttrOmitted] = strings.Join(omitted, ",")
	}
	reduce(false)
	if messageSize(msg) > maxBytes {
		reduce(true)
	}
	return msg, true
}

// attributes returns the attributes every message of fe carries, whatever its encoding.
func attributes(fe deadletter.FailedElement, et mtime.Time, worker, bundle string) map[string]string {
	attrs := make(map[string]string, 9)
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
	return attrs
}

// reducedNote is the note that starts the error of a dead letter published without the
// fields in omitted, whose sizes are sizes.
func reducedNote(omitted []string, sizes []int) string {
	note := "[reduced to fit Pub/Sub's limits: left out the "
	for i, what := range omitted {
		if i > 0 {
			note += " and the "
		}
		note += fmt.Sprintf("%s (%d bytes)", what, sizes[i])
	}
	return note + "] "
}

// appendEnvelope appends the EncodingEnvelopeV1 encoding of the three fields to b.
func appendEnvelope(b, payload, element []byte, elementType string) []byte {
	if len(payload) > 0 {
		b = protowire.AppendTag(b, envelopePayload, protowire.BytesType)
		b = protowire.AppendBytes(b, payload)
	}
	if len(element) > 0 {
		b = protowire.AppendTag(b, envelopeElement, protowire.BytesType)
		b = protowire.AppendBytes(b, element)
	}
	if elementType != "" {
		b = protowire.AppendTag(b, envelopeElementType, protowire.BytesType)
		b = protowire.AppendString(b, boundedtext.Cut(strings.ToValidUTF8(elementType, "\uFFFD"), maxElementTypeBytes))
	}
	return b
}

// readEnvelope fills fe's Payload, Element and ElementType from an EncodingEnvelopeV1 data.
func readEnvelope(data []byte, fe *deadletter.FailedElement) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("FromMessage: the %s data has a malformed field tag: %v", EncodingEnvelopeV1, protowire.ParseError(n))
		}
		data = data[n:]
		if typ == protowire.BytesType && num >= envelopePayload && num <= envelopeElementType {
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return fmt.Errorf("FromMessage: the %s data's field %d is malformed: %v", EncodingEnvelopeV1, num, protowire.ParseError(n))
			}
			switch num {
			case envelopePayload:
				fe.Payload = bytes.Clone(v)
			case envelopeElement:
				fe.Element = bytes.Clone(v)
			case envelopeElementType:
				fe.ElementType = string(v)
			}
			data = data[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			return fmt.Errorf("FromMessage: the %s data's field %d is malformed: %v", EncodingEnvelopeV1, num, protowire.ParseError(n))
		}
		data = data[n:]
	}
	return nil
}

// FromMessage is the inverse of the mapping ToPubSub publishes: it rebuilds the
// FailedElement that msg carries (Payload, Element and ElementType from the data as
// AttrEncoding says, the other fields from the attributes) and the failed element's event
// time. Use it in the consumer of a dead-letter subscription, for example to get the element
// back with deadletter.DecodeElement and write it again, or to hand the dead letter to
// cloudtasksio.FailedTask. It reads messages of every layout ToPubSub has published: with
// the envelope, without it, and EncodingJSONV1. Data that cannot be read, or an AttrEncoding
// this version does not know, is an error naming the attribute or field, never repeating
// the data.
//
// From EncodingJSONV1 data every field comes from the JSON object, Error whole (not cut to
// MaxAttributeBytes) and Element from its Beam-coded bytes, so a replay works as from the
// envelope. What redaction removed cannot come back: when the task had header values or
// token fields, Payload is left empty (a task with placeholders in their place must not be
// created again by mistake) and Error starts with a note naming what was redacted. A task
// without either comes back as the Payload, equal as a protobuf message to the original.
//
// A message ToPubSub reduced (AttrOmitted) gives a FailedElement without the fields left
// out; its Error starts with a note saying what was left out.
//
// The event time is the zero time.Time when the message has no AttrEventTime attribute; a
// present but unreadable one is an error naming the attribute. An Error value that ToPubSub
// cut to MaxAttributeBytes comes back cut, ending with TruncatedMarker. Attributes that do not
// belong to a FailedElement (AttrWorker, AttrBundle, any added by others) are ignored.
//
// FromMessage does not judge whose dead letter msg is. On a topic that several sinks share, a
// consumer that writes dead letters again checks Connector and Destination first, as the
// replay example does, and leaves the others alone.
func FromMessage(msg *pubsub.Message) (deadletter.FailedElement, time.Time, error) {
	fe, et, err := fromMessage(msg)
	return fe, et, withPrefix(err)
}

// fromMessage is FromMessage without the package prefix on its errors.
func fromMessage(msg *pubsub.Message) (deadletter.FailedElement, time.Time, error) {
	if msg == nil {
		return deadletter.FailedElement{}, time.Time{}, errors.New("FromMessage: the message is nil")
	}
	a := msg.Attributes
	fe := deadletter.FailedElement{
		Connector:   a[AttrConnector],
		Destination: a[AttrDestination],
		Code:        a[AttrCode],
		Error:       a[AttrError],
	}
	switch enc, ok := a[AttrEncoding]; {
	case !ok:
		fe.Payload = msg.Data
	case enc == EncodingEnvelopeV1:
		if err := readEnvelope(msg.Data, &fe); err != nil {
			return fe, time.Time{}, err
		}
	case enc == EncodingJSONV1:
		return fromJSON(msg.Data)
	default:
		return fe, time.Time{}, fmt.Errorf("FromMessage: attribute %q is %s; this version reads %q, %q and messages without the attribute",
			AttrEncoding, boundedtext.Quote(enc), EncodingEnvelopeV1, EncodingJSONV1)
	}
	var et time.Time
	if v, ok := a[AttrEventTime]; ok {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fe, time.Time{}, fmt.Errorf("FromMessage: attribute %q is not an RFC 3339 time (%d bytes)", AttrEventTime, len(v))
		}
		et = t
	}
	return fe, et, nil
}
