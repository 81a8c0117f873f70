package cloudtaskstest_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// refusedOf reports which of n calls r refuses, each with RESOURCE_EXHAUSTED.
func refusedOf(t *testing.T, r cloudtaskstest.Reactor, n int) []bool {
	t.Helper()
	out := make([]bool, n)
	for i := range out {
		handled, resp, err := r.React(&cloudtaskspb.CreateTaskRequest{})
		assert.Nil(t, resp)
		if handled {
			require.Equal(t, codes.ResourceExhausted, status.Code(err), "error: %v", err)
		}
		out[i] = handled
	}
	return out
}

func count(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// A share of refusals holds whatever the rate of calls, and a seed refuses the same calls
// again.
func TestRefuseAtRandomRefusesTheShareAndRepeatsWithItsSeed(t *testing.T) {
	const calls = 20_000
	for _, share := range []float64{0, 0.02, 0.10, 1} {
		got := refusedOf(t, cloudtaskstest.RefuseAtRandom(share, 7), calls)
		assert.InDelta(t, share*calls, count(got), 0.1*share*calls+1, "share %v", share)
		assert.Equal(t, got, refusedOf(t, cloudtaskstest.RefuseAtRandom(share, 7), calls), "the same seed refuses the same calls")
	}
	assert.NotEqual(t, refusedOf(t, cloudtaskstest.RefuseAtRandom(0.5, 1), 100), refusedOf(t, cloudtaskstest.RefuseAtRandom(0.5, 2), 100),
		"another seed, other calls")
	assert.PanicsWithValue(t, "cloudtaskstest.RefuseAtRandom: share 1.5 is not a number from 0 to 1",
		func() { cloudtaskstest.RefuseAtRandom(1.5, 0) })
	assert.Panics(t, func() { cloudtaskstest.RefuseAtRandom(-0.1, 0) })
}

// A burst refuses n calls in a row from its delay after the first call on, and none other.
func TestRefuseBurstRefusesNCallsFromItsDelayOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := cloudtaskstest.RefuseBurst(3, time.Second)
		assert.Equal(t, []bool{false, false}, refusedOf(t, r, 2), "before the delay")
		time.Sleep(999 * time.Millisecond)
		assert.Equal(t, []bool{false}, refusedOf(t, r, 1), "still before the delay")
		time.Sleep(time.Millisecond)
		assert.Equal(t, []bool{true, true, true, false, false}, refusedOf(t, r, 5), "the burst, then nothing")
		time.Sleep(time.Hour)
		assert.Equal(t, []bool{false}, refusedOf(t, r, 1), "once")
	})
	assert.Equal(t, []bool{true, true, false}, refusedOf(t, cloudtaskstest.RefuseBurst(2, 0), 3), "no delay: the first calls")
	assert.Equal(t, []bool{false}, refusedOf(t, cloudtaskstest.RefuseBurst(0, 0), 1))
	assert.Panics(t, func() { cloudtaskstest.RefuseBurst(-1, 0) })
	assert.Panics(t, func() { cloudtaskstest.RefuseBurst(1, -time.Second) })
}

// Through a server, a refused create stores nothing and counts as an injected error; the
// others are served.
func TestRefusalsReachTheClientAndStoreNothing(t *testing.T) {
	srv, client := start(t, cloudtaskstest.WithoutDispatch())
	_, err := srv.CreateQueue(queueA)
	require.NoError(t, err)
	srv.AddReactor("CreateTask", cloudtaskstest.RefuseBurst(2, 0))
	srv.AddReactor("CreateTask", cloudtaskstest.RefuseAtRandom(0.25, 1))
	const calls = 400
	refused := 0
	for range calls {
		_, err := client.CreateTask(context.Background(), &cloudtaskspb.CreateTaskRequest{Parent: queueA, Task: httpTask("http://127.0.0.1:1/x", nil)})
		if err != nil {
			requireCode(t, codes.ResourceExhausted, err)
			refused++
		}
	}
	st := srv.Stats()
	assert.Equal(t, refused, st.InjectedErrors)
	assert.Equal(t, calls-refused, st.TasksCreated)
	assert.Len(t, srv.Tasks(queueA), calls-refused)
	assert.Zero(t, st.QuotaRejections, "not a quota's refusals")
	assert.InDelta(t, 2+0.25*(calls-2), refused, 40)
}
