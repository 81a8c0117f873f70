package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/iterator"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

// externalEmulatorEnv names the variable that points the suite at an external Cloud Tasks
// emulator ("host:port") instead of an in-process cloudtaskstest server.
const externalEmulatorEnv = "CLOUDTASKS_EMULATOR_HOST"

// Where the suite's queues live. Queue ids are unique per test (see newQueue).
const (
	testProject  = "integration"
	testLocation = "local"
)

// deliveryTimeout bounds every wait for a dispatch to reach a recorder. Deliveries normally
// arrive within milliseconds; the bound only keeps a broken run from hanging.
const deliveryTimeout = 30 * time.Second

// backend is the Cloud Tasks server a test writes to: an in-process cloudtaskstest server, or
// the external emulator named by CLOUDTASKS_EMULATOR_HOST (exampleenv.StartCloudTasks, which
// the examples use too). Either way the test creates its queues through the API and points
// the sink at Addr.
type backend struct {
	// Addr is the emulator's "host:port", for cloudtasksio.Config.EmulatorEndpoint.
	Addr string
	// Server is the in-process server, or nil against an external emulator.
	Server *cloudtaskstest.Server
	// Client is a Cloud Tasks client connected to the backend.
	Client *cloudtasks.Client
}

// newBackend returns the backend for t, closed when t ends. opts configure the in-process
// server and are ignored against an external emulator; a test that depends on them must call
// needsCloudtaskstest first.
func newBackend(t *testing.T, opts ...cloudtaskstest.Option) *backend {
	t.Helper()
	ct := exampleenv.StartCloudTasks(os.Getenv(externalEmulatorEnv), opts...)
	t.Cleanup(ct.Close)
	client, err := ct.NewClient(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return &backend{Addr: ct.Endpoint, Server: ct.Server, Client: client}
}

// needsCloudtaskstest skips t against an external emulator, naming the in-process feature
// the test depends on.
func needsCloudtaskstest(t *testing.T, feature string) {
	t.Helper()
	if addr := os.Getenv(externalEmulatorEnv); addr != "" {
		t.Skipf("%s: needs cloudtaskstest's %s (running against the external emulator at %s)", t.Name(), feature, addr)
	}
}

// newQueue creates a RUNNING queue with a name unique to t through the API, with the given
// rate limits (nil for the defaults), and deletes it when t ends.
func (b *backend) newQueue(t *testing.T, limits *cloudtaskspb.RateLimits) cloudtasksio.Queue {
	t.Helper()
	q, err := cloudtasksio.NewQueue(testProject, testLocation, uniqueQueueID(t))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = b.Client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
		Parent: "projects/" + testProject + "/locations/" + testLocation,
		Queue:  &cloudtaskspb.Queue{Name: q.Path(), RateLimits: limits},
	})
	require.NoError(t, err, "creating queue %s", q.Path())
	t.Cleanup(func() { _ = b.Client.DeleteQueue(ctx, &cloudtaskspb.DeleteQueueRequest{Name: q.Path()}) })
	return q
}

// pendingTasks lists the tasks the queue still holds: not yet delivered, or being retried.
func (b *backend) pendingTasks(t *testing.T, q cloudtasksio.Queue) []*cloudtaskspb.Task {
	t.Helper()
	var out []*cloudtaskspb.Task
	it := b.Client.ListTasks(context.Background(), &cloudtaskspb.ListTasksRequest{Parent: q.Path()})
	for {
		task, err := it.Next()
		if err == iterator.Done {
			return out
		}
		require.NoError(t, err)
		out = append(out, task)
	}
}

// waitQueueEmpty waits until q holds no task: every task created so far has been delivered
// and its delivery recorded (a task leaves the queue only after its handler answered).
func (b *backend) waitQueueEmpty(t *testing.T, q cloudtasksio.Queue) {
	t.Helper()
	if b.waitIdle(t) {
		require.Empty(t, b.pendingTasks(t, q), "queue %s still holds tasks", q.Path())
		return
	}
	require.Eventually(t, func() bool { return len(b.pendingTasks(t, q)) == 0 }, deliveryTimeout, 20*time.Millisecond,
		"queue %s still holds tasks", q.Path())
}

// waitIdle waits, for at most deliveryTimeout, until the in-process server has dispatched
// every due task (cloudtaskstest.Server.Wait). It reports false at once against an external
// emulator, which has no such call: the caller then polls what it can see through the API.
func (b *backend) waitIdle(t *testing.T) bool {
	t.Helper()
	if b.Server == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), deliveryTimeout)
	defer cancel()
	require.NoError(t, b.Server.Wait(ctx), "the in-process server did not finish dispatching")
	return true
}

var notQueueChars = regexp.MustCompile(`[^a-z0-9]+`)

// uniqueQueueID derives a valid queue id from the test's name plus a random suffix, so that
// runs against a long-lived external emulator never meet an old queue.
func uniqueQueueID(t *testing.T) string {
	name := strings.Trim(notQueueChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 60 {
		name = strings.TrimRight(name[:60], "-")
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return "it-" + name + "-" + hex.EncodeToString(suffix[:])
}

// delivery is one request a recorder received.
type delivery struct {
	Method   string
	Path     string
	RawQuery string
	Host     string
	Header   http.Header
	Body     []byte
}

// recorder is a loopback HTTP target that answers 200 to everything and keeps what it got.
type recorder struct {
	// URL is the server's base URL, "http://127.0.0.1:port".
	URL string

	mu  sync.Mutex
	got []delivery
}

// newRecorder starts a recorder, closed when t ends.
func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, delivery{Method: req.Method, Path: req.URL.Path, RawQuery: req.URL.RawQuery,
			Host: req.Host, Header: req.Header.Clone(), Body: body})
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// deliveries returns a copy of what the recorder received so far, in arrival order.
func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// waitFor waits until the recorder has received at least n requests from b and returns them.
func (r *recorder) waitFor(t *testing.T, b *backend, n int) []delivery {
	t.Helper()
	if b.waitIdle(t) {
		got := r.deliveries()
		require.GreaterOrEqual(t, len(got), n, "deliveries once the server was idle")
		return got
	}
	require.Eventually(t, func() bool { return len(r.deliveries()) >= n }, deliveryTimeout, 10*time.Millisecond,
		"waiting for %d deliveries", n)
	return r.deliveries()
}

// byPath groups deliveries by URL path.
func byPath(ds []delivery) map[string][]delivery {
	out := map[string][]delivery{}
	for _, d := range ds {
		out[d.Path] = append(out[d.Path], d)
	}
	return out
}
