package cloudtaskstest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// These tests run the dispatcher inside a synctest bubble with a fake HTTP
// transport, so time is fake and every schedule is exact.

const testQueue = "projects/p/locations/l/queues/q"

// delivery is one request the fake target received.
type delivery struct {
	at     time.Time
	method string
	url    string
	host   string
	header http.Header
	body   string
}

// fakeTarget is an http.RoundTripper standing in for task handlers.
type fakeTarget struct {
	mu        sync.Mutex
	got       []delivery
	inFlight  int
	maxFlight int
	// respond picks the status for the n-th request (0-based); nil: 200.
	respond func(n int, r *http.Request) int
	// latency is how long each request takes before it is answered.
	latency time.Duration
}

func (f *fakeTarget) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	f.mu.Lock()
	n := len(f.got)
	host := r.Host
	f.got = append(f.got, delivery{at: time.Now(), method: r.Method, url: r.URL.String(), host: host, header: r.Header.Clone(), body: string(body)})
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	lat, respond := f.latency, f.respond
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if lat > 0 {
		select {
		case <-time.After(lat):
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	code := http.StatusOK
	if respond != nil {
		code = respond(n, r)
	}
	return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: r}, nil
}

func (f *fakeTarget) deliveries() []delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]delivery(nil), f.got...)
}

// startBackend builds a server without its gRPC listener, wired to target,
// and starts its dispatcher. Call it inside a synctest bubble.
func startBackend(t *testing.T, target http.RoundTripper, opts ...Option) *Server {
	t.Helper()
	opts = append(opts, func(c *config) { c.transport = target })
	s, err := newBackend(opts...)
	require.NoError(t, err)
	s.disp.start()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustQueue(t *testing.T, s *Server, q *cloudtaskspb.Queue) {
	t.Helper()
	q.Name = testQueue
	_, err := s.store.createQueue(q)
	require.NoError(t, err)
}

func mustTask(t *testing.T, s *Server, task *cloudtaskspb.Task) *cloudtaskspb.Task {
	t.Helper()
	got, err := s.store.createTask(&cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: task})
	require.NoError(t, err)
	return got
}

func postTask(body string) *cloudtaskspb.Task {
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "http://127.0.0.1:9/hook", HttpMethod: cloudtaskspb.HttpMethod_POST, Body: []byte(body),
	}}}
}

func TestDispatchRateFollowsMaxDispatchesPerSecond(t *testing.T) {
	cases := []struct {
		rate  float64
		burst int
		tasks int
	}{
		{rate: 10, burst: 10, tasks: 100},
		{rate: 2.5, burst: 3, tasks: 30},
		{rate: 1, burst: 1, tasks: 10},
		{rate: 250, burst: 100, tasks: 1100},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%g per second", tc.rate), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				target := &fakeTarget{}
				s := startBackend(t, target)
				mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: tc.rate}})
				start := time.Now()
				for i := range tc.tasks {
					mustTask(t, s, postTask(string(rune('a'+i%26))))
				}
				time.Sleep(time.Duration(float64(tc.tasks)/tc.rate*float64(time.Second)) + time.Second)
				synctest.Wait()

				got := target.deliveries()
				require.Len(t, got, tc.tasks)
				// The full bucket goes out at once ...
				for _, d := range got[:tc.burst] {
					assert.Equal(t, start, d.at)
				}
				// ... then one dispatch per 1/rate.
				interval := time.Duration(float64(time.Second) / tc.rate)
				for i := tc.burst; i < tc.tasks; i++ {
					gap := got[i].at.Sub(got[i-1].at)
					require.InDelta(t, float64(interval), float64(gap), float64(time.Microsecond), "gap before dispatch %d", i)
				}
				// Measured over the run, after the burst: within 1% of the rate.
				span := got[tc.tasks-1].at.Sub(start).Seconds()
				measured := float64(tc.tasks-tc.burst) / span
				assert.InEpsilon(t, tc.rate, measured, 0.01, "measured %.3f/s", measured)
				assert.Equal(t, tc.tasks, s.Stats().TasksSucceeded)
				assert.Empty(t, s.Tasks(testQueue), "succeeded tasks are removed")
			})
		})
	}
}

func TestDispatchConcurrencyNeverExceedsTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{latency: time.Second}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxConcurrentDispatches: 3}})
		for range 20 {
			mustTask(t, s, postTask("x"))
		}
		start := time.Now()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		got := target.deliveries()
		require.Len(t, got, 20)
		assert.Equal(t, 3, target.maxFlight)
		assert.Equal(t, 3, s.Stats().MaxDispatchesInFlight)
		// Waves of three, one second apart.
		for i, d := range got {
			assert.Equal(t, start.Add(time.Duration(i/3)*time.Second), d.at, "dispatch %d", i)
		}
	})
}

func TestBackoffSequence(t *testing.T) {
	rc := &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(10 * time.Second), MaxBackoff: durationpb.New(300 * time.Second), MaxDoublings: 3}
	var got []time.Duration
	for n := int32(1); n <= 9; n++ {
		got = append(got, backoff(rc, n))
	}
	want := []time.Duration{10, 20, 40, 80, 160, 240, 300, 300, 300}
	for i := range want {
		want[i] *= time.Second
	}
	assert.Equal(t, want, got, "the sequence the API documentation gives")

	defaults := &cloudtaskspb.Queue{}
	normalizeQueue(defaults, false)
	assert.Equal(t, 100*time.Millisecond, backoff(defaults.RetryConfig, 1))
	assert.Equal(t, 3276800*time.Millisecond, backoff(defaults.RetryConfig, 16), "0.1s doubled 15 times")
	assert.Equal(t, time.Hour, backoff(defaults.RetryConfig, 17), "the next doubling passes max_backoff")
	assert.Equal(t, time.Hour, backoff(defaults.RetryConfig, 100), "capped at max_backoff")
}

func TestRetriesFollowBackoffAndStopAtMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(int, *http.Request) int { return http.StatusServiceUnavailable }}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: 5, MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(10 * time.Second), MaxDoublings: 2,
		}})
		start := time.Now()
		task := mustTask(t, s, postTask("x"))

		// After the first failure the task waits for its retry, with the
		// attempt recorded on it.
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		stored, ok := s.Task(task.GetName())
		require.True(t, ok)
		assert.Equal(t, int32(1), stored.GetDispatchCount())
		assert.Equal(t, int32(1), stored.GetResponseCount())
		assert.Equal(t, start, stored.GetFirstAttempt().GetDispatchTime().AsTime().In(time.Local))
		assert.Equal(t, int32(codes.Unavailable), stored.GetLastAttempt().GetResponseStatus().GetCode())
		assert.Equal(t, start.Add(time.Second), stored.GetScheduleTime().AsTime().In(time.Local))

		time.Sleep(time.Minute)
		synctest.Wait()
		got := target.deliveries()
		require.Len(t, got, 5, "max_attempts counts the first attempt")
		// Backoff 1s, 2s, 4s, then linear: 4s*2 = 8s (under the 10s cap).
		wantOffsets := []time.Duration{0, 1 * time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second}
		for i, d := range got {
			assert.Equal(t, start.Add(wantOffsets[i]), d.at, "attempt %d", i+1)
			assert.Equal(t, strconv.Itoa(i), d.header.Get("X-CloudTasks-TaskRetryCount"))
			assert.Equal(t, "0", d.header.Get("X-CloudTasks-TaskExecutionCount"), "5xx answers are not executions")
			if i > 0 {
				assert.Equal(t, "503", d.header.Get("X-CloudTasks-TaskPreviousResponse"))
			} else {
				assert.Empty(t, d.header.Get("X-CloudTasks-TaskPreviousResponse"))
			}
		}
		_, ok = s.Task(task.GetName())
		assert.False(t, ok, "a task out of attempts is deleted")
		st := s.Stats()
		assert.Equal(t, 1, st.TasksExhausted)
		assert.Equal(t, 5, st.DispatchAttempts)
		assert.Equal(t, 0, st.TasksSucceeded)
	})
}

func TestRetriedTaskSucceedsAndCountsExecutions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(n int, _ *http.Request) int {
			if n < 2 {
				return http.StatusTooManyRequests
			}
			return http.StatusNoContent
		}}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Second)}})
		task := mustTask(t, s, postTask("x"))
		time.Sleep(time.Minute)
		synctest.Wait()
		got := target.deliveries()
		require.Len(t, got, 3)
		assert.Equal(t, []string{"0", "1", "2"}, []string{
			got[0].header.Get("X-CloudTasks-TaskExecutionCount"),
			got[1].header.Get("X-CloudTasks-TaskExecutionCount"),
			got[2].header.Get("X-CloudTasks-TaskExecutionCount")})
		_, ok := s.Task(task.GetName())
		assert.False(t, ok)
		assert.Equal(t, 1, s.Stats().TasksSucceeded)
	})
}

func TestUnlimitedAttemptsKeepRetrying(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(int, *http.Request) int { return http.StatusInternalServerError }}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: -1, MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Second),
		}})
		task := mustTask(t, s, postTask("x"))
		time.Sleep(200*time.Second + time.Millisecond)
		synctest.Wait()
		assert.Len(t, target.deliveries(), 201)
		stored, ok := s.Task(task.GetName())
		require.True(t, ok, "still retrying")
		assert.Equal(t, int32(201), stored.GetDispatchCount())
	})
}

func TestTaskRetryConfigOverridesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(int, *http.Request) int { return http.StatusInternalServerError }}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 10}})
		task := postTask("x")
		task.RetryConfig = &cloudtaskspb.RetryConfig{MaxAttempts: 2, MinBackoff: durationpb.New(3 * time.Second)}
		mustTask(t, s, task)
		time.Sleep(time.Hour)
		synctest.Wait()
		got := target.deliveries()
		require.Len(t, got, 2)
		assert.Equal(t, 3*time.Second, got[1].at.Sub(got[0].at))
	})
}

func TestMaxRetryDurationExtendsMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(int, *http.Request) int { return http.StatusInternalServerError }}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{
			MaxAttempts: 2, MaxRetryDuration: durationpb.New(10 * time.Second),
			MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Second),
		}})
		mustTask(t, s, postTask("x"))
		time.Sleep(time.Hour)
		synctest.Wait()
		// Attempts at 0s..10s: both limits hold only after the one at 10s.
		assert.Len(t, target.deliveries(), 11)
	})
}

func TestScheduledTaskWaitsForItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		start := time.Now()
		later := postTask("later")
		later.ScheduleTime = timestamppb.New(start.Add(5 * time.Second))
		mustTask(t, s, later)
		mustTask(t, s, postTask("now"))

		time.Sleep(5*time.Second - time.Nanosecond)
		synctest.Wait()
		got := target.deliveries()
		require.Len(t, got, 1)
		assert.Equal(t, "now", got[0].body)

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		got = target.deliveries()
		require.Len(t, got, 2)
		assert.Equal(t, "later", got[1].body)
		assert.Equal(t, start.Add(5*time.Second), got[1].at)
		assert.Equal(t, eta(start.Add(5*time.Second)), got[1].header.Get("X-CloudTasks-TaskETA"))
	})
}

func TestPausedQueueDispatchesOnlyAfterResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		require.NoError(t, s.PauseQueue(testQueue))
		for range 3 {
			mustTask(t, s, postTask("x"))
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Empty(t, target.deliveries())
		assert.Len(t, s.Tasks(testQueue), 3, "a paused queue keeps its tasks")

		require.NoError(t, s.ResumeQueue(testQueue))
		synctest.Wait()
		assert.Len(t, target.deliveries(), 3)
		assert.Empty(t, s.Tasks(testQueue))
	})
}

func TestPauseStopsFurtherDispatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1}})
		for range 10 {
			mustTask(t, s, postTask("x"))
		}
		time.Sleep(2500 * time.Millisecond)
		require.NoError(t, s.PauseQueue(testQueue))
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Len(t, target.deliveries(), 3, "at 0s, 1s and 2s")
		assert.Len(t, s.Tasks(testQueue), 7)
	})
}

func TestUpdateQueueChangesThePaceOfWaitingTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1}})
		for range 21 {
			mustTask(t, s, postTask("x"))
		}
		time.Sleep(500 * time.Millisecond)
		_, err := s.store.updateQueue(&cloudtaskspb.Queue{Name: testQueue, RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 10}},
			[]string{"rate_limits.max_dispatches_per_second"})
		require.NoError(t, err)
		time.Sleep(2*time.Second + 500*time.Millisecond)
		synctest.Wait()
		// One at 0s, then 10/s from the refill at 0.5s: all 21 by 2.5s.
		assert.Len(t, target.deliveries(), 21)
	})
}

func TestDispatchDeadlineIsEnforced(t *testing.T) {
	cases := []struct {
		name     string
		deadline time.Duration // 0: unset
		want     time.Duration
	}{
		{"set to 15s", 15 * time.Second, 15 * time.Second},
		{"default 10m", 0, DefaultDispatchDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				target := &fakeTarget{latency: 24 * time.Hour}
				s := startBackend(t, target)
				mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Hour), MaxBackoff: durationpb.New(time.Hour)}})
				task := postTask("slow")
				if tc.deadline > 0 {
					task.DispatchDeadline = durationpb.New(tc.deadline)
				}
				created := mustTask(t, s, task)
				start := time.Now()
				time.Sleep(tc.want - time.Nanosecond)
				synctest.Wait()
				assert.Equal(t, 1, s.Stats().DispatchesInFlight, "still waiting for the handler")
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				assert.Equal(t, 0, s.Stats().DispatchesInFlight)
				stored, ok := s.Task(created.GetName())
				require.True(t, ok)
				assert.Equal(t, int32(codes.DeadlineExceeded), stored.GetLastAttempt().GetResponseStatus().GetCode())
				assert.Equal(t, int32(0), stored.GetResponseCount())
				assert.Equal(t, start.Add(tc.want+time.Hour), stored.GetScheduleTime().AsTime().In(time.Local), "retried after min_backoff")
			})
		})
	}
}

func TestHTTPDispatchHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		task := &cloudtaskspb.Task{Name: testQueue + "/tasks/order-7", MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url: "http://127.0.0.1:9/orders?id=7", HttpMethod: cloudtaskspb.HttpMethod_PUT, Body: []byte(`{"id":7}`),
			Headers: map[string]string{"Content-Type": "application/json", "X-Custom": "v", "User-Agent": "mine",
				"X-CloudTasks-TaskName": "forged", "Host": "evil.example"},
		}}}
		mustTask(t, s, task)
		synctest.Wait()
		got := target.deliveries()
		require.Len(t, got, 1)
		d := got[0]
		assert.Equal(t, "PUT", d.method)
		assert.Equal(t, "http://127.0.0.1:9/orders?id=7", d.url)
		assert.Equal(t, "127.0.0.1:9", d.host, "Host comes from the URL")
		assert.Equal(t, `{"id":7}`, d.body)
		assert.Equal(t, "application/json", d.header.Get("Content-Type"))
		assert.Equal(t, "v", d.header.Get("X-Custom"))
		assert.Equal(t, "Google-Cloud-Tasks", d.header.Get("User-Agent"))
		assert.Equal(t, "q", d.header.Get("X-CloudTasks-QueueName"))
		assert.Equal(t, "order-7", d.header.Get("X-CloudTasks-TaskName"))
		assert.Equal(t, "0", d.header.Get("X-CloudTasks-TaskRetryCount"))
		assert.Equal(t, "0", d.header.Get("X-CloudTasks-TaskExecutionCount"))
		assert.Equal(t, eta(time.Now()), d.header.Get("X-CloudTasks-TaskETA"))
		assert.Empty(t, d.header.Get("Authorization"))
	})
}

func TestAppEngineDispatchRoutesThroughTheBaseURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target, WithAppEngineURL("http://127.0.0.1:8080"))
		mustQueue(t, s, &cloudtaskspb.Queue{})
		ae := func(uri string, r *cloudtaskspb.AppEngineRouting) *cloudtaskspb.Task {
			return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{
				HttpMethod: cloudtaskspb.HttpMethod_POST, RelativeUri: uri, AppEngineRouting: r, Body: []byte("b"),
				Headers: map[string]string{"X-Custom": "v"},
			}}}
		}
		mustTask(t, s, ae("/work?x=1", &cloudtaskspb.AppEngineRouting{Service: "worker", Version: "v2", Instance: "i1"}))
		synctest.Wait()
		mustTask(t, s, ae("", nil))
		synctest.Wait()
		_, err := s.store.updateQueue(&cloudtaskspb.Queue{Name: testQueue, AppEngineRoutingOverride: &cloudtaskspb.AppEngineRouting{Service: "override"}},
			[]string{"app_engine_routing_override"})
		require.NoError(t, err)
		mustTask(t, s, ae("/o", &cloudtaskspb.AppEngineRouting{Service: "ignored"}))
		synctest.Wait()

		got := target.deliveries()
		require.Len(t, got, 3)
		assert.Equal(t, "http://127.0.0.1:8080/work?x=1", got[0].url)
		assert.Equal(t, "i1.v2.worker.127.0.0.1:8080", got[0].host)
		assert.Equal(t, "q", got[0].header.Get("X-AppEngine-QueueName"))
		assert.NotEmpty(t, got[0].header.Get("X-AppEngine-TaskName"))
		assert.Equal(t, "0", got[0].header.Get("X-AppEngine-TaskRetryCount"))
		assert.Equal(t, "0", got[0].header.Get("X-AppEngine-TaskExecutionCount"))
		assert.Equal(t, eta(time.Now()), got[0].header.Get("X-AppEngine-TaskETA"))
		assert.Equal(t, "application/octet-stream", got[0].header.Get("Content-Type"))
		assert.Equal(t, "v", got[0].header.Get("X-Custom"))
		assert.Contains(t, got[0].header.Get("User-Agent"), "AppEngine-Google")
		assert.Empty(t, got[0].header.Get("X-CloudTasks-QueueName"))

		assert.Equal(t, "http://127.0.0.1:8080/", got[1].url, "an empty relative URI is /")
		assert.Equal(t, "127.0.0.1:8080", got[1].host, "no routing: the base host")

		assert.Equal(t, "override.127.0.0.1:8080", got[2].host, "the queue's override wins")
	})
}

func TestAppEngineTasksWaitWithoutABaseURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		mustTask(t, s, &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{}}})
		mustTask(t, s, postTask("x"))
		time.Sleep(time.Hour)
		synctest.Wait()
		assert.Len(t, target.deliveries(), 1, "only the HTTP task")
		require.Len(t, s.Tasks(testQueue), 1)
		assert.Equal(t, int32(0), s.Tasks(testQueue)[0].GetDispatchCount())
	})
}

func TestNonLoopbackTargetsAreNotContacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MaxAttempts: 2, MinBackoff: durationpb.New(time.Second)}})
		task := postTask("x")
		task.GetHttpRequest().Url = "https://example.com/hook"
		mustTask(t, s, task)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Empty(t, target.deliveries())
		st := s.Stats()
		assert.Equal(t, 2, st.DispatchAttempts)
		assert.Equal(t, 1, st.TasksExhausted)
	})
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "localhost": true, "api.localhost": true,
		"example.com": false, "10.0.0.1": false, "localhost.example.com": false, "": false,
	} {
		assert.Equal(t, want, isLoopback(host), host)
	}
}

func TestDeletedTaskIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{respond: func(int, *http.Request) int { return 500 }, latency: time.Second}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Second)}})
		task := mustTask(t, s, postTask("x"))
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, s.store.deleteTask(task.GetName()))
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Len(t, target.deliveries(), 1)
		assert.Equal(t, 0, s.Stats().DispatchesInFlight)
	})
}

func TestRunTaskIgnoresPauseAndSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		require.NoError(t, s.PauseQueue(testQueue))
		task := postTask("x")
		task.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
		created := mustTask(t, s, task)
		got, err := s.disp.runNow(t.Context(), created.GetName(), cloudtaskspb.Task_BASIC)
		require.NoError(t, err)
		assert.Equal(t, int32(1), got.GetDispatchCount())
		synctest.Wait()
		assert.Len(t, target.deliveries(), 1)
		_, err = s.disp.runNow(t.Context(), created.GetName(), cloudtaskspb.Task_BASIC)
		assert.Equal(t, codes.NotFound, status.Code(err), "succeeded and removed")
	})
}

// refusingTarget fails every request without a response, as an unreachable
// handler would.
type refusingTarget struct{}

func (refusingTarget) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connect: connection refused")
}

// syncBuffer is a log sink safe for the dispatcher's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestFailedConnectionKeepsTheQueryOutOfLogsAndStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		s := startBackend(t, refusingTarget{}, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		mustQueue(t, s, &cloudtaskspb.Queue{RetryConfig: &cloudtaskspb.RetryConfig{MinBackoff: durationpb.New(time.Hour), MaxBackoff: durationpb.New(time.Hour)}})
		task := postTask("x")
		task.GetHttpRequest().Url = "http://user:pw@127.0.0.1:9/hook?token=query-secret"
		created := mustTask(t, s, task)
		synctest.Wait()

		stored, ok := s.Task(created.GetName())
		require.True(t, ok)
		st := stored.GetLastAttempt().GetResponseStatus()
		assert.Equal(t, int32(codes.Unavailable), st.GetCode())
		assert.Contains(t, st.GetMessage(), "connection refused")
		assert.Contains(t, logs.String(), "connection refused")
		assert.Contains(t, logs.String(), "url=http://127.0.0.1:9/hook ", "the logged URL has neither query nor user info")
		for _, secret := range []string{"query-secret", "pw@"} {
			assert.NotContains(t, st.GetMessage(), secret)
			assert.NotContains(t, logs.String(), secret)
		}
	})
}

// grpc.Server.Stop does not wait for running handlers, so a RunTask can reach
// the dispatcher after Close has stopped it; it must not start an attempt.
func TestRunTaskAfterCloseStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		target := &fakeTarget{}
		s := startBackend(t, target)
		mustQueue(t, s, &cloudtaskspb.Queue{})
		require.NoError(t, s.PauseQueue(testQueue))
		created := mustTask(t, s, postTask("x"))
		require.NoError(t, s.Close())

		_, err := s.disp.runNow(t.Context(), created.GetName(), cloudtaskspb.Task_BASIC)
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		synctest.Wait()
		assert.Empty(t, target.deliveries())
		assert.Zero(t, s.Stats().DispatchAttempts)
	})
}

// countingClock is time.Now that counts its calls: each dispatcher pass
// reads the clock, so the count bounds how often the loop woke.
type countingClock struct {
	mu sync.Mutex
	n  int
}

func (c *countingClock) now() time.Time {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return time.Now()
}

func (c *countingClock) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestTinyDispatchRateDoesNotSpinTheDispatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &countingClock{}
		target := &fakeTarget{}
		s := startBackend(t, target, WithClock(clock.now))
		// One token per ~3000 years: the first task takes the bucket's only
		// token, the second waits far beyond what a time.Duration holds.
		mustQueue(t, s, &cloudtaskspb.Queue{RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: 1e-11}})
		mustTask(t, s, postTask("first"))
		mustTask(t, s, postTask("second"))
		synctest.Wait()
		before := clock.calls()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Len(t, target.deliveries(), 1)
		assert.LessOrEqual(t, clock.calls()-before, 5, "the dispatcher woke for nothing")
	})
}
