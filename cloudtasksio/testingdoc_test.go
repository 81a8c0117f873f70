package cloudtasksio_test

// This file is the test that opens docs/testing.md, the same text from the import block on
// (TestTestingDocOpensWithThisFile keeps the two equal). It is also the package's TestMain.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// TestMain runs the package's tests through ptest, whose default runner is prism.
func TestMain(m *testing.M) { ptest.Main(m) }

// Shipment is the element type: its fields become the JSON body of one task each.
type Shipment struct {
	ID   string `json:"id"`
	Dest string `json:"dest"`
}

func init() { beam.RegisterType(reflect.TypeFor[Shipment]()) }

func TestShipmentsReachTheEndpoint(t *testing.T) {
	// The endpoint the tasks call: it records what each request carries.
	var mu sync.Mutex
	var got []string
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(body))
	}))
	defer endpoint.Close()

	// The in-process Cloud Tasks server with one running queue, in place of the service.
	srv := cloudtaskstest.NewServer()
	defer srv.Close()
	queue := cloudtasksio.Queue{Project: "my-project", Location: "us-central1", Name: "shipments"}
	_, err := srv.CreateQueue(queue.Path())
	require.NoError(t, err)

	// The pipeline under test, run on prism.
	p, s := beam.NewPipelineWithRoot()
	shipments := beam.Create(s, Shipment{ID: "s1", Dest: "Oslo"}, Shipment{ID: "s2", Dest: "Lima"})
	cloudtasksio.Write(s, cloudtasksio.Config{
		Queue:            queue,
		HTTP:             &cloudtasksio.HTTPTarget{URL: endpoint.URL + "/ship", Body: formats.JSON()},
		EmulatorEndpoint: srv.Addr, // plaintext, no credentials
	}, shipments)
	ptest.RunAndValidate(t, p)

	// The pipeline has created the tasks; wait until the queue has dispatched them.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Wait(ctx))

	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []string{
		`POST /ship application/json {"id":"s1","dest":"Oslo"}`,
		`POST /ship application/json {"id":"s2","dest":"Lima"}`,
	}, got)
	assert.Empty(t, srv.Tasks(queue.Path()), "a delivered task leaves the queue")
}
