// Package appengine is the App Engine example: thumbnail jobs become App Engine tasks whose
// routing comes from the target (service "worker", version "v1") unless a job's
// `cloudtasks:"app-engine-service"` field overrides the service. Cloud Tasks delivers them to
// an HTTP handler in this process, which records the Host header that carries the routing.
//
// The program in examples/appengine runs it; the integration tests call Run directly.
package appengine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

func init() {
	beam.RegisterType(reflect.TypeFor[JobSpec]())
	beam.RegisterType(reflect.TypeFor[Job]())
	register.Function1x1(jobFromSpec)
}

// Queue is the example's queue. It is created running, so that Cloud Tasks dispatches.
var Queue = cloudtasksio.Queue{Project: "demo-project", Location: "us-central1", Name: "thumbnails"}

// RelativeURI is the handler path every task calls.
const RelativeURI = "/tasks/thumbnail"

// FixedRouting is the target's routing: the "worker" service, version "v1".
var FixedRouting = cloudtasksio.AppEngineRouting{Service: "worker", Version: "v1"}

// Job is the element written as a task. ID and Image form the JSON body; Service is routing
// metadata: nil keeps FixedRouting's service, a pointer to a name replaces it, and a pointer
// to "" clears it so that App Engine picks the default service.
type Job struct {
	ID      string  `json:"id"`
	Image   string  `json:"image"`
	Service *string `cloudtasks:"app-engine-service"`
}

// JobSpec describes a Job in plain fields, so that it can go through beam.Create (a pointer
// field is safer made inside the pipeline, by jobFromSpec).
type JobSpec struct {
	ID, Image string
	// OverrideService makes the job carry Service as its app-engine-service field.
	OverrideService bool
	Service         string
}

func jobFromSpec(s JobSpec) Job {
	j := Job{ID: s.ID, Image: s.Image}
	if s.OverrideService {
		service := s.Service
		j.Service = &service
	}
	return j
}

// DemoJobs returns the example's input: jobs that keep the fixed routing, jobs routed to the
// "thumbnails" service, and one that clears the service.
func DemoJobs() []JobSpec {
	return []JobSpec{
		{ID: "job-1", Image: "gs://photos/beach.jpg"},
		{ID: "job-2", Image: "gs://photos/harbour.jpg", OverrideService: true, Service: "thumbnails"},
		{ID: "job-3", Image: "gs://photos/forest.jpg"},
		{ID: "job-4", Image: "gs://photos/summit.jpg", OverrideService: true, Service: "thumbnails"},
		{ID: "job-5", Image: "gs://photos/desert.jpg", OverrideService: true, Service: ""},
	}
}

// Config is the sink configuration of the example.
func Config(cloudTasksEndpoint string) cloudtasksio.Config {
	routing := FixedRouting
	return cloudtasksio.Config{
		Queue: Queue,
		AppEngine: &cloudtasksio.AppEngineTarget{
			RelativeURI: RelativeURI,
			Routing:     &routing,
			Body:        formats.JSON(), // sent as Content-Type: application/json
		},
		EmulatorEndpoint: cloudTasksEndpoint,
	}
}

// Build adds the example's transforms to s.
func Build(s beam.Scope, cloudTasksEndpoint string, jobs []JobSpec) {
	elems := make([]any, len(jobs))
	for i, j := range jobs {
		elems[i] = j
	}
	cloudtasksio.Write(s, Config(cloudTasksEndpoint), beam.ParDo(s, jobFromSpec, beam.Create(s, elems...)))
}

// Delivery is one request the handler received.
type Delivery struct {
	Host, Method, Path string
	// QueueName and TaskName are the X-AppEngine-QueueName and X-AppEngine-TaskName headers.
	QueueName, TaskName string
	// JobID is the id in the JSON body.
	JobID string
}

// Handler is the App Engine application of the example: an HTTP server that records every
// task it receives and answers 200.
type Handler struct {
	srv *http.Server
	url string

	mu         sync.Mutex
	deliveries map[string]Delivery // by task name: execution is at least once
	changed    chan struct{}       // closed and replaced on every new delivery
}

// StartHandler serves the handler on addr ("host:port"; port 0 picks one).
func StartHandler(addr string) (*Handler, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for App Engine tasks on %s: %w", addr, err)
	}
	h := &Handler{url: "http://" + ln.Addr().String(), deliveries: map[string]Delivery{}, changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc(RelativeURI, h.serve)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go h.srv.Serve(ln)
	return h, nil
}

// URL is the handler's base URL, for cloudtaskstest.WithAppEngineURL or an emulator's
// APP_ENGINE_EMULATOR_HOST.
func (h *Handler) URL() string { return h.url }

// Close stops the handler.
func (h *Handler) Close() { h.srv.Close() }

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "the body is not a job", http.StatusBadRequest)
		return
	}
	d := Delivery{
		Host: r.Host, Method: r.Method, Path: r.URL.Path,
		QueueName: r.Header.Get("X-AppEngine-QueueName"), TaskName: r.Header.Get("X-AppEngine-TaskName"),
		JobID: body.ID,
	}
	h.mu.Lock()
	h.deliveries[d.TaskName] = d
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// wait returns the deliveries once n distinct tasks have arrived, or an error when timeout
// passes first.
func (h *Handler) wait(ctx context.Context, n int, timeout time.Duration) ([]Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		h.mu.Lock()
		got, changed := len(h.deliveries), h.changed
		if got >= n {
			out := make([]Delivery, 0, got)
			for _, d := range h.deliveries {
				out = append(out, d)
			}
			h.mu.Unlock()
			slices.SortFunc(out, func(a, b Delivery) int { return cmp.Compare(a.JobID, b.JobID) })
			return out, nil
		}
		h.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("the handler at %s received %d of %d tasks within %v; an external emulator must send App Engine tasks there (APP_ENGINE_EMULATOR_HOST=%s)",
				h.url, got, n, timeout, h.url)
		}
	}
}

// deliveryTimeout bounds the wait for Cloud Tasks to deliver every task.
const deliveryTimeout = 30 * time.Second

// Result is what a run produced.
type Result struct {
	// Deliveries are the requests the handler received, ordered by job id.
	Deliveries []Delivery
	// BaseHost is the host of the handler's URL, which the routing prefixes.
	BaseHost string
	// Counters are the sink's metrics (namespace cloudtasksio), summed over steps.
	Counters map[string]int64

	routing map[string]string // job id -> where its service came from
}

// Options are the input of one run.
type Options struct {
	// Handler is the App Engine application (StartHandler). The Cloud Tasks emulator must
	// send App Engine tasks to Handler.URL().
	Handler *Handler
	// Jobs are written as one task each.
	Jobs []JobSpec
}

// Run creates the queue, runs the pipeline over opts.Jobs with env.Runner, waits until
// opts.Handler has received every task, and prints the deliveries to env.Out.
func Run(ctx context.Context, env exampleenv.Env, opts Options) (*Result, error) {
	h, jobs := opts.Handler, opts.Jobs
	client, err := env.CloudTasks.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	if err := exampleenv.EnsureQueue(ctx, client, Queue, false); err != nil {
		return nil, err
	}
	p, s := beam.NewPipelineWithRoot()
	Build(s, env.CloudTasks.Endpoint, jobs)
	pr, err := env.Runner(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("running the pipeline: %w", err)
	}
	res := &Result{Counters: exampleenv.Counters(pr, cloudtasksio.MetricsNamespace), BaseHost: strings.TrimPrefix(h.URL(), "http://"), routing: map[string]string{}}
	for _, j := range jobs {
		res.routing[j.ID] = routingNote(j)
	}
	if res.Deliveries, err = h.wait(ctx, len(jobs), deliveryTimeout); err != nil {
		return nil, err
	}
	res.Print(env.Output())
	return res, nil
}

// Print writes one line per delivery and explains the Host header.
func (r *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "Created %d App Engine task(s) in %s; the target's routing is service %q, version %q.\n",
		r.Counters[cloudtasksio.MetricRecordsSend], Queue.Path(), FixedRouting.Service, FixedRouting.Version)
	fmt.Fprintf(w, "The handler at http://%s received (Host = [instance.][version.][service.]app host):\n", r.BaseHost)
	width := 0
	for _, d := range r.Deliveries {
		width = max(width, len(d.Host))
	}
	for _, d := range r.Deliveries {
		fmt.Fprintf(w, "  %s %s %s  Host: %-*s  (%s)\n", d.JobID, d.Method, d.Path, width, d.Host, r.routing[d.JobID])
	}
}

// routingNote says where a job's service came from.
func routingNote(j JobSpec) string {
	switch {
	case !j.OverrideService:
		return "app-engine-service nil: the target's routing"
	case j.Service == "":
		return `app-engine-service "": service cleared, App Engine's default service`
	}
	return fmt.Sprintf("app-engine-service %q replaces the service", j.Service)
}
