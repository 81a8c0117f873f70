package cloudtaskstest_test

import (
	"context"
	"net"
	"testing"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// An unstarted server holds no port: its queues are created (and a bad one refused) before
// Start, and a client sees them once it has started.
func TestAnUnstartedServerTakesItsQueuesBeforeItsPort(t *testing.T) {
	srv, err := cloudtaskstest.NewUnstartedServer(cloudtaskstest.WithoutDispatch())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	assert.Empty(t, srv.Addr, "no address before Start")
	_, err = srv.CreateQueue("projects/p/queues/q")
	require.Error(t, err, "a malformed queue is refused before the server listens")
	_, err = srv.CreateQueue(queueA)
	require.NoError(t, err)

	require.NoError(t, srv.Start("127.0.0.1:0"))
	require.NotEmpty(t, srv.Addr)
	q, err := newClient(t, srv).GetQueue(context.Background(), &cloudtaskspb.GetQueueRequest{Name: queueA})
	require.NoError(t, err)
	assert.Equal(t, queueA, q.GetName())

	err = srv.Start("127.0.0.1:0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has started")
}

func TestStartReportsATakenPortAndCloseWithoutStartIsFine(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	srv, err := cloudtaskstest.NewUnstartedServer()
	require.NoError(t, err)
	err = srv.Start(lis.Addr().String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listen on")
	require.NoError(t, srv.Close(), "a server that never started closes")

	err = srv.Start("127.0.0.1:0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "closed")
}

func TestNewUnstartedServerReportsAnUnusableOption(t *testing.T) {
	_, err := cloudtaskstest.NewUnstartedServer(cloudtaskstest.WithAppEngineURL("ftp://x"))
	var oe *cloudtaskstest.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "WithAppEngineURL", oe.Option)
}
