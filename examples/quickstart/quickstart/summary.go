package quickstart

import (
	"fmt"
	"io"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
)

// Result is what one run measured.
type Result struct {
	// Queue is the full name of the queue the tasks went to.
	Queue string
	// Orders is the number of orders the pipeline generated (its own counter).
	Orders int64
	// Sent, Deduplicated, Skipped and SendErrors are the sink's metrics numRecordsSend,
	// tasksDeduplicated, recordsSkipped and numRecordsSendErrors.
	Sent, Deduplicated, Skipped, SendErrors int64
	// DeadLetters is the number of elements in the PCollection Write returned.
	DeadLetters int64
	// Attempts, AttemptLatency and AttemptsPerTask are the sink's distributions
	// createAttemptLatencyMillis (its count is the number of create attempts) and
	// createAttemptsPerTask.
	Attempts                        int64
	AttemptLatency, AttemptsPerTask metrics.DistributionValue

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

	// Chart is the path of the chart Run wrote (Options.Chart), empty when none.
	Chart string

	// Rate, Burst and MaxConcurrent are the queue's rate limits as the server reports them.
	Rate          float64
	Burst         int
	MaxConcurrent int
}

// CreateElapsed is the time from the first create the server received to the last.
func (s *Result) CreateElapsed() time.Duration { return s.LastCreate.Sub(s.FirstCreate) }

// DeliveryElapsed is the time from the first delivery to the last.
func (s *Result) DeliveryElapsed() time.Duration { return s.LastDelivery.Sub(s.FirstDelivery) }

// CreatesPerSecond is TasksCreated over CreateElapsed (0 when too short to measure).
func (s *Result) CreatesPerSecond() float64 { return perSecond(s.TasksCreated, s.CreateElapsed()) }

// DeliveredPerSecond is Delivered over DeliveryElapsed (0 when too short to measure). It
// includes the initial burst, so it reads a little above Rate on short runs.
func (s *Result) DeliveredPerSecond() float64 { return perSecond(s.Delivered, s.DeliveryElapsed()) }

func perSecond(n int, d time.Duration) float64 {
	if n <= 0 || d < time.Millisecond {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Print writes the summary for a reader who has just watched the run.
func (s *Result) Print(w io.Writer) {
	fmt.Fprintf(w, "\nQueue %s: at most %g dispatches/s (burst %d, %d concurrent)\n\n", s.Queue, s.Rate, s.Burst, s.MaxConcurrent)
	fmt.Fprintf(w, "Pipeline (Beam metrics)\n")
	fmt.Fprintf(w, "  orders generated        %8d\n", s.Orders)
	fmt.Fprintf(w, "  tasks accepted          %8d   cloudtasksio numRecordsSend\n", s.Sent)
	fmt.Fprintf(w, "  deduplicated            %8d   tasksDeduplicated (named task already there)\n", s.Deduplicated)
	fmt.Fprintf(w, "  skipped                 %8d   recordsSkipped\n", s.Skipped)
	fmt.Fprintf(w, "  dead letters            %8d   failed elements returned by Write\n", s.DeadLetters)
	if s.Attempts > 0 {
		fmt.Fprintf(w, "  create attempts         %8d   createAttemptLatencyMillis: mean %.1fms, min %dms, max %dms\n",
			s.Attempts, float64(s.AttemptLatency.Sum)/float64(s.Attempts), s.AttemptLatency.Min, s.AttemptLatency.Max)
	}
	if s.AttemptsPerTask.Count > 0 {
		fmt.Fprintf(w, "  attempts per task       %8.2f   createAttemptsPerTask (mean; max %d)\n",
			float64(s.AttemptsPerTask.Sum)/float64(s.AttemptsPerTask.Count), s.AttemptsPerTask.Max)
	}
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
	if s.Chart != "" {
		fmt.Fprintf(w, "Chart of tasks created and delivered over time: %s\n\n", s.Chart)
	}
	if s.Delivered <= s.Burst {
		fmt.Fprintf(w, "All %d deliveries fit in the queue's burst of %d, so none had to wait; run more orders to see the pacing.\n", s.Delivered, s.Burst)
	} else if c := s.CreatesPerSecond(); c > 0 && s.Rate > 0 {
		fmt.Fprintf(w, "The sink created tasks %.0fx faster than the queue's limit; the queue held delivery to %g/s.\n", c/s.Rate, s.Rate)
	}
}

// readMetrics fills the pipeline's part of res from the run's counters.
func readMetrics(pr beam.PipelineResult, res *Result) {
	sink := exampleenv.Counters(pr, cloudtasksio.MetricsNamespace)
	res.Sent = sink[cloudtasksio.MetricRecordsSend]
	res.Deduplicated = sink[cloudtasksio.MetricTasksDeduplicated]
	res.Skipped = sink[cloudtasksio.MetricRecordsSkipped]
	res.SendErrors = sink[cloudtasksio.MetricRecordsSendErrors]
	dists := exampleenv.Distributions(pr, cloudtasksio.MetricsNamespace)
	res.AttemptLatency = dists[cloudtasksio.MetricCreateAttemptLatencyMillis]
	res.AttemptsPerTask = dists[cloudtasksio.MetricCreateAttemptsPerTask]
	res.Attempts = res.AttemptLatency.Count
	own := exampleenv.Counters(pr, metricsNamespace)
	res.Orders = own["orders"]
	res.DeadLetters = own["deadLetters"]
}
