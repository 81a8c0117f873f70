package cloudtaskstest

import (
	"container/heap"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// How dispatch works
//
// One loop goroutine per server decides what to send. Each pass, under the
// store's mutex, it walks the running queues; for each it refills the
// queue's token bucket (capacity max_burst_size, refilled at
// max_dispatches_per_second), then takes tasks from the queue's due heap
// (ordered by schedule time, then creation) while the earliest one is due, a
// token is available and fewer than max_concurrent_dispatches attempts of the
// queue are in flight. Each taken task is sent by a goroutine of its own; its
// outcome removes the task (2xx, or no attempts left) or puts it back on the
// heap with the retry delay as its new schedule time. The loop then sleeps
// until the earliest moment something can change: the next schedule time or
// the next token, or a wake-up from the store (new task, resumed or updated
// queue) or from a finished attempt.
//
// All waiting goes through the time package and the store's clock, so inside
// a testing/synctest bubble (with a fake transport) the pacing is exact.

// tokenEpsilon absorbs float rounding in the token bucket so that a wake-up
// computed for "one whole token" never finds 0.9999999 tokens.
const tokenEpsilon = 1e-9

// minWait bounds how often the loop can wake for a time-based reason, so a
// clock from WithClock that stands still cannot make it spin.
const minWait = time.Millisecond

// maxWait bounds the loop's sleep for a token. A tiny positive rate (below
// about 1e-10/s) needs longer than a time.Duration holds; the conversion
// would wrap and make the loop wake every minWait forever. Waking once a day
// to find the bucket still short costs nothing.
const maxWait = 24 * time.Hour

// queueDispatch is one queue's dispatch state, guarded by store.mu.
type queueDispatch struct {
	due     dueHeap
	bucket  tokenBucket // starts full on the first pass
	running int
}

// taskDispatch is one task's dispatch state, guarded by store.mu.
type taskDispatch struct {
	removed       bool      // deleted, purged, succeeded or out of attempts
	running       bool      // an attempt is in flight
	gen           uint64    // bumped whenever the task leaves the due heap
	executions    int32     // attempts answered with a non-5xx status
	prevResponse  int       // HTTP status of the previous attempt, 0 if none
	retryReason   string    // why the previous attempt failed
	firstDispatch time.Time // when the first attempt was sent
}

// dispatcher sends due tasks to their targets.
type dispatcher struct {
	st        *store
	stats     *counters
	client    *http.Client
	log       *slog.Logger
	appEngine *url.URL // nil: App Engine tasks are kept, not sent
	anyHost   bool
	auth      *authority
	changed   func()

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	warnOnce sync.Map // message -> struct{}: warnings logged once
}

type dispatchConfig struct {
	transport http.RoundTripper // nil: a fresh http.Transport
	appEngine *url.URL
	anyHost   bool
	log       *slog.Logger
	auth      *authority
	changed   func() // called when an attempt starts and once its outcome is recorded; nil: nothing
}

func newDispatcher(st *store, stats *counters, cfg dispatchConfig) *dispatcher {
	tr := cfg.transport
	if tr == nil {
		tr = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false}
	}
	if cfg.changed == nil {
		cfg.changed = func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &dispatcher{
		st:    st,
		stats: stats,
		client: &http.Client{
			Transport: tr,
			// Cloud Tasks does not follow redirects: a 3xx is the attempt's
			// answer, and not a success.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:       cfg.log,
		appEngine: cfg.appEngine,
		anyHost:   cfg.anyHost,
		auth:      cfg.auth,
		changed:   cfg.changed,
		wake:      make(chan struct{}, 1),
		ctx:       ctx,
		cancel:    cancel,
	}
	return d
}

func (d *dispatcher) start() {
	d.wg.Add(1)
	go d.loop()
}

// close stops the loop, cancels attempts in flight and waits for all of
// them. Attempts start only under the store's mutex after checking d.ctx, so
// cancelling under it guarantees that none starts once close waits.
func (d *dispatcher) close() {
	d.st.mu.Lock()
	d.cancel()
	d.st.mu.Unlock()
	d.wg.Wait()
	if tr, ok := d.client.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

func (d *dispatcher) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) loop() {
	defer d.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		wait, ok := d.pass()
		if ok {
			timer.Reset(max(wait, minWait))
		} else {
			timer.Stop()
		}
		select {
		case <-d.ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// pass starts every attempt that may start now and returns how long to wait
// before the next one may (false: nothing to wait for but a wake-up).
func (d *dispatcher) pass() (time.Duration, bool) {
	st := d.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if d.ctx.Err() != nil {
		return 0, false
	}
	now := st.now()
	var next time.Time
	for _, qs := range st.queues {
		if qs.q.GetState() != cloudtaskspb.Queue_RUNNING {
			continue
		}
		if at := d.fillQueue(qs, now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if next.IsZero() {
		return 0, false
	}
	return next.Sub(now), true
}

// fillQueue starts the queue's due attempts that its limits allow and
// returns when it should be looked at again (zero: on a wake-up).
func (d *dispatcher) fillQueue(qs *queueState, now time.Time) time.Time {
	qd := &qs.disp
	rl := qs.q.GetRateLimits()
	rate := rl.GetMaxDispatchesPerSecond()
	qd.bucket.refill(now, rate, float64(rl.GetMaxBurstSize()))
	for {
		it, ok := qd.top()
		if !ok {
			return time.Time{}
		}
		if it.at.After(now) {
			return it.at
		}
		if qd.running >= int(rl.GetMaxConcurrentDispatches()) {
			return time.Time{} // a finishing attempt wakes the loop
		}
		if !qd.bucket.ready() {
			return now.Add(qd.bucket.untilReady(rate))
		}
		heap.Pop(&qd.due)
		if !d.sendable(it.e) {
			it.e.d.gen++ // stays stored, not dispatched
			continue
		}
		qd.bucket.tokens--
		d.begin(qs, it.e, now)
	}
}

// canSend reports whether the server can send the task at all; sendable
// also logs (once) why not. mu held.
func (d *dispatcher) canSend(e *taskEntry) bool {
	return e.t.GetAppEngineHttpRequest() == nil || d.appEngine != nil
}

// sendable reports whether the server can send the task at all. mu held.
func (d *dispatcher) sendable(e *taskEntry) bool {
	if !d.canSend(e) {
		d.warn("App Engine task kept: no App Engine base URL is configured (WithAppEngineURL, or APP_ENGINE_EMULATOR_HOST for the emulator)")
		return false
	}
	return true
}

func (d *dispatcher) warn(msg string) {
	if _, loaded := d.warnOnce.LoadOrStore(msg, struct{}{}); !loaded {
		d.log.Warn(msg)
	}
}

// begin records the start of an attempt and sends it from a new goroutine.
// mu must be held.
func (d *dispatcher) begin(qs *queueState, e *taskEntry, now time.Time) {
	e.d.running = true
	e.d.gen++
	qs.disp.running++
	t := e.t
	t.DispatchCount++
	ts := timestamppb.New(now.Truncate(time.Microsecond))
	if t.FirstAttempt == nil {
		t.FirstAttempt = &cloudtaskspb.Attempt{DispatchTime: ts}
		e.d.firstDispatch = now
	}
	t.LastAttempt = &cloudtaskspb.Attempt{ScheduleTime: t.GetScheduleTime(), DispatchTime: ts}
	out := d.outgoing(qs, e)
	d.stats.dispatchStarted()
	d.changed()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		res := d.send(out)
		d.finish(qs, e, out, res)
	}()
}

// finish records an attempt's outcome: the task is removed on success or
// when it has no attempts left, else it is scheduled for its retry.
func (d *dispatcher) finish(qs *queueState, e *taskEntry, out *outgoing, res result) {
	st := d.st
	st.mu.Lock()
	now := st.now()
	e.d.running = false
	qs.disp.running--
	t := e.t
	la := t.LastAttempt
	if res.responded() {
		t.ResponseCount++
		la.ResponseTime = timestamppb.New(now.Truncate(time.Microsecond))
	}
	la.ResponseStatus = res.rpcStatus()
	outcome := "retry"
	var retryAt time.Time
	switch {
	case e.d.removed:
		outcome = "gone" // deleted or purged while in flight
	case res.ok():
		st.removeLocked(e, now)
		outcome = "done"
	default:
		if res.responded() && res.code < 500 {
			e.d.executions++
		}
		e.d.prevResponse = res.code
		e.d.retryReason = res.reason()
		rc := effectiveRetry(qs.q.GetRetryConfig(), t.GetRetryConfig())
		if exhausted(rc, t.GetDispatchCount(), now.Sub(e.d.firstDispatch)) {
			st.removeLocked(e, now)
			outcome = "exhausted"
		} else {
			retryAt = now.Add(backoff(rc, t.GetDispatchCount()))
			t.ScheduleTime = timestamppb.New(retryAt.Truncate(time.Microsecond))
			qs.disp.push(e)
		}
	}
	attempts := t.GetDispatchCount()
	// Counted before the store lock is released, as begin counts the start: a
	// Wait that sees the task finished must also see its outcome in Stats.
	d.stats.dispatchEnded(outcome)
	st.mu.Unlock()

	attrs := []any{"queue", shortID(out.queue), "task", shortID(out.task), "attempt", attempts,
		"method", out.method, "url", out.logURL, "result", res.String(), "outcome", outcome}
	if !retryAt.IsZero() {
		attrs = append(attrs, "retry_in", retryAt.Sub(now))
	}
	d.log.Info("dispatch", attrs...)
	d.poke()
	d.changed()
}

// busy reports whether the dispatcher has work now: an attempt in flight,
// or a task it can send due in a running queue. It is false once the
// dispatcher is closed.
func (d *dispatcher) busy() bool {
	st := d.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if d.ctx.Err() != nil {
		return false
	}
	now := st.now()
	for _, e := range st.tasks {
		if e.d.running {
			return true
		}
		if e.queue.q.GetState() == cloudtaskspb.Queue_RUNNING && !e.t.GetScheduleTime().AsTime().After(now) && d.canSend(e) {
			return true
		}
	}
	return false
}

// runNow starts an attempt of the named task immediately, ignoring the
// schedule time, the queue's state and its rate limits (RunTask).
func (d *dispatcher) runNow(_ context.Context, name string, view cloudtaskspb.Task_View) (*cloudtaskspb.Task, error) {
	if _, err := splitTaskName("name", name); err != nil {
		return nil, err
	}
	st := d.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if d.ctx.Err() != nil {
		// The gRPC server does not wait for its handlers on Close.
		return nil, status.Error(codes.Unavailable, "cloudtaskstest: the server is closed")
	}
	e, ok := st.tasks[name]
	if !ok {
		return nil, notFound()
	}
	if e.d.running {
		return nil, status.Error(codes.FailedPrecondition, "the task is already being dispatched")
	}
	if !d.sendable(e) {
		return nil, status.Error(codes.FailedPrecondition, "cloudtaskstest: no App Engine base URL is configured")
	}
	d.begin(e.queue, e, st.now())
	return render(e.t, view), nil
}

// effectiveRetry merges a task-level retry config over the queue's.
func effectiveRetry(queue, task *cloudtaskspb.RetryConfig) *cloudtaskspb.RetryConfig {
	rc := proto.Clone(queue).(*cloudtaskspb.RetryConfig)
	if task == nil {
		return rc
	}
	if task.MaxAttempts != 0 {
		rc.MaxAttempts = task.MaxAttempts
	}
	if task.MaxRetryDuration != nil {
		rc.MaxRetryDuration = task.MaxRetryDuration
	}
	if task.MinBackoff != nil && task.MinBackoff.AsDuration() > 0 {
		rc.MinBackoff = task.MinBackoff
	}
	if task.MaxBackoff != nil && task.MaxBackoff.AsDuration() > 0 {
		rc.MaxBackoff = task.MaxBackoff
	}
	if task.MaxDoublings != 0 {
		rc.MaxDoublings = task.MaxDoublings
	}
	return rc
}

// exhausted reports whether a failed task gets no more attempts: it has had
// max_attempts of them (never, for -1) and max_retry_duration (0: no limit)
// has passed since its first attempt. Both must hold, as in the service.
func exhausted(rc *cloudtaskspb.RetryConfig, attempts int32, sinceFirst time.Duration) bool {
	if rc.GetMaxAttempts() < 0 || attempts < rc.GetMaxAttempts() {
		return false
	}
	limit := rc.GetMaxRetryDuration().AsDuration()
	return limit <= 0 || sinceFirst >= limit
}

// backoff is the delay before the retry that follows the attempts-th attempt:
// min_backoff, doubled after each failure max_doublings times, then growing
// by that last doubled step per failure, never above max_backoff. For 10s,
// 300s and 3 doublings: 10s, 20s, 40s, 80s, 160s, 240s, 300s, 300s, ...
func backoff(rc *cloudtaskspb.RetryConfig, attempts int32) time.Duration {
	minB := rc.GetMinBackoff().AsDuration()
	maxB := rc.GetMaxBackoff().AsDuration()
	k := int64(max(attempts-1, 0))
	dbl := int64(rc.GetMaxDoublings())
	step, mult := k, int64(1) // doublings so far, linear multiplier after them
	if k > dbl {
		step, mult = dbl, k-dbl+1
	}
	if minB <= 0 {
		return 0
	}
	if step >= 62 || minB > maxB>>step {
		return maxB
	}
	w := minB << step
	if w > maxB/time.Duration(mult) {
		return maxB
	}
	return min(w*time.Duration(mult), maxB)
}
