package pubsubdl

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func TestAttrValueKeepsShortValues(t *testing.T) {
	s := strings.Repeat("e", MaxAttributeBytes)
	assert.Equal(t, s, attrValue(s))
	assert.Equal(t, "queue missing", attrValue("queue missing"))
}

func TestAttrValueTruncatesWithMarker(t *testing.T) {
	got := attrValue(strings.Repeat("e", MaxAttributeBytes+1))
	assert.Len(t, got, MaxAttributeBytes)
	assert.True(t, strings.HasSuffix(got, TruncatedMarker))
	assert.Equal(t, strings.Repeat("e", MaxAttributeBytes-len(TruncatedMarker)), strings.TrimSuffix(got, TruncatedMarker))
}

func TestAttrValueCutsAtCharacterBoundary(t *testing.T) {
	// "é" is two bytes; with one leading byte every rune straddles an odd offset.
	got := attrValue("x" + strings.Repeat("é", MaxAttributeBytes))
	assert.True(t, utf8.ValidString(got))
	assert.LessOrEqual(t, len(got), MaxAttributeBytes)
	assert.GreaterOrEqual(t, len(got), MaxAttributeBytes-1)
	assert.True(t, strings.HasSuffix(got, TruncatedMarker))
}

func TestAttrValueRepairsInvalidUTF8(t *testing.T) {
	got := attrValue("bad \xff\xfe byte")
	assert.True(t, utf8.ValidString(got))
	assert.Equal(t, "bad \uFFFD byte", got)
}

func TestEventTimeAttr(t *testing.T) {
	et := mtime.FromTime(time.Date(2026, 3, 4, 5, 6, 7, 89e6, time.FixedZone("X", 3600)))
	assert.Equal(t, "2026-03-04T04:06:07.089Z", eventTimeAttr(et))
	assert.Equal(t, "1970-01-01T00:00:00Z", eventTimeAttr(0))
	assert.Empty(t, eventTimeAttr(mtime.MinTimestamp))
	assert.Empty(t, eventTimeAttr(mtime.MaxTimestamp))
	assert.Empty(t, eventTimeAttr(mtime.EndOfGlobalWindowTime))
}

func TestNewMessageOmitsEmptyAttributes(t *testing.T) {
	m := message(deadletter.FailedElement{Connector: "cloudtasks", Code: "SERIALIZATION", Error: "no body"}, mtime.MinTimestamp, "w", "b")
	assert.Empty(t, m.Data)
	assert.Equal(t, map[string]string{
		AttrConnector: "cloudtasks",
		AttrCode:      "SERIALIZATION",
		AttrError:     "no body",
		AttrWorker:    "w",
		AttrBundle:    "b",
	}, m.Attributes)
}

func FuzzAttrValue(f *testing.F) {
	for _, s := range []string{"", "queue missing", strings.Repeat("é", MaxAttributeBytes), "bad \xff byte", strings.Repeat("x", 2*MaxAttributeBytes)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := attrValue(s)
		if !utf8.ValidString(got) || len(got) > MaxAttributeBytes {
			t.Fatalf("attrValue gave %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
		}
		valid := strings.ToValidUTF8(s, "\uFFFD")
		if len(valid) <= MaxAttributeBytes {
			if got != valid {
				t.Fatalf("a value within the limit was changed: %q -> %q", s, got)
			}
			return
		}
		kept, ok := strings.CutSuffix(got, TruncatedMarker)
		if !ok || !strings.HasPrefix(valid, kept) {
			t.Fatalf("a long value was not cut to a prefix plus the marker: %q", got)
		}
	})
}

func TestFromMessageInvertsNewMessage(t *testing.T) {
	fe := deadletter.FailedElement{
		Connector:   "cloudtasks",
		Destination: "projects/p/locations/l/queues/q",
		Payload:     []byte{0x0a, 0x03, 'a', 'b', 'c'},
		Code:        "INVALID_ARGUMENT",
		Error:       "the service rejected the task",
	}
	et := mtime.FromTime(time.Date(2026, 3, 4, 5, 6, 7, 89_000_000, time.UTC))
	got, gotTime, err := FromMessage(message(fe, et, "worker-1", "bundle-1"))
	require.NoError(t, err)
	assert.Equal(t, fe, got)
	assert.True(t, gotTime.Equal(et.ToTime()), "event time %v, want %v", gotTime, et.ToTime())
}

func TestFromMessageWithoutEventTimeOrPayload(t *testing.T) {
	fe := deadletter.FailedElement{Connector: "cloudtasks", Code: "SERIALIZATION", Error: "no body"}
	got, gotTime, err := FromMessage(message(fe, mtime.MinTimestamp, "w", "b"))
	require.NoError(t, err)
	assert.Equal(t, fe.Code, got.Code)
	assert.Empty(t, got.Payload)
	assert.True(t, gotTime.IsZero(), "no event-time attribute gives the zero time")
}

func TestFromMessageKeepsATruncatedError(t *testing.T) {
	long := strings.Repeat("x", 3*MaxAttributeBytes)
	got, _, err := FromMessage(message(deadletter.FailedElement{Error: long}, mtime.MinTimestamp, "w", "b"))
	require.NoError(t, err)
	assert.Len(t, got.Error, MaxAttributeBytes)
	assert.True(t, strings.HasSuffix(got.Error, TruncatedMarker))
}

func TestFromMessageRejectsABadEventTimeAndNil(t *testing.T) {
	_, _, err := FromMessage(&pubsub.Message{Attributes: map[string]string{AttrEventTime: "yesterday"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), AttrEventTime)
	assert.NotContains(t, err.Error(), "yesterday", "attribute values stay out of errors")

	_, _, err = FromMessage(nil)
	require.Error(t, err)
}

func TestTheTruncationMarkerIsTheDocumentedText(t *testing.T) {
	assert.Equal(t, "...[truncated]", TruncatedMarker)
}

// message is newMessage for testTopic, whose dead letters here are all small.
func message(fe deadletter.FailedElement, et mtime.Time, worker, bundle string) *pubsub.Message {
	m, _ := newMessage(fe, et, worker, bundle, maxMessageBytes(testTopic))
	return m
}
