package pubsubdl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// jsonOrder is an element type as a Write of an HTTP target would take it: body fields and
// a headers field, registered with Beam as element types are.
type jsonOrder struct {
	ID      string            `json:"id"`
	Items   int               `json:"items"`
	Headers map[string]string `json:"hdrs" cloudtasks:"headers"`
}

// unregisteredOrder is a named element type the program never registers with Beam.
type unregisteredOrder struct{ ID string }

func init() {
	beam.RegisterType(reflect.TypeFor[jsonOrder]())
}

// The secrets of secretTask and secretOrder: none may appear in a json-v1 message.
var secrets = []string{
	"Bearer s3cr3t-token", "api-key-9f8e7d", "invoker@acme.iam.gserviceaccount.com",
	"https://audience.acme.example", "minter@acme.iam.gserviceaccount.com",
	"https://www.googleapis.com/auth/secret-scope", "tenant-key-0123", "appengine-cookie-value",
}

// secretTask is a task with header values and an OIDC token.
func secretTask(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(&cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url:        "https://orders.example.com/hook?a=1&b=2",
		HttpMethod: cloudtaskspb.HttpMethod_POST,
		Headers:    map[string]string{"Authorization": "Bearer s3cr3t-token", "X-Api-Key": "api-key-9f8e7d"},
		Body:       []byte(`{"id":"42","items":3}`),
		AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{
			ServiceAccountEmail: "invoker@acme.iam.gserviceaccount.com", Audience: "https://audience.acme.example"}},
	}}})
	require.NoError(t, err)
	return b
}

// orderDeadLetter is a dead letter of o as cloudtasksio.Write makes one, with payload.
func orderDeadLetter(t *testing.T, o jsonOrder, payload []byte) deadletter.FailedElement {
	t.Helper()
	elem, typ, err := deadletter.EncodeElement(o)
	require.NoError(t, err)
	return deadletter.FailedElement{Connector: "cloudtasks", Destination: "projects/p/locations/l/queues/orders",
		Payload: payload, Code: "INVALID_ARGUMENT", Error: "the service rejected the task", Element: elem, ElementType: typ}
}

func jsonMessage(fe deadletter.FailedElement, et mtime.Time) *pubsub.Message {
	m, _ := newJSONMessage(fe, et, "w", "b", maxMessageBytes(testTopic))
	return m
}

// A consumer in another language reads the documented fields with a plain JSON parser: the
// element as the json package writes its type, the task in protojson with proto names.
func TestAJSONDeadLetterIsOneJSONObjectOfTheDocumentedFields(t *testing.T) {
	fe := orderDeadLetter(t, jsonOrder{ID: "42", Items: 3}, secretTask(t))
	et := mtime.FromTime(time.Date(2026, 3, 4, 5, 6, 7, 89e6, time.UTC))
	m := jsonMessage(fe, et)
	assert.Equal(t, EncodingJSONV1, m.Attributes[AttrEncoding], "the attribute says which encoding")
	assert.Equal(t, "INVALID_ARGUMENT", m.Attributes[AttrCode], "the attributes are today's")

	var doc map[string]any
	require.NoError(t, json.Unmarshal(m.Data, &doc))
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	assert.Equal(t, []string{"code", "connector", "destination", "element", "element_coded", "element_type", "error", "event_time", "redacted", "task"}, keys)
	assert.Equal(t, "cloudtasks", doc["connector"])
	assert.Equal(t, "projects/p/locations/l/queues/orders", doc["destination"])
	assert.Equal(t, "2026-03-04T05:06:07.089Z", doc["event_time"])
	assert.Equal(t, "github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl.jsonOrder", doc["element_type"])
	assert.Equal(t, map[string]any{"id": "42", "items": 3.0, "hdrs": nil}, doc["element"])
	coded, err := base64.StdEncoding.DecodeString(doc["element_coded"].(string))
	require.NoError(t, err)
	assert.Equal(t, fe.Element, coded, "the Beam-coded element, base64")
	task := doc["task"].(map[string]any)
	req := task["http_request"].(map[string]any)
	assert.Equal(t, "https://orders.example.com/hook?a=1&b=2", req["url"], "URLs are not HTML-escaped")
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte(`{"id":"42","items":3}`)), req["body"], "the body, base64 as protojson writes bytes")
	assert.Equal(t, map[string]any{"Authorization": RedactedValue, "X-Api-Key": RedactedValue}, req["headers"], "names kept, values redacted")
	assert.Equal(t, map[string]any{"service_account_email": RedactedValue, "audience": RedactedValue}, req["oidc_token"])
	assert.Equal(t, []any{"http_request.headers", "http_request.oidc_token"}, doc["redacted"])
}

// TestNoHeaderValueOrTokenAppearsInAJSONDeadLetter fails if any secret a task or an element's
// headers field holds appears anywhere in the message: data or attributes, in clear or in the
// base64 of the task's fields.
func TestNoHeaderValueOrTokenAppearsInAJSONDeadLetter(t *testing.T) {
	oauth, err := proto.Marshal(&cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://orders.example.com/hook", Headers: map[string]string{"X-Tenant-Key": "tenant-key-0123"},
		AuthorizationHeader: &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{
			ServiceAccountEmail: "minter@acme.iam.gserviceaccount.com", Scope: "https://www.googleapis.com/auth/secret-scope"}},
	}}})
	require.NoError(t, err)
	appEngine, err := proto.Marshal(&cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
		RelativeUri: "/orders", Headers: map[string]string{"Cookie": "appengine-cookie-value"},
	}}})
	require.NoError(t, err)
	withHeaders := jsonOrder{ID: "7", Headers: map[string]string{"Authorization": "Bearer s3cr3t-token", "X-Tenant-Key": "tenant-key-0123"}}
	for name, fe := range map[string]deadletter.FailedElement{
		"HTTP task with OIDC":   orderDeadLetter(t, jsonOrder{ID: "1"}, secretTask(t)),
		"HTTP task with OAuth":  orderDeadLetter(t, jsonOrder{ID: "2"}, oauth),
		"App Engine task":       orderDeadLetter(t, jsonOrder{ID: "3"}, appEngine),
		"element headers field": orderDeadLetter(t, withHeaders, nil),
	} {
		t.Run(name, func(t *testing.T) {
			m := jsonMessage(fe, mtime.MinTimestamp)
			var doc JSONDeadLetter
			require.NoError(t, json.Unmarshal(m.Data, &doc))
			doc.ElementCoded = nil // the element is kept whole, as in the binary envelope
			rendered, err := json.Marshal(doc)
			require.NoError(t, err)
			var attrs strings.Builder
			for k, v := range m.Attributes {
				attrs.WriteString(k + "=" + v + "\n")
			}
			for _, s := range secrets {
				assert.NotContains(t, string(rendered), s)
				assert.NotContains(t, string(rendered), base64.StdEncoding.EncodeToString([]byte(s)))
				assert.NotContains(t, attrs.String(), s)
			}
			assert.NotEmpty(t, doc.Redacted, "what was redacted is listed")
		})
	}
	m := jsonMessage(orderDeadLetter(t, withHeaders, nil), mtime.MinTimestamp)
	var doc JSONDeadLetter
	require.NoError(t, json.Unmarshal(m.Data, &doc))
	assert.JSONEq(t, `{"id":"7","items":0,"hdrs":{"Authorization":"[redacted]","X-Tenant-Key":"[redacted]"}}`, string(doc.Element), "header names kept")
	assert.Equal(t, []string{"element.hdrs"}, doc.Redacted)
	got, _, err := FromMessage(m)
	require.NoError(t, err)
	back, err := deadletter.DecodeElement[jsonOrder](got)
	require.NoError(t, err)
	assert.Equal(t, withHeaders, back, "the element itself is whole, for a replay")
}

// FromMessage reads a json-v1 dead letter back: everything but what was redacted. A task
// with header values or tokens is not handed back with placeholders in their place.
func TestFromMessageReadsAJSONDeadLetterBackSayingWhatIsLost(t *testing.T) {
	et := mtime.FromTime(time.Date(2026, 3, 4, 5, 6, 7, 89e6, time.UTC))
	order := jsonOrder{ID: "42", Items: 3, Headers: map[string]string{"X-A": "b"}}

	fe := orderDeadLetter(t, order, secretTask(t))
	fe.Error = strings.Repeat("long error ", 200) // longer than an attribute takes
	got, gotTime, err := FromMessage(jsonMessage(fe, et))
	require.NoError(t, err)
	assert.True(t, gotTime.Equal(et.ToTime()))
	assert.Equal(t, fe.Connector, got.Connector)
	assert.Equal(t, fe.Destination, got.Destination)
	assert.Equal(t, fe.Code, got.Code)
	assert.Equal(t, fe.Element, got.Element)
	assert.Equal(t, fe.ElementType, got.ElementType)
	assert.Empty(t, got.Payload, "a task whose secrets were redacted is not the task")
	assert.Equal(t, "[read from json-v1: the task's http_request.headers, http_request.oidc_token were redacted, so Payload is left empty; the element is whole] "+fe.Error, got.Error,
		"the error comes whole from the JSON, after a note saying what was lost")
	back, err := deadletter.DecodeElement[jsonOrder](got)
	require.NoError(t, err)
	assert.Equal(t, order, back)

	// A task without headers or token comes back as the payload.
	plain := &cloudtaskspb.Task{ScheduleTime: nil, MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://orders.example.com/hook", HttpMethod: cloudtaskspb.HttpMethod_PUT, Body: []byte{0, 1, 2, 0xff}}}}
	payload, err := proto.Marshal(plain)
	require.NoError(t, err)
	fe = orderDeadLetter(t, order, payload)
	got, _, err = FromMessage(jsonMessage(fe, et))
	require.NoError(t, err)
	assert.Equal(t, fe.Error, got.Error)
	var task cloudtaskspb.Task
	require.NoError(t, proto.Unmarshal(got.Payload, &task))
	assert.True(t, proto.Equal(plain, &task), "the task survives the round trip")

	// A SERIALIZATION dead letter: no task, the element whole.
	fe = orderDeadLetter(t, order, nil)
	fe.Code = "SERIALIZATION"
	got, _, err = FromMessage(jsonMessage(fe, mtime.MinTimestamp))
	require.NoError(t, err)
	assert.Equal(t, fe, got)
}

// The element is rendered as JSON where the publisher knows its Go type and the json package
// can encode it; otherwise the message says why, and the Beam-coded bytes stay.
func TestTheElementIsJSONWhereItsTypeAllowsAndOtherwiseSaysWhy(t *testing.T) {
	encode := func(v any) deadletter.FailedElement {
		enc, err := deadletter.NewElementEncoder(reflect.TypeOf(v))
		require.NoError(t, err)
		b, err := enc.Encode(v)
		require.NoError(t, err)
		return deadletter.FailedElement{Connector: "cloudtasks", Code: "SERIALIZATION", Element: b, ElementType: enc.TypeName()}
	}
	for _, c := range []struct {
		name string
		fe   deadletter.FailedElement
		json string // the element's JSON, or "" when absent
		note string // a part of the note when absent
	}{
		{"a string", encode("order 42"), `"order 42"`, ""},
		{"an int64", encode(int64(-7)), `-7`, ""},
		{"bytes", encode([]byte("raw")), `"cmF3"`, ""},
		{"a map", encode(map[string]string{"a": "b"}), `{"a":"b"}`, ""},
		{"a registered struct", encode(jsonOrder{ID: "1", Items: 2}), `{"id":"1","items":2,"hdrs":null}`, ""},
		{"a NaN", encode(math.NaN()), "", "encoding/json cannot encode this float64: json: unsupported value: NaN"},
		{"an unregistered type", encode(unregisteredOrder{ID: "1"}), "", "is neither a plain type nor registered with beam.RegisterType"},
		{"no type name", deadletter.FailedElement{Element: []byte("x")}, "", "does not name the element's Go type"},
		{"no element", deadletter.FailedElement{Code: "SERIALIZATION"}, "", "carries no element"},
		{"bytes that do not decode", deadletter.FailedElement{Element: []byte{0xff, 0xff}, ElementType: "string"}, "", "does not decode as its Go type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var doc JSONDeadLetter
			require.NoError(t, json.Unmarshal(jsonMessage(c.fe, mtime.MinTimestamp).Data, &doc))
			assert.Equal(t, c.fe.Element, doc.ElementCoded, "the coded bytes are always kept")
			if c.json != "" {
				assert.JSONEq(t, c.json, string(doc.Element))
				assert.Empty(t, doc.ElementNote)
				return
			}
			assert.Empty(t, doc.Element)
			assert.Contains(t, doc.ElementNote, c.note)
		})
	}
}

// Another connector's payload is not a task: it cannot be shown with its secrets redacted, so
// it is left out of the JSON, with a note.
func TestAnotherConnectorsPayloadIsLeftOutOfTheJSON(t *testing.T) {
	fe := deadletter.FailedElement{Connector: "kafka", Code: "INVALID_ARGUMENT", Payload: []byte("password=hunter2")}
	m := jsonMessage(fe, mtime.MinTimestamp)
	assert.NotContains(t, string(m.Data), "hunter2")
	assert.NotContains(t, string(m.Data), base64.StdEncoding.EncodeToString(fe.Payload))
	var doc JSONDeadLetter
	require.NoError(t, json.Unmarshal(m.Data, &doc))
	assert.Contains(t, doc.TaskNote, `the payload of connector "kafka" has no JSON rendering; publish with encoding envelope-v1 to keep it`)
}

// A json-v1 dead letter over the limit leaves out its task, then the element's JSON (the
// coded element, what a replay needs, stays), then the element.
func TestATooLargeJSONDeadLetterLeavesOutTheTaskThenTheElementsJSONThenTheElement(t *testing.T) {
	const limit = 8192
	big := jsonOrder{ID: strings.Repeat("i", 2500)}
	fe := orderDeadLetter(t, big, secretTask(t))
	for _, c := range []struct {
		name    string
		payload int
		limit   int
		omitted string
	}{
		{"the task", 6000, limit, OmittedPayload},
		{"the element's JSON", 0, 5000, OmittedPayload + "," + OmittedElementJSON},
		{"the element", 0, 2000, OmittedPayload + "," + OmittedElementJSON + "," + OmittedElement},
	} {
		t.Run(c.name, func(t *testing.T) {
			fe := fe
			if c.payload > 0 {
				task := &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
					Url: "https://x.example", Body: bytes.Repeat([]byte{'b'}, c.payload)}}}
				var err error
				fe.Payload, err = proto.Marshal(task)
				require.NoError(t, err)
			}
			m, reduced := newJSONMessage(fe, mtime.MinTimestamp, "w", "b", c.limit)
			require.True(t, reduced)
			assert.LessOrEqual(t, messageSize(m), c.limit)
			assert.Equal(t, c.omitted, m.Attributes[AttrOmitted])
			assert.True(t, strings.HasPrefix(m.Attributes[AttrError], "[reduced to fit Pub/Sub's limits: left out the payload ("), m.Attributes[AttrError])
			var doc JSONDeadLetter
			require.NoError(t, json.Unmarshal(m.Data, &doc))
			assert.Empty(t, doc.Task)
			assert.Equal(t, "left out to fit Pub/Sub's limits", doc.TaskNote)
			assert.Equal(t, m.Attributes[AttrError], doc.Error, "the JSON's error has the note too")
			got, _, err := FromMessage(m)
			require.NoError(t, err)
			if c.omitted == OmittedPayload {
				assert.NotEmpty(t, doc.Element)
				assert.Equal(t, fe.Element, got.Element)
				return
			}
			assert.Empty(t, doc.Element)
			if strings.HasSuffix(c.omitted, OmittedElementJSON) {
				assert.Equal(t, fe.Element, got.Element, "the coded element stays longest")
			} else {
				assert.Empty(t, got.Element)
			}
		})
	}
}

// FromMessage's errors on json-v1 data name the field and never repeat the data.
func TestFromMessageRefusesBrokenJSONWithoutRepeatingIt(t *testing.T) {
	attrs := map[string]string{AttrEncoding: EncodingJSONV1}
	for data, want := range map[string]string{
		`{"code": "x", "element_coded": 123456789}`: `field "element_coded" is a JSON number`,
		`not json at all, secret-42`:                `data is not valid JSON (at byte 2)`,
		`{"task": {"http_request": {"url": 5}}}`:    `field "task" is not a Cloud Tasks task in protojson`,
		`{"event_time": "yesterday secret-42"}`:     `field "event_time" is not an RFC 3339 time`,
	} {
		_, _, err := FromMessage(&pubsub.Message{Data: []byte(data), Attributes: attrs})
		require.Error(t, err, data)
		assert.Contains(t, err.Error(), want)
		assert.NotContains(t, err.Error(), "secret-42")
		assert.NotContains(t, err.Error(), "123456789")
	}
}

// FuzzJSONDeadLetter checks that any json-v1 data is read without a panic and with a bounded
// error, and that what FromMessage reads from a message newJSONMessage wrote is what it was
// given, less what redaction removes.
func FuzzJSONDeadLetter(f *testing.F) {
	f.Add([]byte(`{"connector":"cloudtasks","task":{"http_request":{"url":"https://x"}},"element_coded":"AAE="}`), "e", []byte("elem"), "string")
	f.Add([]byte(`{"task":null,"redacted":["http_request.headers"],"event_time":"2026-01-01T00:00:00Z"}`), "", []byte{}, "")
	f.Add([]byte(`[1,2]`), "\xff", []byte{0xff}, "[]uint8")
	f.Fuzz(func(t *testing.T, raw []byte, errText string, element []byte, elementType string) {
		_, _, err := FromMessage(&pubsub.Message{Data: raw, Attributes: map[string]string{AttrEncoding: EncodingJSONV1}})
		if err != nil && len(err.Error()) > 1024 {
			t.Fatalf("an error of %d bytes", len(err.Error()))
		}
		// A type the publisher cannot look up: decoding fuzzed bytes as a real type may try
		// huge allocations (see deadletter.DecodeElement).
		elementType = "fuzz/" + elementType
		fe := deadletter.FailedElement{Connector: "cloudtasks", Code: "SERIALIZATION", Error: errText, Element: element, ElementType: elementType}
		got, _, err := FromMessage(jsonMessage(fe, mtime.MinTimestamp))
		if err != nil {
			t.Fatalf("a message newJSONMessage wrote does not read back: %v", err)
		}
		if !bytes.Equal(got.Element, element) || got.ElementType != strings.ToValidUTF8(elementType, "\uFFFD") ||
			got.Error != strings.ToValidUTF8(errText, "\uFFFD") {
			t.Fatalf("the dead letter changed in the round trip")
		}
	})
}

// The Encoding field is checked at construction, and reaches the publisher through both
// names of the output.
func TestEncodingIsCheckedAndJSONPublishesOnPrism(t *testing.T) {
	s, col := failedInput(t)
	err := TryToPubSub(s, PubSubConfig{Topic: goodTopic, Encoding: "xml"}, col)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Encoding is "xml"`)

	for _, way := range []string{"pubsubdl.ToPubSub", "deadletter.ToPubSub"} {
		t.Run(way, func(t *testing.T) {
			srv := newPubSub(t, true)
			order := jsonOrder{ID: "42", Items: 3, Headers: map[string]string{"Authorization": "Bearer s3cr3t-token"}}
			fe := orderDeadLetter(t, order, secretTask(t))
			p, s := beam.NewPipelineWithRoot()
			failed := beam.ParDo(s, stampEventTime, beam.Create(s, fe))
			if way == "pubsubdl.ToPubSub" {
				ToPubSub(s, PubSubConfig{Topic: testTopic, EmulatorEndpoint: srv.Addr, Encoding: EncodingJSONV1}, failed)
			} else {
				deadletter.ToPubSub(s, deadletter.PubSubConfig{Topic: testTopic, EmulatorEndpoint: srv.Addr, Encoding: EncodingJSONV1}, failed)
			}
			require.NoError(t, ptest.Run(p))
			msgs := srv.Messages()
			require.Len(t, msgs, 1)
			m := msgs[0]
			assert.Equal(t, EncodingJSONV1, m.Attributes[AttrEncoding])
			for _, secret := range secrets {
				assert.NotContains(t, string(m.Data), secret)
			}
			var doc JSONDeadLetter
			require.NoError(t, json.Unmarshal(m.Data, &doc))
			assert.JSONEq(t, `{"id":"42","items":3,"hdrs":{"Authorization":"[redacted]"}}`, string(doc.Element), "the worker renders the element")
			assert.Equal(t, "2026-03-04T05:06:07.089Z", doc.EventTime)
			got, et, err := FromMessage(&pubsub.Message{Data: m.Data, Attributes: m.Attributes})
			require.NoError(t, err)
			assert.True(t, et.Equal(pipelineEventTime))
			back, err := deadletter.DecodeElement[jsonOrder](got)
			require.NoError(t, err)
			assert.Equal(t, order, back)
		})
	}
}
