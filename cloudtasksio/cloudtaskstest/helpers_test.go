package cloudtaskstest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	location = "projects/test-project/locations/us-central1"
	queueA   = location + "/queues/queue-a"
	queueB   = location + "/queues/queue-b"
)

// start runs a server and a client connected to it, both closed when the test
// ends.
func start(t *testing.T, opts ...cloudtaskstest.Option) (*cloudtaskstest.Server, *cloudtasks.Client) {
	t.Helper()
	srv := cloudtaskstest.NewServer(opts...)
	t.Cleanup(func() { _ = srv.Close() })
	return srv, newClient(t, srv)
}

// newClient returns a client of srv, closed when the test ends.
func newClient(t *testing.T, srv *cloudtaskstest.Server) *cloudtasks.Client {
	t.Helper()
	client, err := cloudtasks.NewClient(context.Background(), srv.ClientOptions()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 678901234, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func httpTask(url string, body []byte) *cloudtaskspb.Task {
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: url, HttpMethod: cloudtaskspb.HttpMethod_POST, Body: body,
		Headers: map[string]string{"Content-Type": "application/json"},
	}}}
}

func named(t *cloudtaskspb.Task, name string) *cloudtaskspb.Task {
	t.Name = name
	return t
}

func requireCode(t *testing.T, want codes.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, status.Code(err), "error: %v", err)
}
