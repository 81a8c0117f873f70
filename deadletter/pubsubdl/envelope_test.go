package pubsubdl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// replayable is a dead letter as cloudtasksio.Write makes it: with the element.
func replayable(payload, element int) deadletter.FailedElement {
	return deadletter.FailedElement{
		Connector:   "cloudtasks",
		Destination: "projects/p/locations/l/queues/q",
		Payload:     bytes.Repeat([]byte{'p'}, payload),
		Code:        "INVALID_ARGUMENT",
		Error:       "the service rejected the task",
		Element:     bytes.Repeat([]byte{'e'}, element),
		ElementType: "example.com/orders.Order",
	}
}

func TestADeadLetterWithItsElementTravelsInTheEnvelope(t *testing.T) {
	fe := replayable(100, 40)
	m, reduced := newMessage(fe, mtime.FromMilliseconds(1000), "w", "b", maxMessageBytes(testTopic))
	assert.False(t, reduced)
	assert.Equal(t, EncodingEnvelopeV1, m.Attributes[AttrEncoding])
	assert.NotContains(t, m.Attributes, AttrOmitted)

	got, _, err := FromMessage(m)
	require.NoError(t, err)
	assert.Equal(t, fe, got)
}

// TestTheEnvelopeIsTheDocumentedProtobufMessage reads the data with nothing but the field
// numbers the documentation gives, as a consumer in another language would.
func TestTheEnvelopeIsTheDocumentedProtobufMessage(t *testing.T) {
	fe := replayable(3, 2)
	m, _ := newMessage(fe, mtime.MinTimestamp, "w", "b", maxMessageBytes(testTopic))
	fields := map[protowire.Number][]byte{}
	for data := m.Data; len(data) > 0; {
		num, typ, n := protowire.ConsumeTag(data)
		require.Positive(t, n)
		require.Equal(t, protowire.BytesType, typ)
		v, k := protowire.ConsumeBytes(data[n:])
		require.Positive(t, k)
		fields[num] = v
		data = data[n+k:]
	}
	assert.Equal(t, map[protowire.Number][]byte{1: []byte("ppp"), 2: []byte("ee"), 3: []byte("example.com/orders.Order")}, fields)
}

func TestFromMessageSkipsUnknownEnvelopeFields(t *testing.T) {
	data := appendEnvelope(nil, []byte("task"), []byte("elem"), "string")
	data = protowire.AppendTag(data, 9, protowire.VarintType)
	data = protowire.AppendVarint(data, 7)
	data = protowire.AppendTag(data, 10, protowire.BytesType)
	data = protowire.AppendBytes(data, []byte("later"))
	got, _, err := FromMessage(&pubsub.Message{Data: data, Attributes: map[string]string{AttrEncoding: EncodingEnvelopeV1}})
	require.NoError(t, err)
	assert.Equal(t, []byte("task"), got.Payload)
	assert.Equal(t, []byte("elem"), got.Element)
	assert.Equal(t, "string", got.ElementType)
}

func TestFromMessageReadsMessagesPublishedBeforeTheEnvelope(t *testing.T) {
	got, _, err := FromMessage(&pubsub.Message{Data: []byte("the task"), Attributes: map[string]string{AttrCode: "INVALID_ARGUMENT"}})
	require.NoError(t, err)
	assert.Equal(t, []byte("the task"), got.Payload)
	assert.Empty(t, got.Element)
}

func TestFromMessageRefusesAnUnknownEncodingAndABrokenEnvelope(t *testing.T) {
	_, _, err := FromMessage(&pubsub.Message{Data: []byte("x"), Attributes: map[string]string{AttrEncoding: "envelope-v9"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `attribute "encoding" is "envelope-v9"`)

	secret := append(protowire.AppendTag(nil, 1, protowire.BytesType), 0xff, 0xff, 0xff, 0x0f) // length beyond the data
	secret = append(secret, []byte("SECRET")...)
	_, _, err = FromMessage(&pubsub.Message{Data: secret, Attributes: map[string]string{AttrEncoding: EncodingEnvelopeV1}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "envelope-v1")
	assert.NotContains(t, err.Error(), "SECRET")
}

func TestATooLargeDeadLetterLeavesOutItsPayloadFirst(t *testing.T) {
	const limit = 4096
	fe := replayable(5000, 1000)
	m, reduced := newMessage(fe, mtime.MinTimestamp, "w", "b", limit)
	require.True(t, reduced)
	assert.LessOrEqual(t, messageSize(m), limit)
	assert.Equal(t, OmittedPayload, m.Attributes[AttrOmitted])
	assert.True(t, strings.HasPrefix(m.Attributes[AttrError], "[reduced to fit Pub/Sub's limits: left out the payload (5000 bytes)] the service rejected the task"), m.Attributes[AttrError])

	got, _, err := FromMessage(m)
	require.NoError(t, err)
	assert.Empty(t, got.Payload)
	assert.Equal(t, fe.Element, got.Element, "the element, what a replay needs, is kept")
	assert.Equal(t, fe.ElementType, got.ElementType)
}

func TestADeadLetterTooLargeEvenWithoutPayloadLeavesOutItsElement(t *testing.T) {
	const limit = 4096
	fe := replayable(5000, 5000)
	fe.Error = strings.Repeat("x", 3000)
	m, reduced := newMessage(fe, mtime.MinTimestamp, "w", "b", limit)
	require.True(t, reduced)
	assert.LessOrEqual(t, messageSize(m), limit)
	assert.Equal(t, "payload,element", m.Attributes[AttrOmitted])
	assert.True(t, strings.HasPrefix(m.Attributes[AttrError], "[reduced to fit Pub/Sub's limits: left out the payload (5000 bytes) and the element (5000 bytes)] xxx"))
	assert.LessOrEqual(t, len(m.Attributes[AttrError]), MaxAttributeBytes)

	got, _, err := FromMessage(m)
	require.NoError(t, err)
	assert.Empty(t, got.Payload)
	assert.Empty(t, got.Element)
	assert.Equal(t, fe.ElementType, got.ElementType, "the type still says what was lost")
	_, err = deadletter.DecodeElement[string](got)
	assert.ErrorIs(t, err, deadletter.ErrNoElement)
}

// A dead letter a few bytes over the limit with a payload smaller than the note that says it
// was left out: the note and the omitted attribute count too, so the element goes as well,
// and the message fits. Before, the message was measured without them and went out over the
// limit, and the client refused it on every replay of the bundle.
func TestADeadLetterJustOverTheLimitWithASmallPayloadIsMeasuredWithItsNote(t *testing.T) {
	const limit = 4096
	var fe deadletter.FailedElement
	for n := limit - 400; ; n++ {
		fe = replayable(10, n)
		m, _ := newMessage(fe, mtime.MinTimestamp, "w", "b", 1<<30)
		if size := messageSize(m); size > limit {
			require.LessOrEqual(t, size, limit+5, "the whole message is just over the limit")
			break
		}
	}
	m, reduced := newMessage(fe, mtime.MinTimestamp, "w", "b", limit)
	require.True(t, reduced)
	assert.LessOrEqual(t, messageSize(m), limit)
	assert.Equal(t, "payload,element", m.Attributes[AttrOmitted], "leaving out 10 bytes of payload for a longer note is not enough")

	fe = replayable(1500, limit-1000)
	m, reduced = newMessage(fe, mtime.MinTimestamp, "w", "b", limit)
	require.True(t, reduced)
	assert.LessOrEqual(t, messageSize(m), limit)
	assert.Equal(t, OmittedPayload, m.Attributes[AttrOmitted], "a payload larger than the note is enough")
}

func TestALegacyDeadLetterTooLargeIsPublishedWithoutPayload(t *testing.T) {
	fe := deadletter.FailedElement{Connector: "kafka", Code: "INVALID_ARGUMENT", Payload: make([]byte, 10_000)}
	m, reduced := newMessage(fe, mtime.MinTimestamp, "w", "b", 2000)
	require.True(t, reduced)
	assert.Empty(t, m.Data)
	assert.NotContains(t, m.Attributes, AttrEncoding)
	assert.Equal(t, OmittedPayload, m.Attributes[AttrOmitted])
}

func TestTheSizeLimitIsTheClientsPublishRequestLimit(t *testing.T) {
	// The client refuses a message bigger than its bundle byte limit: 1e7 less the topic
	// field and 5 bytes of framing.
	assert.Equal(t, 10_000_000-(1+len(testTopic)+1)-5, maxMessageBytes(testTopic))
}

// TestAnElevenMebibyteDeadLetterIsPublishedReduced publishes a dead letter bigger than
// Pub/Sub takes: before, the client refused it ("item size exceeds bundle byte limit") and
// failed the bundle on every replay.
func TestAnElevenMebibyteDeadLetterIsPublishedReduced(t *testing.T) {
	srv := newPubSub(t, true)
	fn := &publishFn{Topic: testTopic, MaxInFlightMessages: 1000, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
	fe := replayable(11<<20, 200)
	small := replayable(10, 10)
	require.NoError(t, runBundle(t.Context(), fn, mtime.FromMilliseconds(1000), fe, small))

	msgs := srv.Messages()
	require.Len(t, msgs, 2)
	var reduced, whole int
	for _, m := range msgs {
		got, _, err := FromMessage(&pubsub.Message{Data: m.Data, Attributes: m.Attributes})
		require.NoError(t, err)
		switch m.Attributes[AttrOmitted] {
		case OmittedPayload:
			reduced++
			assert.Empty(t, got.Payload)
			assert.Equal(t, fe.Element, got.Element)
			assert.Contains(t, got.Error, "left out the payload (11534336 bytes)")
		case "":
			whole++
			assert.Equal(t, small, got)
		default:
			t.Errorf("omitted %q", m.Attributes[AttrOmitted])
		}
	}
	assert.Equal(t, 1, reduced)
	assert.Equal(t, 1, whole)
}

// FuzzEnvelope checks that any data under EncodingEnvelopeV1 is read without a panic, and
// that what appendEnvelope writes reads back the same.
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte("payload"), []byte("element"), "string", []byte{})
	f.Add([]byte{}, []byte{}, "", []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0}, []byte{1}, "x", []byte{0x48, 0x07, 0x52, 0x01, 'a'})
	f.Fuzz(func(t *testing.T, payload, element []byte, elementType string, raw []byte) {
		attrs := map[string]string{AttrEncoding: EncodingEnvelopeV1}
		_, _, _ = FromMessage(&pubsub.Message{Data: raw, Attributes: attrs})

		data := appendEnvelope(nil, payload, element, elementType)
		got, _, err := FromMessage(&pubsub.Message{Data: data, Attributes: attrs})
		if err != nil {
			t.Fatalf("an envelope appendEnvelope wrote does not read back: %v", err)
		}
		if !bytes.Equal(got.Payload, payload) || !bytes.Equal(got.Element, element) {
			t.Fatalf("payload or element changed in the round trip")
		}
		if want := strings.ToValidUTF8(elementType, "\uFFFD"); len(want) <= maxElementTypeBytes && got.ElementType != want {
			t.Fatalf("element type %q came back as %q", want, got.ElementType)
		}
	})
}
