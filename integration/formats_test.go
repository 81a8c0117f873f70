package integration

import (
	"math"
	"path"
	"reflect"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	_ "github.com/beam-cloudtasks/beam-cloudtasks/formats/avro" // the avro format's encoder
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// These tests write one element per body format through cloudtasksio.Write on prism, with the
// sink configured from flat option keys (as a template would), and compare the body and
// Content-Type that the server stored byte for byte.

func init() {
	for _, t := range []any{fmtJSONOrder{}, fmtFormOrder{}, fmtCSVOrder{}, fmtRawOrder{}, fmtAvroOrder{}, fmtFormHeaders{}} {
		beam.RegisterType(reflect.TypeOf(t))
	}
	register.Function1x1(fmtFormHeadersFor)
}

// fmtJSONOrder has a metadata field that must stay out of the body.
type fmtJSONOrder struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
	Note   string  `json:"note,omitempty"`
	Key    string  `cloudtasks:"task-id"`
}

// fmtFormOrder covers the reference's form vectors: UTF-8 and '+', '&' and '=' in values,
// a repeated field, an empty value, a nil field and a name with brackets and dots.
type fmtFormOrder struct {
	Note    string   `json:"note"`
	Tags    []string `json:"tags"`
	Empty   string   `json:"empty"`
	Missing *string  `json:"missing"`
	Nested  string   `json:"item[0].sku"`
}

// fmtCSVOrder covers the null literal, a custom delimiter and quoting.
type fmtCSVOrder struct {
	ID     string  `json:"id"`
	Note   *string `json:"note"`
	Amount int     `json:"amount"`
	Text   string  `json:"text"`
}

// fmtRawOrder sends bytes as they are, to a URL of its own.
type fmtRawOrder struct {
	Data []byte `json:"data"`
	URL  string `cloudtasks:"url"`
}

// fmtAvroOrder matches fmtAvroSchema.
type fmtAvroOrder struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Paid   bool   `json:"paid"`
}

const fmtAvroSchema = `{"type":"record","name":"Order","fields":[` +
	`{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"paid","type":"boolean"}]}`

const fmtURL = "http://127.0.0.1:1/orders"

// writeOneWithOptions writes elem with the sink built from the option keys (plus the queue and
// emulator keys) and returns the one task the server stored.
func writeOneWithOptions(t *testing.T, options map[string]string, elem any) *cloudtaskspb.Task {
	t.Helper()
	needsCloudtaskstest(t, "WithoutDispatch and stored task bodies")
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	q := b.newQueue(t, nil)
	opts := map[string]string{
		"project": q.Project, "location": q.Location, "queue": q.Name,
		"emulator-endpoint": b.Addr, "http.url": fmtURL,
	}
	for k, v := range options {
		opts[k] = v
	}
	cfg, err := cloudtasksio.ConfigFromOptions(opts)
	require.NoError(t, err)

	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Write(s, cfg, beam.Create(s, elem))
	require.NoError(t, ptest.Run(p))

	tasks := b.Server.Tasks(q.Path())
	require.Len(t, tasks, 1)
	return tasks[0]
}

func TestFormatJSONBodyOnPrism(t *testing.T) {
	task := writeOneWithOptions(t, map[string]string{"format": "json"},
		fmtJSONOrder{ID: "A-1", Amount: 12.5, Note: "<b>&", Key: "order-A-1"})

	req := task.GetHttpRequest()
	assert.Equal(t, `{"id":"A-1","amount":12.5,"note":"\u003cb\u003e\u0026"}`, string(req.GetBody()))
	assert.Equal(t, "application/json", req.GetHeaders()["Content-Type"], "the format's media type, no header set")
	assert.Equal(t, cloudtasksio.TaskID("order-A-1"), path.Base(task.GetName()), "the task-id field names the task")
}

func TestFormatFormURLEncodedBodyOnPrism(t *testing.T) {
	task := writeOneWithOptions(t, map[string]string{"format": "form-urlencoded"},
		fmtFormOrder{Note: "東京 + pickup", Tags: []string{"a&b", "c=d"}, Empty: "", Nested: "x y*"})

	req := task.GetHttpRequest()
	assert.Equal(t, "note=%E6%9D%B1%E4%BA%AC+%2B+pickup&tags=a%26b&tags=c%3Dd&empty=&item%5B0%5D.sku=x+y*", string(req.GetBody()))
	assert.Equal(t, bodyformat.FormContentType, req.GetHeaders()["Content-Type"], "the format sets its Content-Type itself")
}

func TestFormatCSVBodyOnPrism(t *testing.T) {
	task := writeOneWithOptions(t, map[string]string{
		"format": "csv", "csv.field-delimiter": ";", "csv.null-literal": "NULL",
		"http.headers.content-type": "text/csv; header=absent",
	}, fmtCSVOrder{ID: "A-1", Amount: 42, Text: `x;"y"`})

	req := task.GetHttpRequest()
	assert.Equal(t, `A-1;NULL;42;"x;""y"""`, string(req.GetBody()))
	assert.Equal(t, map[string]string{"content-type": "text/csv; header=absent"}, req.GetHeaders(), "a header of the user's wins over the format's text/csv")
}

func TestFormatRawBodyOnPrism(t *testing.T) {
	data := []byte{0x00, 0xff, 'h', 'i', '\n', 0xc3}
	task := writeOneWithOptions(t, map[string]string{
		"format": "raw", "http.headers.Content-Type": "application/octet-stream",
	}, fmtRawOrder{Data: data, URL: "http://127.0.0.1:1/raw"})

	req := task.GetHttpRequest()
	assert.Equal(t, data, req.GetBody(), "bytes as given, invalid UTF-8 included")
	assert.Equal(t, "application/octet-stream", req.GetHeaders()["Content-Type"])
	assert.Equal(t, "http://127.0.0.1:1/raw", req.GetUrl(), "the url field overrides http.url")
}

func TestFormatAvroBodyOnPrism(t *testing.T) {
	task := writeOneWithOptions(t, map[string]string{
		"format": "avro", "avro.schema": fmtAvroSchema,
	}, fmtAvroOrder{ID: "a1", Amount: 42, Paid: true})

	req := task.GetHttpRequest()
	// Avro binary: string = zig-zag length 2 (0x04) + bytes, long 42 = zig-zag 84 (0x54),
	// boolean true = 0x01.
	assert.Equal(t, []byte{0x04, 'a', '1', 0x54, 0x01}, req.GetBody())
	assert.Equal(t, "avro/binary", req.GetHeaders()["Content-Type"])
}

func TestFormatBodyIsLeftOutUnderGET(t *testing.T) {
	// JSON cannot encode NaN: had the format run for this element, the element would have
	// failed and, under FailBundle, the pipeline with it.
	unencodable := fmtJSONOrder{ID: "A-2", Amount: math.NaN(), Key: "order-A-2"}
	task := writeOneWithOptions(t, map[string]string{"format": "json", "http.method": "get"}, unencodable)

	req := task.GetHttpRequest()
	assert.Empty(t, req.GetBody())
	assert.Equal(t, "GET", req.GetHttpMethod().String())

	// The same element under POST, where the body is encoded, does fail: the format is what
	// GET skipped.
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	q := b.newQueue(t, nil)
	cfg, err := cloudtasksio.ConfigFromOptions(map[string]string{
		"project": q.Project, "location": q.Location, "queue": q.Name,
		"emulator-endpoint": b.Addr, "http.url": fmtURL, "format": "json", "http.method": "post",
	})
	require.NoError(t, err)
	p, s := beam.NewPipelineWithRoot()
	cloudtasksio.Write(s, cfg, beam.Create(s, unencodable))
	err = ptest.Run(p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), cloudtasksio.CodeSerialization)
}

// fmtFormHeaders is a form element that carries headers of its own.
type fmtFormHeaders struct {
	Note    *string           `json:"note"`
	Headers map[string]string `cloudtasks:"headers"`
}

// fmtFormHeadersFor builds the element for one case of the header-precedence test. Beam
// cannot Create a struct with a map field, so the elements are made on the worker.
func fmtFormHeadersFor(kind string) fmtFormHeaders {
	note := kind
	switch kind {
	case "equal": // the same media type in another spelling, under a lower-case name
		return fmtFormHeaders{Note: &note, Headers: map[string]string{"content-type": " Application/X-WWW-Form-URLEncoded ", "x-trace": "element"}}
	case "conflict": // another media type: the element fails
		return fmtFormHeaders{Note: &note, Headers: map[string]string{"Content-Type": "text/plain"}}
	case "parameters": // a parameter makes it a different value: the element fails
		return fmtFormHeaders{Note: &note, Headers: map[string]string{"Content-Type": bodyformat.FormContentType + "; charset=UTF-8"}}
	}
	return fmtFormHeaders{} // "null": every body field nil, no headers
}

// TestFormatFormHeaderPrecedenceOnPrism checks the order in which a task's headers are
// assembled with the form format: fixed headers, then the element's headers field (by
// case-insensitive name, in the element's spelling), then the format's own Content-Type,
// which canonicalizes an equal value and fails the element on any other.
func TestFormatFormHeaderPrecedenceOnPrism(t *testing.T) {
	needsCloudtaskstest(t, "WithoutDispatch and stored task bodies")
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	q := b.newQueue(t, nil)
	cfg, err := cloudtasksio.ConfigFromOptions(map[string]string{
		"project": q.Project, "location": q.Location, "queue": q.Name, "emulator-endpoint": b.Addr,
		"http.url": fmtURL, "format": "form-urlencoded",
		"http.headers.X-Trace": "fixed", "http.headers.X-Fixed": "kept",
	})
	require.NoError(t, err)
	cfg.OnFailure = cloudtasksio.LogAndDrop

	counters := runWrites(t, func(s beam.Scope) {
		elems := beam.ParDo(s, fmtFormHeadersFor, beam.Create(s, "equal", "conflict", "parameters", "null"))
		cloudtasksio.Write(s, cfg, elems)
	})
	assert.Equal(t, int64(2), counters[cloudtasksio.MetricRecordsSendErrors], "both conflicting Content-Types fail their element")

	byBody := map[string]map[string]string{}
	for _, task := range b.Server.Tasks(q.Path()) {
		byBody[string(task.GetHttpRequest().GetBody())] = task.GetHttpRequest().GetHeaders()
	}
	assert.Equal(t, map[string]map[string]string{
		"note=equal": {"Content-Type": bodyformat.FormContentType, "x-trace": "element", "X-Fixed": "kept"},
		"":           {"Content-Type": bodyformat.FormContentType, "X-Trace": "fixed", "X-Fixed": "kept"},
	}, byBody, "an all-nil element still gets the form Content-Type, with an empty body")
}

// With formats/avro imported (above), the avro option keys are checked like any format's: a
// missing or unparsable schema names avro.schema.
func TestFormatAvroOptionErrorsNameTheSchemaKey(t *testing.T) {
	base := map[string]string{"project": "p", "location": "l", "queue": "q", "http.url": fmtURL, "format": "avro"}
	_, err := cloudtasksio.ConfigFromOptions(base)
	var oe *cloudtasksio.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Contains(t, err.Error(), "avro.schema")

	withSchema := map[string]string{"avro.schema": "{"}
	for k, v := range base {
		withSchema[k] = v
	}
	_, err = cloudtasksio.ConfigFromOptions(withSchema)
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "avro.schema", oe.Key)
	assert.Contains(t, err.Error(), "does not parse")
}
