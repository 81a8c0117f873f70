package cloudtasksio_test

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// upload is docs/formats.md's multipart element: a body built elsewhere, and the Content-Type
// that names its boundary.
type upload struct {
	Body    []byte            `json:"body"`
	Headers map[string]string `cloudtasks:"headers"`
}

func init() { register.Function1x2(newUpload) }

// receiptPDF is the file newUpload attaches: bytes that are not text.
var receiptPDF = []byte("%PDF-1.7 \x00\x01 not text")

// newUpload is docs/formats.md's DoFn: it encodes an order id and a file as
// multipart/form-data, and sets the Content-Type with the writer's boundary.
func newUpload(orderID string) (upload, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.WriteField("order_id", orderID); err != nil {
		return upload{}, err
	}
	part, err := w.CreateFormFile("receipt", "receipt.pdf")
	if err != nil {
		return upload{}, err
	}
	if _, err := part.Write(receiptPDF); err != nil {
		return upload{}, err
	}
	if err := w.Close(); err != nil {
		return upload{}, err
	}
	return upload{Body: buf.Bytes(), Headers: map[string]string{"Content-Type": w.FormDataContentType()}}, nil
}

// A multipart body is sent with the raw format and a Content-Type of the element's: the task
// carries both unchanged, and the endpoint reads the parts back.
func TestAMultipartBodyGoesThroughTheRawFormat(t *testing.T) {
	srv := newServer(t)
	cfg := cloudtasksio.Config{Queue: testQueue, EmulatorEndpoint: srv.Addr,
		HTTP: &cloudtasksio.HTTPTarget{URL: "https://example.com/receipts", Body: formats.Raw()}}
	_, err := runFrom(t, cfg, func(s beam.Scope) beam.PCollection { return beam.ParDo(s, newUpload, beam.Create(s, "42")) })
	require.NoError(t, err)

	tasks := srv.Tasks(testQueue.Path())
	require.Len(t, tasks, 1)
	req := tasks[0].GetHttpRequest()
	mediaType, params, err := mime.ParseMediaType(req.GetHeaders()["Content-Type"])
	require.NoError(t, err)
	assert.Equal(t, "multipart/form-data", mediaType)
	r := multipart.NewReader(bytes.NewReader(req.GetBody()), params["boundary"])
	form, err := r.ReadForm(1 << 20)
	require.NoError(t, err)
	assert.Equal(t, []string{"42"}, form.Value["order_id"])
	require.Len(t, form.File["receipt"], 1)
	f, err := form.File["receipt"][0].Open()
	require.NoError(t, err)
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.Equal(t, receiptPDF, got)
}

// docs/formats.md shows newUpload as this file has it, with the type exported.
func TestFormatsDocShowsTheMultipartFunctionThatIsTested(t *testing.T) {
	funcText := func(src string) string {
		start := strings.Index(src, "func newUpload(")
		require.GreaterOrEqual(t, start, 0, "newUpload is there")
		end := strings.Index(src[start:], "\n}\n")
		require.Greater(t, end, 0)
		return src[start : start+end+2]
	}
	tested := strings.ReplaceAll(funcText(readFile(t, "multipart_test.go")), "upload{", "Upload{")
	tested = strings.ReplaceAll(tested, "(upload, error)", "(Upload, error)")
	assert.Equal(t, tested, funcText(readFile(t, "../docs/formats.md")))
}
