package quickstart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/quickstart/progress"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/perfchart"
)

// Defaults of Options.
const (
	DefaultOrders        = 3000
	DefaultRate          = 200
	DefaultCreateLatency = 20 * time.Millisecond
)

// Queue is where the example's tasks go. The names only matter inside the in-memory server.
var Queue = cloudtasksio.Queue{Project: "quickstart", Location: "local", Name: "orders"}

// Options configure one run. The zero value of every field means its default.
type Options struct {
	// Orders is the number of generated orders, one task each. Default DefaultOrders.
	Orders int
	// Rate is the queue's max_dispatches_per_second, in (0, 500]. Default DefaultRate. The
	// server derives the burst from it (the rate rounded up, at most 100).
	Rate float64
	// CreateLatency is the time the server adds to every CreateTask call, standing in for the
	// network round trip to the real service. Default DefaultCreateLatency; negative means
	// none.
	CreateLatency time.Duration
	// ProgressBar redraws one progress line in place (use it when Env.Out is a terminal);
	// otherwise a plain line is written every second.
	ProgressBar bool
	// ProgressWidth is the terminal width for the bar; 0 means 80.
	ProgressWidth int
	// Chart, when set, is the path of a chart of the tasks created and delivered over time
	// that Run writes once every task is delivered: SVG or PNG, by the extension (.svg, .png,
	// any case), in a folder that exists. Another extension, or a folder that does not exist,
	// is an error naming Options.Chart, before anything runs.
	Chart string
}

func (o Options) withDefaults() (Options, error) {
	if o.Orders == 0 {
		o.Orders = DefaultOrders
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.CreateLatency == 0 {
		o.CreateLatency = DefaultCreateLatency
	}
	switch {
	case o.Orders < 0:
		return o, fmt.Errorf("quickstart: orders must be positive, got %d", o.Orders)
	case math.IsNaN(o.Rate) || o.Rate < 0 || o.Rate > 500:
		return o, fmt.Errorf("quickstart: rate must be in (0, 500] dispatches per second (the Cloud Tasks maximum), got %v", o.Rate)
	}
	if err := CheckChart("Options.Chart", o.Chart); err != nil {
		return o, fmt.Errorf("quickstart: %w", err)
	}
	return o, nil
}

// maxDeliveryWait bounds the time Run waits for the queue's deliveries at the rate it set
// (twice this, plus 30 s).
const maxDeliveryWait = 7 * 24 * time.Hour

// Run runs the example against env's in-process server (it adds latency to the server's
// creates, watches them, and waits for its dispatch, so an external emulator does not do):
// it starts the handler, creates the queue, runs the pipeline, shows progress on env.Out
// while the queue delivers every task it created, and prints the result there. It fails when
// the pipeline fails or when delivery takes much longer than the queue's rate allows.
func Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if env.Runner == nil {
		return nil, errors.New("quickstart: Env.Runner is required")
	}
	if env.CloudTasks == nil || !env.CloudTasks.Embedded() {
		return nil, errors.New("quickstart: Env.CloudTasks must be the in-process server (exampleenv.StartCloudTasks(\"\"))")
	}
	srv := env.CloudTasks.Server
	out := env.Output()

	recv := &receiver{}
	handler := httptest.NewServer(recv)
	defer handler.Close()

	if opts.CreateLatency > 0 {
		srv.SetLatency(opts.CreateLatency)
	}
	creates := &span{}
	// The observer sees every create as it is answered, and changes none.
	srv.Observe("CreateTask", func(c cloudtaskstest.Call) {
		if c.Err == nil {
			creates.mark(c.End)
		}
	})

	queue, err := createQueue(ctx, env.CloudTasks, opts.Rate)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Queue:         queue.GetName(),
		CreateLatency: max(opts.CreateLatency, 0),
		Rate:          queue.GetRateLimits().GetMaxDispatchesPerSecond(),
		Burst:         int(queue.GetRateLimits().GetMaxBurstSize()),
		MaxConcurrent: int(queue.GetRateLimits().GetMaxConcurrentDispatches()),
	}

	stopProgress := func() {}
	if env.Out != nil {
		fmt.Fprintf(out, "Writing %d orders as Cloud Tasks into %s, limited to %g dispatches/s (burst %d).\n\n",
			opts.Orders, res.Queue, res.Rate, res.Burst)
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		rep := &progress.Reporter{Out: out, Total: opts.Orders, Bar: opts.ProgressBar, Width: opts.ProgressWidth,
			Sample: func() progress.Counts {
				return progress.Counts{Created: srv.Stats().TasksCreated, Delivered: recv.count()}
			}}
		go func() { rep.Run(pctx); close(done) }()
		stopProgress = func() { cancel(); <-done }
	}
	defer func() { stopProgress() }()

	start := time.Now()
	pr, err := env.Runner(ctx, Pipeline(opts.Orders, Queue, handler.URL+"/orders", env.CloudTasks.Endpoint))
	res.PipelineElapsed = time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("quickstart: pipeline failed: %w", err)
	}
	readMetrics(pr, res)

	// Creation is over; the queue keeps delivering at its pace. Allow twice the time the rate
	// needs, plus slack, before calling it stuck.
	created := srv.Stats().TasksCreated
	// In float seconds, bounded before the conversion: at a tiny rate the time would overflow
	// a Duration and wrap to a short wait.
	need := min(float64(max(created-res.Burst, 0))/res.Rate, maxDeliveryWait.Seconds())
	if err := waitDelivered(ctx, srv, created, time.Duration(2*need*float64(time.Second))+30*time.Second); err != nil {
		return nil, err
	}
	stopProgress()
	stopProgress = func() {}

	res.TasksCreated = created
	res.FirstCreate, res.LastCreate = creates.bounds()
	res.Delivered, res.DistinctDelivered, res.FirstDelivery, res.LastDelivery, res.SteadyRate = recv.totals()
	if res.Delivered <= res.Burst {
		res.SteadyRate = 0 // the burst alone covered every delivery: nothing was paced
	}
	var chartErr error
	if opts.Chart != "" {
		if chartErr = perfchart.Save(opts.Chart, timelineChart(creates.all(), recv.arrivals(), res.Rate)); chartErr == nil {
			res.Chart = opts.Chart
		}
	}
	// The summary of a finished run is printed even when its chart could not be written.
	res.Print(out)
	if chartErr != nil {
		return res, fmt.Errorf("quickstart: writing the chart: %w", chartErr)
	}
	return res, nil
}

// createQueue creates the example's queue through the Cloud Tasks API, as a user would, and
// returns it as the server reports it (with the burst it derived).
func createQueue(ctx context.Context, ct *exampleenv.CloudTasks, rate float64) (*cloudtaskspb.Queue, error) {
	client, err := ct.NewClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("quickstart: %w", err)
	}
	defer client.Close()
	q, err := exampleenv.CreateQueue(ctx, client, Queue, &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: rate})
	if err != nil {
		return nil, fmt.Errorf("quickstart: %w", err)
	}
	return q, nil
}

// waitDelivered waits until the server has dispatched every due task (Server.Wait), for at
// most limit, and checks that each created task was delivered (or given up).
func waitDelivered(ctx context.Context, srv *cloudtaskstest.Server, created int, limit time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := srv.Wait(wctx)
	st := srv.Stats()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("quickstart: stopped with %d of %d tasks delivered: %w", st.TasksSucceeded, created, ctx.Err())
	case err != nil:
		return fmt.Errorf("quickstart: only %d of %d tasks delivered after %v", st.TasksSucceeded, created, limit)
	case st.TasksSucceeded+st.TasksExhausted < created:
		return fmt.Errorf("quickstart: %d of %d tasks delivered; the rest wait for a retry", st.TasksSucceeded, created)
	}
	return nil
}

// span tracks a series of instants, the first and last among them.
type span struct {
	mu          sync.Mutex
	first, last time.Time
	times       []time.Time
}

func (s *span) mark(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first.IsZero() {
		s.first = t
	}
	s.last = t
	s.times = append(s.times, t)
}

// all returns every instant marked so far.
func (s *span) all() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.times)
}

func (s *span) bounds() (first, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, s.last
}

// receiver is the rate-limited endpoint: it accepts orders as JSON and counts deliveries per
// task name.
type receiver struct {
	mu     sync.Mutex
	byTask map[string]int
	times  []time.Time // arrival of each delivery, in order
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var o Order
	if req.Method != http.MethodPost || json.NewDecoder(req.Body).Decode(&o) != nil || o.ID == "" {
		http.Error(w, "want a POST of a JSON order", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	if r.byTask == nil {
		r.byTask = map[string]int{}
	}
	r.byTask[req.Header.Get("X-CloudTasks-TaskName")]++
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// arrivals returns the arrival of each delivery so far.
func (r *receiver) arrivals() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.times)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.times)
}

// totals returns the deliveries, the distinct task names among them, the first and last
// arrival, and the rate over the later half of the time between them.
func (r *receiver) totals() (total, distinct int, first, last time.Time, steady float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.times)
	if n == 0 {
		return 0, 0, time.Time{}, time.Time{}, 0
	}
	first, last = r.times[0], r.times[n-1]
	mid := first.Add(last.Sub(first) / 2)
	i := sort.Search(n, func(i int) bool { return !r.times[i].Before(mid) })
	if n-1-i >= 2 {
		steady = perSecond(n-1-i, last.Sub(r.times[i]))
	}
	return n, len(r.byTask), first, last, steady
}
