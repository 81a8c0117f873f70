package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/googleapis/gax-go/v2/apierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const testQueue = "projects/p/locations/l/queues/q"

// newRequest builds a request whose id is carried in the task URL, with a body
// and a header that must never appear in an error message.
func newRequest(id string) *Request[string] {
	return &Request[string]{
		Create: &cloudtaskspb.CreateTaskRequest{
			Parent: testQueue,
			Task: &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
				Url:     "https://example.test/" + id,
				Body:    []byte("SECRET-BODY"),
				Headers: map[string]string{"X-Token": "SECRET-HEADER"},
			}}},
		},
		Tag: id,
	}
}

func namedRequest(id string) *Request[string] {
	r := newRequest(id)
	r.Create.Task.Name = testQueue + "/tasks/" + id
	return r
}

func idOf(req *cloudtaskspb.CreateTaskRequest) string {
	return strings.TrimPrefix(req.GetTask().GetHttpRequest().GetUrl(), "https://example.test/")
}

// attempt is one call the fake creator saw.
type attempt struct {
	id          string
	at          time.Time
	deadline    time.Time
	hasDeadline bool
	req         *cloudtaskspb.CreateTaskRequest
}

// fakeCreator answers each attempt as answer says; n counts the attempts of
// one id from 1. A latency is waited out on the (fake) clock, or until the
// attempt's context ends, as the real client does.
type fakeCreator struct {
	answer func(id string, n int) (latency time.Duration, err error)

	mu       sync.Mutex
	attempts []attempt
	counts   map[string]int
	cur      int
	peak     int
}

func newFake(answer func(id string, n int) (time.Duration, error)) *fakeCreator {
	return &fakeCreator{answer: answer, counts: map[string]int{}}
}

// scripted answers the n-th attempt of an id with errs[id][n-1], and succeeds
// once the script runs out; all instantly.
func scripted(errs map[string][]error) *fakeCreator {
	return newFake(func(id string, n int) (time.Duration, error) {
		if n <= len(errs[id]) {
			return 0, errs[id][n-1]
		}
		return 0, nil
	})
}

func (f *fakeCreator) CreateTask(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
	id := idOf(req)
	dl, ok := ctx.Deadline()
	f.mu.Lock()
	f.counts[id]++
	n := f.counts[id]
	f.attempts = append(f.attempts, attempt{id: id, at: time.Now(), deadline: dl, hasDeadline: ok, req: req})
	f.cur++
	f.peak = max(f.peak, f.cur)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.cur--
		f.mu.Unlock()
	}()

	latency, err := f.answer(id, n)
	if latency > 0 {
		timer := time.NewTimer(latency)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return req.GetTask(), nil
}

// times returns when the fake saw each attempt of id, relative to start.
func (f *fakeCreator) times(id string, start time.Time) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Duration
	for _, a := range f.attempts {
		if a.id == id {
			out = append(out, a.at.Sub(start))
		}
	}
	return out
}

func (f *fakeCreator) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[id]
}

func (f *fakeCreator) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.attempts)
}

// harness drives an Engine from the test goroutine and records every
// Observer callback, checking that each one happens on that goroutine, inside
// a Submit or Flush call, with that call's context.
type harness struct {
	t     *testing.T
	e     *Engine[string]
	f     *fakeCreator
	start time.Time
	gid   uint64
	cap   int

	maxHeld   int // most requests held (in flight + parked) seen
	maxParked int // most parked requests seen

	current atomic.Int64 // id of the Submit/Flush in progress; 0 = none
	calls   int64

	created   []string
	dedup     []string
	createdAt map[string]time.Duration
	rejected  map[string]error
	failed    []string // "id:CODE"
	expired   []string
	expiredAt map[string]time.Duration
	expire    func(r *Request[string]) (ExpiredAction, error)
	reject    func(r *Request[string], err error) error // nil: a rejection leaves the engine running
	terminal  []string                                  // ids reported by Failed
	latencies map[string][]time.Duration                // AttemptLatency reports per id
	outcomes  []string                                  // "latency:id", "created:id", "failed:id" in callback order
}

type callKey struct{}

func newHarness(t *testing.T, f *fakeCreator, o Options) *harness {
	h := &harness{
		t: t, f: f, start: time.Now(), gid: goid(), cap: o.MaxInFlight,
		createdAt: map[string]time.Duration{}, rejected: map[string]error{}, expiredAt: map[string]time.Duration{},
	}
	h.e = New[string](f, o, h)
	return h
}

func baseOptions() Options {
	return Options{
		MaxInFlight: 10,
		Transient:   Budget{Initial: 100 * time.Millisecond, Max: time.Second, MaxAttempts: 8},
		NotFound:    Budget{Initial: 500 * time.Millisecond, Max: 2 * time.Second, MaxAttempts: 3},
		Jitter:      func() float64 { return 0.5 }, // factor 1: the nominal backoff
	}
}

func goid() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	// "goroutine 123 [running]: ..."
	fields := strings.Fields(string(buf))
	n, _ := strconv.ParseUint(fields[1], 10, 64)
	return n
}

func (h *harness) enter() context.Context {
	h.calls++
	h.current.Store(h.calls)
	return context.WithValue(context.Background(), callKey{}, h.calls)
}

func (h *harness) submit(r *Request[string]) error {
	ctx := h.enter()
	defer h.current.Store(0)
	err := h.e.Submit(ctx, r)
	h.checkCap()
	return err
}

func (h *harness) submitID(id string) error { return h.submit(newRequest(id)) }

func (h *harness) flush() error {
	ctx := h.enter()
	defer h.current.Store(0)
	return h.e.Flush(ctx)
}

func (h *harness) checkCap() {
	in, parked := h.e.Stats()
	h.maxHeld = max(h.maxHeld, in+parked)
	h.maxParked = max(h.maxParked, parked)
	if in+parked > h.cap {
		h.t.Errorf("in flight %d + parked %d exceeds MaxInFlight %d", in, parked, h.cap)
	}
}

// check asserts the callback runs inside the current Submit/Flush, on the
// test goroutine, with that call's context.
func (h *harness) check(ctx context.Context, what string) {
	h.t.Helper()
	cur := h.current.Load()
	if cur == 0 {
		h.t.Errorf("%s called outside Submit/Flush", what)
	}
	if got := ctx.Value(callKey{}); got != cur {
		h.t.Errorf("%s got the context of call %v, want call %d", what, got, cur)
	}
	if g := goid(); g != h.gid {
		h.t.Errorf("%s called on goroutine %d, want the caller's %d", what, g, h.gid)
	}
	h.checkCap()
}

func (h *harness) Created(ctx context.Context, r *Request[string], deduplicated bool) {
	h.check(ctx, "Created")
	id := r.Tag
	h.created = append(h.created, id)
	h.outcomes = append(h.outcomes, "created:"+id)
	h.createdAt[id] = time.Since(h.start)
	if deduplicated {
		h.dedup = append(h.dedup, id)
	}
}

func (h *harness) Rejected(ctx context.Context, r *Request[string], err error) error {
	h.check(ctx, "Rejected")
	h.rejected[r.Tag] = err
	if h.reject == nil {
		return nil
	}
	return h.reject(r, err)
}

func (h *harness) Failed(ctx context.Context, r *Request[string], err error) {
	h.check(ctx, "Failed")
	if !errors.Is(h.e.Err(), err) {
		h.t.Errorf("Failed(%v) is not the engine's terminal error %v", err, h.e.Err())
	}
	h.terminal = append(h.terminal, r.Tag)
}

func (h *harness) AttemptFailed(ctx context.Context, r *Request[string], code string) {
	h.check(ctx, "AttemptFailed")
	h.failed = append(h.failed, r.Tag+":"+code)
	h.outcomes = append(h.outcomes, "failed:"+r.Tag)
}

func (h *harness) AttemptLatency(ctx context.Context, r *Request[string], latency time.Duration) {
	h.check(ctx, "AttemptLatency")
	if h.latencies == nil {
		h.latencies = map[string][]time.Duration{}
	}
	h.latencies[r.Tag] = append(h.latencies[r.Tag], latency)
	h.outcomes = append(h.outcomes, "latency:"+r.Tag)
}

func (h *harness) Expired(ctx context.Context, r *Request[string]) (ExpiredAction, error) {
	h.check(ctx, "Expired")
	id := r.Tag
	h.expired = append(h.expired, id)
	h.expiredAt[id] = time.Since(h.start)
	if h.expire == nil {
		return ExpiredFail, nil
	}
	return h.expire(r)
}

func ms(n ...int) []time.Duration {
	out := make([]time.Duration, len(n))
	for i, v := range n {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

var (
	errUnavailable = status.Error(codes.Unavailable, "service unavailable")
	errNotFound    = status.Error(codes.NotFound, "queue not found")
)

func TestTransientBackoffScheduleIsExactForEachJitter(t *testing.T) {
	// Transient budget 100ms..1s; five failures, then success. Nominal backoffs
	// 100, 200, 400, 800, 1000 (capped) ms, scaled by 0.75 + 0.5*jitter.
	cases := []struct {
		name   string
		jitter float64
		want   []time.Duration
	}{
		{"jitter 0 is factor 0.75", 0, ms(0, 75, 225, 525, 1125, 1875)},
		{"jitter 0.5 is factor 1", 0.5, ms(0, 100, 300, 700, 1500, 2500)},
		{"jitter just below 1 stays at factor 1.25", math.Nextafter(1, 0), ms(0, 125, 375, 875, 1875, 3125)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := baseOptions()
				o.Jitter = func() float64 { return tc.jitter }
				h := newHarness(t, scripted(map[string][]error{"a": repeat(errUnavailable, 5)}), o)
				require.NoError(t, h.submitID("a"))
				require.NoError(t, h.flush())
				assert.Equal(t, tc.want, h.f.times("a", h.start))
				assert.Equal(t, []string{"a"}, h.created)
				assert.Equal(t, repeatString("a:UNAVAILABLE", 5), h.failed)
				assert.Equal(t, tc.want[5], time.Since(h.start), "Flush returns when the last attempt succeeds")
			})
		})
	}
}

func repeatString(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestEachFailureDrawsItsOwnJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		draws := []float64{0, 0.5, 0.25}
		o := baseOptions()
		o.Jitter = func() float64 { v := draws[0]; draws = draws[1:]; return v }
		h := newHarness(t, scripted(map[string][]error{"a": repeat(errUnavailable, 3)}), o)
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.flush())
		// 100*0.75=75, then 200*1=200, then 400*0.875=350.
		assert.Equal(t, ms(0, 75, 275, 625), h.f.times("a", h.start))
	})
}

func TestBackoffIsMeasuredFromTheFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first attempt takes 40ms to fail; the retry is due 100ms after that.
		f := newFake(func(id string, n int) (time.Duration, error) {
			if n == 1 {
				return 40 * time.Millisecond, errUnavailable
			}
			return 0, nil
		})
		h := newHarness(t, f, baseOptions())
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.flush())
		assert.Equal(t, ms(0, 140), f.times("a", h.start))

		// A failure nobody handles for a while still counts its backoff from
		// when it happened: by the next Flush the retry is overdue.
		require.NoError(t, h.submitID("b"))
		time.Sleep(time.Second)
		require.NoError(t, h.flush())
		assert.Equal(t, ms(140, 1140), f.times("b", h.start))
	})
}

func TestTransientBudgetExhaustionIsTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := baseOptions()
		o.Transient.MaxAttempts = 4
		long := status.Error(codes.Unavailable, "upstream connect error "+strings.Repeat("x", 1000))
		h := newHarness(t, scripted(map[string][]error{"a": repeat(long, 10)}), o)
		require.NoError(t, h.submitID("a"))
		err := h.flush()
		require.Error(t, err)
		assert.Equal(t, ms(0, 100, 300, 700), h.f.times("a", h.start), "4 attempts, the first included")
		assert.Equal(t, codes.Unavailable, status.Code(err), "the RPC error stays reachable")
		assert.ErrorIs(t, err, long)
		msg := err.Error()
		assert.Contains(t, msg, testQueue)
		assert.Contains(t, msg, "UNAVAILABLE")
		assert.Contains(t, msg, "4 attempt")
		assert.Contains(t, msg, "upstream connect error")
		assert.Less(t, len(msg), 450, "the status message is bounded: %s", msg)
		assert.NotContains(t, msg, "SECRET")
		assert.Empty(t, h.created)
		assert.Len(t, h.failed, 4)
		assert.Equal(t, err, h.e.Err())
	})
}

func TestNotFoundBudgetIsShortAndSaysTheQueueMayBeReactivating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, scripted(map[string][]error{"a": repeat(errNotFound, 10)}), baseOptions())
		require.NoError(t, h.submitID("a"))
		err := h.flush()
		require.Error(t, err)
		// NotFound budget 500ms..2s, 3 attempts: retries after 500 and 1000ms.
		assert.Equal(t, ms(0, 500, 1500), h.f.times("a", h.start))
		assert.Equal(t, codes.NotFound, status.Code(err))
		msg := err.Error()
		assert.Contains(t, msg, testQueue)
		assert.Contains(t, msg, "NOT_FOUND")
		assert.Contains(t, msg, "3 attempt")
		assert.Contains(t, msg, "reactivating after being idle")
		assert.NotContains(t, msg, "SECRET")
		assert.Equal(t, repeatString("a:NOT_FOUND", 3), h.failed)
	})
}

func TestBudgetsAreCountedSeparatelyPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := baseOptions()
		o.Transient.MaxAttempts = 3
		// Two failures on each budget stay below both limits of 3.
		h := newHarness(t, scripted(map[string][]error{
			"a": {errNotFound, errUnavailable, errNotFound, errUnavailable},
			"b": {errUnavailable},
		}), o)
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.submitID("b"))
		require.NoError(t, h.flush())
		// a: +500 (NOT_FOUND #1), +100 (transient #1), +1000 (NOT_FOUND #2), +200 (transient #2).
		assert.Equal(t, ms(0, 500, 600, 1600, 1800), h.f.times("a", h.start))
		assert.Equal(t, ms(0, 100), h.f.times("b", h.start), "another request's failures do not count")
		assert.ElementsMatch(t, []string{"a", "b"}, h.created)
	})
}

func TestMaxAttemptsOneMeansNoRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := baseOptions()
		o.Transient.MaxAttempts = 1
		h := newHarness(t, scripted(map[string][]error{"a": {errUnavailable}}), o)
		require.NoError(t, h.submitID("a"))
		err := h.flush()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "1 attempt")
		assert.Equal(t, 1, h.f.count("a"))
	})
}

func TestBackoffBounds(t *testing.T) {
	b := Budget{Initial: time.Microsecond, Max: time.Microsecond, MaxAttempts: 3}
	assert.Equal(t, time.Millisecond, b.backoff(1, 0), "never below 1ms")

	huge := Budget{Initial: time.Second, Max: time.Duration(math.MaxInt64), MaxAttempts: 100}
	assert.Equal(t, time.Duration(float64(math.MaxInt64)*0.75), huge.backoff(90, 0), "doubling saturates at Max instead of overflowing")
	for _, j := range []float64{0.5, 0.75, 0.999} {
		assert.Equal(t, time.Duration(math.MaxInt64), huge.backoff(90, j), "jitter %v past the largest Duration saturates instead of wrapping to a 1ms wait", j)
	}

	b = Budget{Initial: 100 * time.Millisecond, Max: 10 * time.Second, MaxAttempts: 8}
	want := ms(100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000)
	for n, w := range want {
		assert.Equal(t, w, b.backoff(n+1, 0.5), "failure %d", n+1)
	}
}

func TestCapCountsParkedAndInFlightRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every request takes 1..7ms and fails once, so the engine holds a
		// mix of in-flight and parked requests throughout. The harness checks
		// in flight + parked against the cap after every Submit and inside
		// every callback.
		f := newFake(func(id string, n int) (time.Duration, error) {
			i, _ := strconv.Atoi(id)
			latency := time.Duration(i%7+1) * time.Millisecond
			if n == 1 {
				return latency, errUnavailable
			}
			return latency, nil
		})
		o := baseOptions()
		o.MaxInFlight = 4
		h := newHarness(t, f, o)
		for i := range 50 {
			require.NoError(t, h.submitID(fmt.Sprint(i)))
		}
		require.NoError(t, h.flush())
		assert.Equal(t, 4, h.maxHeld, "the cap is reached")
		assert.GreaterOrEqual(t, h.maxParked, 3, "with most of it parked at times (callbacks see the count before the current failure parks)")
		assert.LessOrEqual(t, f.peak, 4)
		assert.Len(t, h.created, 50)
		assert.Equal(t, 100, f.total())
		in, parked := h.e.Stats()
		assert.Zero(t, in)
		assert.Zero(t, parked)
	})
}

func TestSubmitAtCapWithEverythingParkedReturnsAtTheEarliestDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// a, b, c fail after 30, 10, 20ms; with a 100ms backoff they are due
		// at 130, 110 and 120ms. Their retries succeed instantly.
		latency := map[string]time.Duration{"a": 30 * time.Millisecond, "b": 10 * time.Millisecond, "c": 20 * time.Millisecond}
		f := newFake(func(id string, n int) (time.Duration, error) {
			if n == 1 && latency[id] > 0 {
				return latency[id], errUnavailable
			}
			return 0, nil
		})
		o := baseOptions()
		o.MaxInFlight = 3
		h := newHarness(t, f, o)
		for _, id := range []string{"a", "b", "c"} {
			require.NoError(t, h.submitID(id))
		}
		require.NoError(t, h.submitID("d"))
		assert.Equal(t, 110*time.Millisecond, time.Since(h.start), "d waits exactly until b, the earliest parked request, is due")
		assert.Equal(t, []string{"b"}, h.created)
		assert.Equal(t, ms(0, 110), f.times("b", h.start))
		assert.Equal(t, 1, f.count("a"))
		assert.Equal(t, 1, f.count("c"))
		_, parked := h.e.Stats()
		assert.Equal(t, 2, parked)

		require.NoError(t, h.flush())
		assert.Equal(t, ms(0, 130), f.times("a", h.start))
		assert.Equal(t, ms(0, 120), f.times("c", h.start))
		assert.ElementsMatch(t, []string{"a", "b", "c", "d"}, h.created)
	})
}

func TestSubmitAtCapWaitsForACompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) { return 50 * time.Millisecond, nil })
		o := baseOptions()
		o.MaxInFlight = 2
		h := newHarness(t, f, o)
		require.NoError(t, h.submitID("a"))
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, h.submitID("b"))
		require.NoError(t, h.submitID("c"))
		assert.Equal(t, 50*time.Millisecond, time.Since(h.start), "c waits for a to complete")
		assert.Equal(t, []string{"a"}, h.created)
		require.NoError(t, h.flush())
		assert.Equal(t, 100*time.Millisecond, time.Since(h.start))
		assert.Equal(t, 2, f.peak)
	})
}

func TestFlushDrainsInFlightAndReSendsParkedAsTheyComeDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) {
			switch {
			case id == "slow":
				return 300 * time.Millisecond, nil
			case id == "retry" && n <= 2:
				return 0, errUnavailable
			case id == "missing" && n == 1:
				return 0, errNotFound
			}
			return 0, nil
		})
		h := newHarness(t, f, baseOptions())
		for _, id := range []string{"slow", "retry", "missing", "ok"} {
			require.NoError(t, h.submitID(id))
		}
		require.NoError(t, h.flush())
		assert.Equal(t, 500*time.Millisecond, time.Since(h.start), "Flush returns when the last parked request is created")
		assert.Equal(t, ms(0, 100, 300), f.times("retry", h.start))
		assert.Equal(t, ms(0, 500), f.times("missing", h.start))
		assert.Equal(t, map[string]time.Duration{
			"ok": 0, "retry": 300 * time.Millisecond, "slow": 300 * time.Millisecond, "missing": 500 * time.Millisecond,
		}, h.createdAt)
		in, parked := h.e.Stats()
		assert.Zero(t, in+parked)
		assert.NoError(t, h.e.Err())
	})
}

func TestFirstTerminalErrorWinsAndStopsFurtherSends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) {
			switch id {
			case "denied":
				return 10 * time.Millisecond, status.Error(codes.PermissionDenied, "caller lacks cloudtasks.tasks.create")
			case "internal":
				return 20 * time.Millisecond, status.Error(codes.Internal, "boom")
			case "parked":
				return 5 * time.Millisecond, errUnavailable
			case "slow":
				return 30 * time.Millisecond, nil
			}
			return 0, nil
		})
		h := newHarness(t, f, baseOptions())
		for _, id := range []string{"denied", "internal", "parked", "slow"} {
			require.NoError(t, h.submitID(id))
		}
		err := h.flush()
		require.Error(t, err)
		assert.Equal(t, codes.PermissionDenied, status.Code(err))
		assert.Contains(t, err.Error(), "PERMISSION_DENIED")
		assert.Contains(t, err.Error(), testQueue)
		assert.Contains(t, err.Error(), "1 attempt")
		assert.Equal(t, 10*time.Millisecond, time.Since(h.start), "the failure cancels the calls in flight; Flush waits only for them to return")
		assert.Equal(t, 1, f.count("parked"), "no re-send after a terminal error")
		assert.Empty(t, h.created, "the cancelled calls did not create anything")
		assert.ElementsMatch(t, []string{"parked:UNAVAILABLE", "denied:PERMISSION_DENIED"}, h.failed, "cancelled attempts are not failed attempts")
		assert.Equal(t, []string{"denied"}, h.terminal)
		in, parked := h.e.Stats()
		assert.Zero(t, in+parked)

		time.Sleep(time.Second)
		assert.Equal(t, 1, f.count("parked"))
		assert.Same(t, err, h.submitID("late"), "Submit after a terminal error returns it")
		assert.Zero(t, f.count("late"), "and does not send")
		assert.Same(t, err, h.flush())
		assert.Same(t, err, h.e.Err())
	})
}

func TestARejectionTheObserverFailsStopsTheHeldRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := errors.New("the failure policy fails the batch")
		f := scripted(map[string][]error{"bad": {status.Error(codes.InvalidArgument, "bad url")}})
		o := baseOptions()
		o.MaxInFlight = 1
		h := newHarness(t, f, o)
		h.reject = func(*Request[string], error) error { return policy }
		require.NoError(t, h.submitID("bad"))
		// At the cap, Submit waits for "bad", whose rejection fails the engine: the request it
		// holds is not sent.
		assert.Same(t, policy, h.submitID("held"))
		assert.Same(t, policy, h.flush())
		assert.Zero(t, f.count("held"))
		assert.Equal(t, 1, f.total())
		assert.Empty(t, h.terminal, "a rejection is reported by Rejected, not Failed")
	})
}

func TestARejectionTheObserverFailsAbandonsParkedRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := errors.New("the failure policy fails the batch")
		f := newFake(func(id string, n int) (time.Duration, error) {
			if id == "bad" {
				return 50 * time.Millisecond, status.Error(codes.InvalidArgument, "bad url")
			}
			return time.Millisecond, errUnavailable // parks, due 100ms after each failure
		})
		h := newHarness(t, f, baseOptions())
		h.reject = func(*Request[string], error) error { return policy }
		require.NoError(t, h.submitID("retry"))
		require.NoError(t, h.submitID("bad"))
		assert.Same(t, policy, h.flush())
		assert.Equal(t, 50*time.Millisecond, time.Since(h.start), "Flush returns at the rejection")
		time.Sleep(time.Minute)
		assert.Equal(t, 1, f.count("retry"), "the parked retry is never re-sent")
	})
}

func TestAFailureCancelsTheAttemptsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) { return time.Hour, nil })
		h := newHarness(t, f, baseOptions())
		for i := range 5 {
			require.NoError(t, h.submitID(fmt.Sprint(i)))
		}
		synctest.Wait() // every attempt is waiting out the fake's hour
		bundle := errors.New("an element of the batch failed")
		h.e.Fail(bundle)
		in, _ := h.e.Stats()
		assert.Equal(t, 5, in, "Fail does not wait")
		assert.Same(t, bundle, h.flush())
		assert.Zero(t, time.Since(h.start), "the cancelled attempts return at once")
		in, _ = h.e.Stats()
		assert.Zero(t, in)
		assert.Empty(t, h.created)
		assert.Empty(t, h.failed, "an attempt the engine cancelled is not a failed attempt")
		assert.Empty(t, h.terminal, "Failed is not called for the caller's own error")
		h.e.Fail(errors.New("later"))
		assert.Same(t, bundle, h.e.Err(), "the first error stays")
	})
}

func TestSubmitReturnsATerminalErrorCapturedEarlier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, scripted(map[string][]error{"bad": {status.Error(codes.FailedPrecondition, "queue is being deleted")}}), baseOptions())
		require.NoError(t, h.submitID("bad"))
		synctest.Wait() // the failure has been posted, not yet handled
		err := h.submitID("next")
		require.Error(t, err)
		assert.Equal(t, codes.FailedPrecondition, status.Code(err))
		assert.Zero(t, h.f.count("next"))
		assert.Equal(t, []string{"bad:FAILED_PRECONDITION"}, h.failed)
	})
}

func TestInvalidArgumentIsRejectedNotAnEngineError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		invalid := status.Error(codes.InvalidArgument, "Task.schedule_time is too far in the future "+strings.Repeat("y", 500))
		h := newHarness(t, scripted(map[string][]error{"bad": {invalid}}), baseOptions())
		require.NoError(t, h.submitID("bad"))
		require.NoError(t, h.submitID("good"))
		require.NoError(t, h.flush())
		assert.Equal(t, []string{"good"}, h.created)
		require.Contains(t, h.rejected, "bad")
		rej := h.rejected["bad"]
		assert.Equal(t, codes.InvalidArgument, status.Code(rej))
		assert.Contains(t, rej.Error(), "schedule_time")
		assert.Contains(t, rej.Error(), testQueue)
		assert.Less(t, len(rej.Error()), 350)
		assert.NotContains(t, rej.Error(), "SECRET")
		assert.Equal(t, []string{"bad:INVALID_ARGUMENT"}, h.failed)
		assert.Equal(t, 1, h.f.count("bad"), "not retried")
	})
}

func TestNamedTaskRetryThatAlreadySucceededIsDeduplicated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"a": {errUnavailable, status.Error(codes.AlreadyExists, "task exists")}})
		h := newHarness(t, f, baseOptions())
		r := namedRequest("a")
		require.NoError(t, h.submit(r))
		require.NoError(t, h.flush())
		assert.Equal(t, []string{"a"}, h.created)
		assert.Equal(t, []string{"a"}, h.dedup)
		assert.Equal(t, []string{"a:UNAVAILABLE"}, h.failed, "ALREADY_EXISTS on a named task is not a failed attempt")
		require.Len(t, f.attempts, 2)
		for _, a := range f.attempts {
			assert.Same(t, r.Create, a.req, "the request is re-sent unchanged")
			assert.Equal(t, testQueue+"/tasks/a", a.req.GetTask().GetName())
		}
		assert.Equal(t, 2, r.Attempts())
	})
}

func TestUnnamedTaskAlreadyExistsIsTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, scripted(map[string][]error{"a": {status.Error(codes.AlreadyExists, "exists")}}), baseOptions())
		require.NoError(t, h.submitID("a"))
		err := h.flush()
		require.Error(t, err)
		assert.Equal(t, codes.AlreadyExists, status.Code(err))
		assert.Empty(t, h.created)
		assert.Equal(t, []string{"a:ALREADY_EXISTS"}, h.failed)
	})
}

func TestErrorWithoutStatusIsTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("connection reset by peer")
		h := newHarness(t, scripted(map[string][]error{"a": {cause}}), baseOptions())
		require.NoError(t, h.submitID("a"))
		err := h.flush()
		require.ErrorIs(t, err, cause)
		assert.Contains(t, err.Error(), "connection reset by peer")
		assert.Contains(t, err.Error(), "no status")
		assert.Equal(t, []string{"a:UNKNOWN"}, h.failed)
		assert.Equal(t, 1, h.f.count("a"))
	})
}

func expiring(id string, deadline time.Time) *Request[string] {
	r := newRequest(id)
	r.Deadline = deadline
	return r
}

func TestExpiredRequestBeforeTheFirstSend(t *testing.T) {
	cases := []struct {
		action  ExpiredAction
		sent    bool
		created []string
		wantErr bool
	}{
		{action: ExpiredFail, wantErr: true},
		{action: ExpiredAssumeCreated, created: []string{"a"}},
		{action: ExpiredSend, sent: true, created: []string{"a"}},
		{action: ExpiredDrop},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.action), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, scripted(nil), baseOptions())
				h.expire = func(*Request[string]) (ExpiredAction, error) { return tc.action, nil }
				err := h.submit(expiring("a", h.start)) // now is not before the deadline
				if tc.wantErr {
					require.Error(t, err)
					assert.Contains(t, err.Error(), testQueue)
					assert.Contains(t, err.Error(), "deadline")
					assert.Same(t, err, h.flush())
				} else {
					require.NoError(t, err)
					require.NoError(t, h.flush())
				}
				assert.Equal(t, []string{"a"}, h.expired)
				assert.Equal(t, tc.sent, h.f.count("a") == 1)
				assert.Equal(t, tc.created, h.created)
				in, parked := h.e.Stats()
				assert.Zero(t, in+parked)
			})
		})
	}
}

func TestExpiredErrorFromTheObserverIsTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		own := errors.New("envelope expired: policy says fail")
		h := newHarness(t, scripted(nil), baseOptions())
		h.expire = func(*Request[string]) (ExpiredAction, error) { return ExpiredSend, own }
		err := h.submit(expiring("a", h.start.Add(-time.Second)))
		assert.ErrorIs(t, err, own)
		assert.Zero(t, h.f.count("a"))
		assert.ErrorIs(t, h.flush(), own)
	})
}

func TestRequestBeforeItsDeadlineIsSentWithoutAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, scripted(map[string][]error{"a": {errUnavailable}}), baseOptions())
		require.NoError(t, h.submit(expiring("a", h.start.Add(150*time.Millisecond))))
		require.NoError(t, h.flush())
		assert.Empty(t, h.expired)
		assert.Equal(t, ms(0, 100), h.f.times("a", h.start), "the retry at 100ms is still before the deadline")
		assert.Equal(t, []string{"a"}, h.created)
	})
}

func TestDeadlinePassingWhileParkedIsCheckedBeforeTheReSend(t *testing.T) {
	cases := []struct {
		action  ExpiredAction
		resent  bool
		created []string
	}{
		{action: ExpiredDrop},
		{action: ExpiredAssumeCreated, created: []string{"a"}},
		{action: ExpiredSend, resent: true, created: []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.action), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, scripted(map[string][]error{"a": {errUnavailable}}), baseOptions())
				h.expire = func(*Request[string]) (ExpiredAction, error) { return tc.action, nil }
				// Sent at 0 before the 50ms deadline; due again at 100ms, after it.
				require.NoError(t, h.submit(expiring("a", h.start.Add(50*time.Millisecond))))
				require.NoError(t, h.flush())
				assert.Equal(t, []string{"a"}, h.expired)
				assert.Equal(t, 100*time.Millisecond, h.expiredAt["a"], "asked when the re-send comes due")
				if tc.resent {
					assert.Equal(t, ms(0, 100), h.f.times("a", h.start))
				} else {
					assert.Equal(t, ms(0), h.f.times("a", h.start))
				}
				assert.Equal(t, tc.created, h.created)
			})
		})
	}
}

func TestDeadlinePassingWhileParkedWithExpiredFailFailsFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, scripted(map[string][]error{"a": {errUnavailable}}), baseOptions())
		require.NoError(t, h.submit(expiring("a", h.start.Add(50*time.Millisecond))))
		err := h.flush()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "1 attempt")
		assert.Equal(t, 1, h.f.count("a"))
	})
}

func TestAttemptTimeoutBoundsTheCreatorContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first attempt hangs until its context ends; the retry succeeds.
		f := newFake(func(id string, n int) (time.Duration, error) {
			if n == 1 {
				return time.Hour, nil
			}
			return 0, nil
		})
		o := baseOptions()
		o.AttemptTimeout = 5 * time.Second
		h := newHarness(t, f, o)
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.flush())
		require.Len(t, f.attempts, 2)
		for _, a := range f.attempts {
			assert.True(t, a.hasDeadline)
			assert.Equal(t, 5*time.Second, a.deadline.Sub(a.at))
		}
		assert.Equal(t, []string{"a:DEADLINE_EXCEEDED"}, h.failed, "a bare context.DeadlineExceeded is transient")
		assert.Equal(t, ms(0, 5100), f.times("a", h.start))
		assert.Equal(t, []string{"a"}, h.created)
	})
}

func TestNoAttemptTimeoutLeavesTheContextWithoutDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, scripted(nil), baseOptions())
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.flush())
		require.Len(t, h.f.attempts, 1)
		assert.False(t, h.f.attempts[0].hasDeadline)
	})
}

func TestObserverIsCalledOnlyInsideSubmitAndFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) {
			switch {
			case id == "invalid":
				return time.Millisecond, status.Error(codes.InvalidArgument, "bad url")
			case id == "retry" && n == 1:
				return time.Millisecond, errUnavailable
			}
			return time.Millisecond, nil
		})
		h := newHarness(t, f, baseOptions())
		require.NoError(t, h.submitID("ok"))
		require.NoError(t, h.submitID("invalid"))
		require.NoError(t, h.submitID("retry"))
		// Every first attempt has completed, but nothing may be reported
		// until the caller next enters the engine.
		time.Sleep(time.Second)
		assert.Empty(t, h.created)
		assert.Empty(t, h.failed)
		assert.Empty(t, h.rejected)
		require.NoError(t, h.submitID("late"))
		assert.ElementsMatch(t, []string{"invalid:INVALID_ARGUMENT", "retry:UNAVAILABLE"}, h.failed)
		require.NoError(t, h.flush())
		assert.ElementsMatch(t, []string{"ok", "retry", "late"}, h.created)
		assert.Contains(t, h.rejected, "invalid")
	})
}

func TestSubmitReturnsContextErrorWhenCanceledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) { return time.Minute, nil })
		o := baseOptions()
		o.MaxInFlight = 1
		h := newHarness(t, f, o)
		require.NoError(t, h.submitID("a"))

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := h.e.Submit(ctx, newRequest("b"))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(h.start))
		assert.Zero(t, f.count("b"), "b was not sent")
		assert.NoError(t, h.e.Err(), "a canceled wait is not a terminal engine error")

		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
		defer cancel2()
		assert.ErrorIs(t, h.e.Flush(ctx2), context.DeadlineExceeded)
		require.NoError(t, h.flush(), "a later Flush finishes the work")
		assert.Equal(t, []string{"a"}, h.created)
		assert.Equal(t, time.Minute, time.Since(h.start))
	})
}

func TestAbandonedEngineLeavesNoBlockedGoroutine(t *testing.T) {
	// synctest.Test fails if a goroutine of the bubble is still blocked when
	// the test function returns: the attempts of an engine nobody drains must
	// finish on their own.
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) { return 10 * time.Millisecond, errUnavailable })
		o := baseOptions()
		o.MaxInFlight = 5
		e := New[string](f, o, nil)
		for i := range 5 {
			require.NoError(t, e.Submit(context.Background(), newRequest(fmt.Sprint(i))))
		}
		second := New[string](f, o, nil)
		require.NoError(t, second.Flush(context.Background()), "a new engine sees nothing of the old one")
		// Let every attempt finish; each must be able to post its result
		// and exit although nobody reads it.
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, 5, f.total())
		in, _ := e.Stats()
		assert.Equal(t, 5, in, "the abandoned engine still counts them: nobody drained it")
	})
}

func TestSubmitRejectsARequestWithoutCreate(t *testing.T) {
	e := New[string](scripted(nil), baseOptions(), nil)
	assert.Error(t, e.Submit(context.Background(), nil))
	assert.Error(t, e.Submit(context.Background(), &Request[string]{}))
	assert.NoError(t, e.Err())
}

func TestNewPanicsNamingTheBadOption(t *testing.T) {
	cases := map[string]func(o *Options){
		"Options.MaxInFlight":           func(o *Options) { o.MaxInFlight = 0 },
		"Options.Transient.Initial":     func(o *Options) { o.Transient.Initial = 0 },
		"Options.Transient.Max":         func(o *Options) { o.Transient.Max = o.Transient.Initial - 1 },
		"Options.NotFound.MaxAttempts":  func(o *Options) { o.NotFound.MaxAttempts = 0 },
		"Options.AttemptTimeout":        func(o *Options) { o.AttemptTimeout = -1 },
		"Options.Transient.MaxAttempts": func(o *Options) { o.Transient.MaxAttempts = -3 },
	}
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			o := baseOptions()
			mutate(&o)
			defer func() {
				r := recover()
				require.NotNil(t, r)
				assert.Contains(t, fmt.Sprint(r), field)
			}()
			New[string](scripted(nil), o, nil)
		})
	}
}

func TestNilObserverFailsExpiredRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(nil)
		e := New[string](f, baseOptions(), nil)
		r := expiring("a", time.Now())
		err := e.Submit(context.Background(), r)
		require.Error(t, err)
		assert.Zero(t, f.count("a"))
	})
}

// outcomesOnly is an Observer and nothing more: no Expirer, no FailureObserver.
type outcomesOnly struct{ created, attemptsFailed []string }

func (o *outcomesOnly) Created(_ context.Context, r *Request[string], _ bool) {
	o.created = append(o.created, r.Tag)
}
func (o *outcomesOnly) Rejected(context.Context, *Request[string], error) error { return nil }
func (o *outcomesOnly) AttemptFailed(_ context.Context, r *Request[string], code string) {
	o.attemptsFailed = append(o.attemptsFailed, r.Tag+":"+code)
}

func TestAnObserverWithoutTheOptionalPartsFailsExpiriesAndStillHearsOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := scripted(map[string][]error{"c": {status.Error(codes.PermissionDenied, "no")}})
		obs := &outcomesOnly{}
		e := New[string](f, baseOptions(), obs)
		require.NoError(t, e.Submit(context.Background(), newRequest("a")))
		require.NoError(t, e.Flush(context.Background()))
		assert.Equal(t, []string{"a"}, obs.created)

		err := e.Submit(context.Background(), expiring("b", time.Now()))
		require.Error(t, err, "without an Expirer an expiry is terminal")
		assert.Contains(t, err.Error(), "deadline")
		assert.Zero(t, f.count("b"), "an expired request is not sent")

		second := New[string](f, baseOptions(), obs)
		require.NoError(t, second.Submit(context.Background(), newRequest("c")))
		err = second.Flush(context.Background())
		require.Error(t, err, "a terminal failure without a FailureObserver still fails the engine")
		assert.Equal(t, []string{"c:PERMISSION_DENIED"}, obs.attemptsFailed)
	})
}

// BenchmarkEngine measures creates per second against a creator that answers
// after a fixed real-time latency, so the engine's own overhead shows as the
// gap to MaxInFlight/latency.
func BenchmarkEngine(b *testing.B) {
	const latency = time.Millisecond
	for _, cap := range []int{100, 1000} {
		b.Run(fmt.Sprintf("MaxInFlight=%d", cap), func(b *testing.B) {
			creator := CreatorFunc(func(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) (*cloudtaskspb.Task, error) {
				time.Sleep(latency)
				return req.GetTask(), nil
			})
			o := baseOptions()
			o.MaxInFlight = cap
			e := New[string](creator, o, nil)
			reqs := make([]Request[string], b.N)
			create := newRequest("bench").Create
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := range reqs {
				reqs[i].Create = create
				if err := e.Submit(ctx, &reqs[i]); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
			b.ReportMetric(float64(cap)/latency.Seconds(), "ideal-creates/s")
		})
	}
}

func TestATypedNilErrorFromTheCreatorFailsWithoutPanicking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var typedNil *apierror.APIError
		// Both answers take a millisecond, so that "b" is submitted before "a" fails the engine:
		// answered at once, "a" could fail it first (a goroutine's turn), and submitting "b"
		// would return a's error.
		f := newFake(func(id string, _ int) (time.Duration, error) {
			if id == "a" {
				return time.Millisecond, typedNil
			}
			return time.Millisecond, &layered{codes.InvalidArgument, typedNil}
		})
		h := newHarness(t, f, baseOptions())
		require.NoError(t, h.submitID("a"))
		require.NoError(t, h.submitID("b"))
		var err error
		require.NotPanics(t, func() { err = h.flush() })
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not retryable")
		assert.Empty(t, h.rejected, "an unreadable chain is never handed to the failure policy")
	})
}

func TestAttemptLatencyIsTheCallAloneForEveryReportedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unavailable := status.Error(codes.Unavailable, "try again")
		f := newFake(func(id string, n int) (time.Duration, error) {
			switch {
			case id == "retried" && n == 1:
				return 30 * time.Millisecond, unavailable
			case id == "retried":
				return 50 * time.Millisecond, nil
			case id == "named":
				return 20 * time.Millisecond, status.Error(codes.AlreadyExists, "there")
			}
			return 70 * time.Millisecond, nil
		})
		h := newHarness(t, f, baseOptions()) // 100ms backoff after the first failure
		require.NoError(t, h.submitID("retried"))
		require.NoError(t, h.submit(namedRequest("named")))
		require.NoError(t, h.submitID("plain"))
		require.NoError(t, h.flush())
		assert.Equal(t, ms(30, 50), h.latencies["retried"], "each attempt's own call; the 100ms backoff between is not in it")
		assert.Equal(t, ms(20), h.latencies["named"], "a deduplicated attempt is an attempt")
		assert.Equal(t, ms(70), h.latencies["plain"])
		assert.Equal(t, []string{"latency:named", "created:named", "latency:retried", "failed:retried", "latency:plain", "created:plain",
			"latency:retried", "created:retried"}, h.outcomes, "the latency comes just before its attempt's outcome")
	})
}

func TestAttemptLatencyLeavesOutAttemptsTheEngineCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(func(id string, n int) (time.Duration, error) {
			if id == "slow" {
				return time.Hour, nil
			}
			return 10 * time.Millisecond, status.Error(codes.PermissionDenied, "no")
		})
		h := newHarness(t, f, baseOptions())
		require.NoError(t, h.submitID("slow"))
		require.NoError(t, h.submitID("denied"))
		require.Error(t, h.flush(), "PERMISSION_DENIED fails the engine and cancels the slow attempt")
		assert.Equal(t, ms(10), h.latencies["denied"])
		assert.Empty(t, h.latencies["slow"], "a call the engine cancelled measures the cancellation, not the service")
	})
}
