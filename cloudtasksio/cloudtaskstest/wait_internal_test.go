package cloudtaskstest

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Wait is tested inside synctest bubbles: the time it returns at is exact.

func TestWaitReturnsOnceEveryDueTaskIsDispatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{latency: 100 * time.Millisecond}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1}})
		for range 5 {
			mustTask(t, s, postTask("x"))
		}
		start := time.Now()
		require.NoError(t, s.Wait(context.Background()))
		// Burst 1 at 1/s: sent at 0s..4s, the last answered 100ms later.
		assert.Equal(t, 4*time.Second+100*time.Millisecond, time.Since(start))
		assert.Len(t, target.deliveries(), 5)
		assert.Empty(t, s.Tasks(testQueue))
	})
}

func TestWaitIgnoresLaterPausedAndRetryingTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(n int, r *http.Request) int {
			if r.URL.Path == "/fails" {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(10 * time.Second)}})
		const paused = testQueue + "-paused"
		_, err := s.store.createQueue(&cloudtaskspb.Queue{Name: paused})
		require.NoError(t, err)
		require.NoError(t, s.PauseQueue(paused))

		later := postTask("later")
		later.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
		mustTask(t, s, later)
		failing := postTask("fails")
		failing.GetHttpRequest().Url = "http://127.0.0.1:9/fails"
		mustTask(t, s, failing)
		_, err = s.store.createTask(&cloudtaskspb.CreateTaskRequest{Parent: paused, Task: postTask("held")})
		require.NoError(t, err)

		start := time.Now()
		require.NoError(t, s.Wait(context.Background()))
		assert.Zero(t, time.Since(start), "nothing was due but the failing task's first attempt")
		assert.Len(t, target.deliveries(), 1, "the failing task was tried once, its retry is 10s away")
		assert.Len(t, s.Tasks(testQueue), 2)

		require.NoError(t, s.ResumeQueue(paused))
		require.NoError(t, s.Wait(context.Background()))
		assert.Empty(t, s.Tasks(paused), "a resumed queue's due task keeps Wait waiting until it is sent")
	})
}

func TestWaitReturnsTheContextErrorOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{latency: time.Minute}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		mustTask(t, s, postTask("slow"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := s.Wait(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 5*time.Second, time.Since(start))

		cancelled, cancel2 := context.WithCancel(context.Background())
		cancel2()
		require.ErrorIs(t, s.Wait(cancelled), context.Canceled)
	})
}

func TestWaitWaitsForACallBeingServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startBackend(t, &fakeTarget{})
		mustQueue(t, s, &cloudtaskspb.Queue{})
		s.SetLatency(3 * time.Second)
		info := &grpc.UnaryServerInfo{FullMethod: "/google.cloud.tasks.v2.CloudTasks/CreateTask"}
		req := &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: postTask("x")}
		go func() {
			_, _ = s.intercept(context.Background(), req, info, func(context.Context, any) (any, error) {
				return s.store.createTask(req)
			})
		}()
		synctest.Wait() // the call is in its latency wait
		start := time.Now()
		require.NoError(t, s.Wait(context.Background()))
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Equal(t, 1, s.Stats().TasksCreated)
		assert.Equal(t, 1, s.Stats().TasksSucceeded, "and the task it created was dispatched")
	})
}

func TestWaitAfterCloseReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startBackend(t, &fakeTarget{latency: time.Hour})
		mustQueue(t, s, &cloudtaskspb.Queue{})
		mustTask(t, s, postTask("x"))
		synctest.Wait()
		require.NoError(t, s.Close())
		start := time.Now()
		require.NoError(t, s.Wait(context.Background()))
		assert.Zero(t, time.Since(start))
	})
}

func TestWaitWithoutDispatchWaitsOnlyForCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := newBackend(WithoutDispatch())
		require.NoError(t, err)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		mustTask(t, s, postTask("stored"))
		require.NoError(t, s.Wait(context.Background()))
		assert.Len(t, s.Tasks(testQueue), 1)
	})
}

func TestWaitUntilSeesAttemptsInFlightWithoutPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{latency: 10 * time.Second}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1, MaxConcurrentDispatches: 3}})
		for range 5 {
			mustTask(t, s, postTask("x"))
		}
		start := time.Now()
		require.NoError(t, s.WaitUntil(context.Background(), func(st Stats) bool { return st.DispatchesInFlight == 3 }))
		assert.Equal(t, 2*time.Second, time.Since(start), "the third attempt starts at 2s (1/s, burst 1)")

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := s.WaitUntil(ctx, func(st Stats) bool { return st.DispatchesInFlight > 3 })
		require.ErrorIs(t, err, context.DeadlineExceeded, "never more than max_concurrent_dispatches")
	})
}
