// Package quickstart is the program behind examples/quickstart, kept as a library so that the
// integration tests run exactly what the example runs.
//
// It starts an in-memory Cloud Tasks server (cloudtaskstest) with one queue limited to a
// modest dispatch rate, and a local HTTP handler that plays the rate-limited endpoint. A Beam
// pipeline generates orders and writes one named task per order with cloudtasksio.Write. The
// pipeline creates the tasks as fast as the server accepts them; the queue then delivers them
// to the handler no faster than its limit. Run waits for every delivery and returns the
// numbers that show the difference.
package quickstart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/examples/progress"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Order)(nil)).Elem())
	register.Function3x0(generateOrders)
	register.Emitter1[Order]()
	register.Function2x0(countDeadLetter)
}

// Defaults of Options.
const (
	DefaultOrders        = 3000
	DefaultRate          = 200
	DefaultCreateLatency = 20 * time.Millisecond
)

// Where the example's queue lives. The names only matter inside the in-memory server.
const (
	project  = "quickstart"
	location = "local"
	queueID  = "orders"
)

// metricsNamespace holds the example's own counters, next to the sink's "cloudtasksio".
const metricsNamespace = "quickstart"

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
	// Progress receives progress while the run goes on; nil shows none.
	Progress io.Writer
	// ProgressBar redraws one line in place (use it when Progress is a terminal); otherwise
	// a plain line is written every second.
	ProgressBar bool
	// ProgressWidth is the terminal width for the bar; 0 means 80.
	ProgressWidth int
	// Run executes the pipeline and returns its result, whose metrics fill the summary:
	// beamx.RunWithMetrics in a program, ptest.RunWithMetrics in a test. Required.
	Run func(context.Context, *beam.Pipeline) (beam.PipelineResult, error)
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
	case o.Run == nil:
		return o, errors.New("quickstart: Options.Run is required")
	}
	return o, nil
}

// Summary is what one run measured.
type Summary struct {
	// Queue is the full name of the queue the tasks went to.
	Queue string
	// Orders is the number of orders the pipeline generated (its own counter).
	Orders int64
	// Sent, Deduplicated, Skipped and SendErrors are the sink's metrics numRecordsSend,
	// tasksDeduplicated, recordsSkipped and numRecordsSendErrors.
	Sent, Deduplicated, Skipped, SendErrors int64
	// DeadLetters is the number of elements in the PCollection Write returned.
	DeadLetters int64

	// TasksCreated is the number of tasks the server stored.
	TasksCreated int
	// FirstCreate and LastCreate are when the server received the first and the last create.
	FirstCreate, LastCreate time.Time
	// CreateLatency is the latency the server added to each create.
	CreateLatency time.Duration
	// PipelineElapsed is the wall time of the whole pipeline run, runner start-up included.
	PipelineElapsed time.Duration

	// Delivered is the number of requests the handler received; DistinctDelivered the number
	// of distinct task names among them.
	Delivered, DistinctDelivered int
	// FirstDelivery and LastDelivery are when the handler received the first and the last
	// request.
	FirstDelivery, LastDelivery time.Time
	// SteadyRate is the delivery rate over the later half of the delivery time, when the
	// queue's initial burst is long spent: the pace the queue holds (0 when too few
	// deliveries to measure, or when the burst alone covered them all).
	SteadyRate float64

	// Rate, Burst and MaxConcurrent are the queue's rate limits as the server reports them.
	Rate          float64
	Burst         int
	MaxConcurrent int
}

// CreateElapsed is the time from the first create the server received to the last.
func (s Summary) CreateElapsed() time.Duration { return s.LastCreate.Sub(s.FirstCreate) }

// DeliveryElapsed is the time from the first delivery to the last.
func (s Summary) DeliveryElapsed() time.Duration { return s.LastDelivery.Sub(s.FirstDelivery) }

// CreatesPerSecond is TasksCreated over CreateElapsed (0 when too short to measure).
func (s Summary) CreatesPerSecond() float64 { return perSecond(s.TasksCreated, s.CreateElapsed()) }

// DeliveredPerSecond is Delivered over DeliveryElapsed (0 when too short to measure). It
// includes the initial burst, so it reads a little above Rate on short runs.
func (s Summary) DeliveredPerSecond() float64 { return perSecond(s.Delivered, s.DeliveryElapsed()) }

func perSecond(n int, d time.Duration) float64 {
	if n <= 0 || d < time.Millisecond {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Print writes the summary for a reader who has just watched the run.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\nQueue %s: at most %g dispatches/s (burst %d, %d concurrent)\n\n", s.Queue, s.Rate, s.Burst, s.MaxConcurrent)
	fmt.Fprintf(w, "Pipeline (Beam metrics)\n")
	fmt.Fprintf(w, "  orders generated        %8d\n", s.Orders)
	fmt.Fprintf(w, "  tasks accepted          %8d   cloudtasksio numRecordsSend\n", s.Sent)
	fmt.Fprintf(w, "  deduplicated            %8d   tasksDeduplicated (named task already there)\n", s.Deduplicated)
	fmt.Fprintf(w, "  skipped                 %8d   recordsSkipped\n", s.Skipped)
	fmt.Fprintf(w, "  dead letters            %8d   failed elements returned by Write\n", s.DeadLetters)
	fmt.Fprintf(w, "  pipeline run            %8.2fs  runner start-up included\n\n", s.PipelineElapsed.Seconds())
	latency := "no latency added"
	if s.CreateLatency > 0 {
		latency = fmt.Sprintf("%v added to every create", s.CreateLatency)
	}
	fmt.Fprintf(w, "Creation  %6d tasks      in %6.2fs  %8.0f creates/s   (%s)\n",
		s.TasksCreated, s.CreateElapsed().Seconds(), s.CreatesPerSecond(), latency)
	steady := ""
	if s.SteadyRate > 0 {
		steady = fmt.Sprintf(" (%.0f/s in the second half, the burst of %d long spent)", s.SteadyRate, s.Burst)
	}
	fmt.Fprintf(w, "Delivery  %6d requests   in %6.2fs  %8.0f delivered/s%s\n",
		s.Delivered, s.DeliveryElapsed().Seconds(), s.DeliveredPerSecond(), steady)
	fmt.Fprintf(w, "          %6d distinct tasks, %d duplicate deliveries\n\n", s.DistinctDelivered, s.Delivered-s.DistinctDelivered)
	if s.Delivered <= s.Burst {
		fmt.Fprintf(w, "All %d deliveries fit in the queue's burst of %d, so none had to wait; run more orders to see the pacing.\n", s.Delivered, s.Burst)
	} else if c := s.CreatesPerSecond(); c > 0 && s.Rate > 0 {
		fmt.Fprintf(w, "The sink created tasks %.0fx faster than the queue's limit; the queue held delivery to %g/s.\n", c/s.Rate, s.Rate)
	}
}

// Order is one generated order: its JSON body fields, and Key, the task-id metadata that names
// its task so that a replayed order is deduplicated by Cloud Tasks.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
	// TotalCents is the order total in cents.
	TotalCents int64 `json:"total_cents"`

	Key string `cloudtasks:"task-id"`
}

var (
	customers = []string{"ada", "grace", "alan", "edsger", "barbara", "ken", "margaret", "dennis"}
	items     = []string{"keyboard", "monitor", "cable", "lamp", "chair", "desk", "headset"}
)

// generateOrders emits n deterministic orders, counting them.
func generateOrders(ctx context.Context, n int, emit func(Order)) {
	generated := beam.NewCounter(metricsNamespace, "orders")
	for i := range n {
		id := fmt.Sprintf("%06d", i+1)
		emit(Order{
			ID:         id,
			Customer:   customers[i%len(customers)],
			Item:       items[(i*7)%len(items)],
			Quantity:   1 + i%5,
			TotalCents: int64(499 + (i*389)%20000),
			Key:        "order-" + id,
		})
	}
	generated.Inc(ctx, int64(n))
}

// countDeadLetter counts the elements of the sink's dead-letter output.
func countDeadLetter(ctx context.Context, _ deadletter.FailedElement) {
	beam.NewCounter(metricsNamespace, "deadLetters").Inc(ctx, 1)
}

// Pipeline builds the example's pipeline: n generated orders written to queue as JSON tasks
// for url, with failed elements counted as dead letters.
func Pipeline(n int, queue cloudtasksio.Queue, url, emulator string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	orders := beam.ParDo(s, generateOrders, beam.Create(s, n))
	deadLetters := cloudtasksio.Write(s, cloudtasksio.Config{
		Queue: queue,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:     url,
			Headers: map[string]string{"Content-Type": "application/json"},
			Body:    formats.JSON(),
		},
		OnFailure:        cloudtasksio.DeadLetter,
		EmulatorEndpoint: emulator,
	}, orders)
	beam.ParDo0(s, countDeadLetter, deadLetters)
	return p
}

// Run runs the example: it starts the server and the handler, creates the queue, runs the
// pipeline, waits until the queue has delivered every task it created, and returns the
// summary. It fails when the pipeline fails or when delivery takes much longer than the
// queue's rate allows.
func Run(ctx context.Context, opts Options) (Summary, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Summary{}, err
	}

	recv := &receiver{}
	handler, err := serve(recv)
	if err != nil {
		return Summary{}, err
	}
	defer handler.Close()

	srv := cloudtaskstest.NewServer()
	defer srv.Close()
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

	queue, err := createQueue(ctx, srv, opts.Rate)
	if err != nil {
		return Summary{}, err
	}
	q, err := cloudtasksio.ParseQueue(queue.GetName())
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{
		Queue:         queue.GetName(),
		CreateLatency: max(opts.CreateLatency, 0),
		Rate:          queue.GetRateLimits().GetMaxDispatchesPerSecond(),
		Burst:         int(queue.GetRateLimits().GetMaxBurstSize()),
		MaxConcurrent: int(queue.GetRateLimits().GetMaxConcurrentDispatches()),
	}

	stopProgress := func() {}
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "Writing %d orders as Cloud Tasks into %s, limited to %g dispatches/s (burst %d).\n\n",
			opts.Orders, sum.Queue, sum.Rate, sum.Burst)
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		rep := &progress.Reporter{Out: opts.Progress, Total: opts.Orders, Bar: opts.ProgressBar, Width: opts.ProgressWidth,
			Sample: func() progress.Counts {
				return progress.Counts{Created: srv.Stats().TasksCreated, Delivered: recv.count()}
			}}
		go func() { rep.Run(pctx); close(done) }()
		stopProgress = func() { cancel(); <-done }
	}
	defer func() { stopProgress() }()

	start := time.Now()
	pr, err := opts.Run(ctx, Pipeline(opts.Orders, q, handler.URL+"/orders", srv.Addr))
	sum.PipelineElapsed = time.Since(start)
	if err != nil {
		return Summary{}, fmt.Errorf("quickstart: pipeline failed: %w", err)
	}
	readMetrics(pr, &sum)

	// Creation is over; the queue keeps delivering at its pace. Allow twice the time the rate
	// needs, plus slack, before calling it stuck.
	created := srv.Stats().TasksCreated
	need := time.Duration(float64(max(created-sum.Burst, 0)) / sum.Rate * float64(time.Second))
	if err := waitDelivered(ctx, srv, created, 2*need+30*time.Second); err != nil {
		return Summary{}, err
	}
	stopProgress()
	stopProgress = func() {}

	sum.TasksCreated = created
	sum.FirstCreate, sum.LastCreate = creates.bounds()
	sum.Delivered, sum.DistinctDelivered, sum.FirstDelivery, sum.LastDelivery, sum.SteadyRate = recv.totals()
	if sum.Delivered <= sum.Burst {
		sum.SteadyRate = 0 // the burst alone covered every delivery: nothing was paced
	}
	return sum, nil
}

// createQueue creates the example's queue through the Cloud Tasks API, as a user would, and
// returns it as the server reports it (with the burst it derived).
func createQueue(ctx context.Context, srv *cloudtaskstest.Server, rate float64) (*cloudtaskspb.Queue, error) {
	client, err := cloudtasks.NewClient(ctx, srv.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("quickstart: connecting to the in-memory server: %w", err)
	}
	defer client.Close()
	q, err := client.CreateQueue(ctx, &cloudtaskspb.CreateQueueRequest{
		Parent: "projects/" + project + "/locations/" + location,
		Queue: &cloudtaskspb.Queue{
			Name:       "projects/" + project + "/locations/" + location + "/queues/" + queueID,
			RateLimits: &cloudtaskspb.RateLimits{MaxDispatchesPerSecond: rate},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("quickstart: creating the queue: %w", err)
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

func readMetrics(pr beam.PipelineResult, sum *Summary) {
	if pr == nil {
		return
	}
	res := pr.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == "cloudtasksio" || r.Namespace() == metricsNamespace
	})
	for _, c := range res.Counters() {
		v := c.Result()
		switch c.Namespace() + "/" + c.Name() {
		case "cloudtasksio/numRecordsSend":
			sum.Sent += v
		case "cloudtasksio/tasksDeduplicated":
			sum.Deduplicated += v
		case "cloudtasksio/recordsSkipped":
			sum.Skipped += v
		case "cloudtasksio/numRecordsSendErrors":
			sum.SendErrors += v
		case metricsNamespace + "/orders":
			sum.Orders += v
		case metricsNamespace + "/deadLetters":
			sum.DeadLetters += v
		}
	}
}

// span tracks the first and last of a series of instants.
type span struct {
	mu          sync.Mutex
	first, last time.Time
}

func (s *span) mark(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first.IsZero() {
		s.first = t
	}
	s.last = t
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

// localServer is an HTTP server on a loopback port.
type localServer struct {
	URL string
	srv *http.Server
}

func (l *localServer) Close() { l.srv.Close() }

func serve(h http.Handler) (*localServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("quickstart: starting the local handler: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &localServer{URL: "http://" + ln.Addr().String(), srv: srv}, nil
}
