package cloudtasksio

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// queueHealthWatch is the queue health of one DoFn instance: it starts the reads its bundles'
// queues are due, acts on what the latest read of each found, and sets the gauges. It is not
// safe for concurrent use; the state it shares with the other instances of the process is.
type queueHealthWatch struct {
	interval time.Duration
	mode     QueuePreflight
	client   clientSpec
	perQueue bool // per-queue gauges (PerDestinationMetrics)
	// reader and cache are set when the watch is made, never on first use: the preflight's
	// read goes through the watch on a goroutine of its own while the bundle uses it too.
	reader queueHealthReader                       // the shared clients of client, unless a test set its own
	cache  *gcpconn.Cache[healthKey, *queueHealth] // the process's queueHealths, unless a test set its own

	// seen holds the queues this bundle wrote to, by kind of task, each checked once a bundle.
	seen map[doneKey]*queueHealth
}

// newQueueHealthWatch returns the queue health of a DoFn instance writing with w through
// client, nil when w turns it off.
func newQueueHealthWatch(w WriterOptions, client clientSpec) *queueHealthWatch {
	if w.QueueHealthInterval <= 0 {
		return nil
	}
	return &queueHealthWatch{interval: w.QueueHealthInterval, mode: w.QueuePreflight, client: client, perQueue: w.PerDestinationMetrics,
		reader: apiHealthReader{spec: client}, cache: &queueHealths}
}

// preflightReader (nil-safe) returns the reader the queue preflight reads through, so that its
// read is the queue's first health read; nil keeps the preflight's own.
func (w *queueHealthWatch) preflightReader() queueReader {
	if w == nil || w.mode == PreflightOff {
		return nil
	}
	return preflightHealthReader{w}
}

// preflightHealthReader is the queue preflight's reader with queue health on.
type preflightHealthReader struct{ w *queueHealthWatch }

func (r preflightHealthReader) readQueue(ctx context.Context, queue string) (*cloudtaskspb.Queue, error) {
	h := r.w.entry(queue)
	h.mu.Lock()
	h.started = time.Now()
	h.mu.Unlock()
	return h.read(ctx, r.w.reader, queue, true)
}

// entry returns the process's health of queue.
func (w *queueHealthWatch) entry(queue string) *queueHealth {
	h, _ := w.cache.Get(context.Background(), healthKey{client: w.client, queue: queue}, newQueueHealth) // never fails
	return h
}

// startBundle (nil-safe) forgets the queues of the previous bundle.
func (w *queueHealthWatch) startBundle() {
	if w == nil {
		return
	}
	if len(w.seen) > 64 {
		w.seen = nil // a bundle over many queues leaves no large map behind
	} else {
		clear(w.seen)
	}
}

// check (nil-safe) runs for each create request after the preflight's check; the first request
// of each queue and kind of task in a bundle starts the queue's read when it is due and acts
// on the latest read: under PreflightFail a finding fails the bundle; under PreflightWarn what
// changed since the findings last reported is logged and counted, once per process.
func (w *queueHealthWatch) check(ctx context.Context, req *cloudtaskspb.CreateTaskRequest) error {
	if w == nil {
		return nil
	}
	dk := doneKey{queue: req.GetParent(), sets: setsOf(req.GetTask())}
	if _, ok := w.seen[dk]; ok {
		return nil
	}
	h := w.entry(dk.queue)
	if w.seen == nil {
		w.seen = map[doneKey]*queueHealth{}
	}
	w.seen[dk] = h
	h.startDue(w.reader, dk.queue, w.interval, w.mode != PreflightOff)
	switch w.mode {
	case PreflightFail:
		h.mu.Lock()
		r := h.latest
		h.mu.Unlock()
		if r == nil || r.queue == nil {
			return nil
		}
		if found := findings(r.queue, dk.sets); len(found) > 0 {
			for _, f := range found {
				beam.NewCounter(MetricsNamespace, f.kind.metric()).Inc(ctx, 1)
			}
			return fmt.Errorf("queue health: queue read again at %s (WriterOptions.QueueHealthInterval %v, option key sink.queue-health.interval); "+
				"the bundles writing to it fail until a later read finds it fixed: %w",
				r.at.UTC().Format(time.RFC3339), w.interval, &preflightFindingsError{queue: dk.queue, found: found})
		}
	case PreflightWarn:
		h.reportChanges(ctx, dk.queue, dk.sets)
	}
	return nil
}

// reportChanges logs and counts, under PreflightWarn, the findings of the queue's latest read
// for tasks that set what sets says that were not reported yet, once per process, and logs
// those no longer found. Before any re-read, what was reported is what the preflight found.
func (h *queueHealth) reportChanges(ctx context.Context, queue string, sets taskSets) {
	h.mu.Lock()
	if h.latest == nil || h.latest.queue == nil {
		h.mu.Unlock()
		return
	}
	before, ok := h.reported[sets]
	if !ok {
		before = findingTexts(findings(h.preflightQ, sets))
	}
	found := findings(h.latest.queue, sets)
	now := findingTexts(found)
	if h.reported == nil {
		h.reported = map[taskSets][]string{}
	}
	h.reported[sets] = now
	h.mu.Unlock()
	for _, f := range found {
		if !slices.Contains(before, f.text) {
			warnf(ctx, "queue health: queue %s %s (found by a re-read, WriterOptions.QueueHealthInterval; "+
				"set WriterOptions.QueuePreflight to PreflightFail to fail the bundles writing there instead)", queue, f.text)
			beam.NewCounter(MetricsNamespace, f.kind.metric()).Inc(ctx, 1)
		}
	}
	for _, text := range before {
		if !slices.Contains(now, text) {
			infof(ctx, "queue health: a re-read of queue %s no longer finds that it %s", queue, text)
		}
	}
}

func findingTexts(found []finding) []string {
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.text
	}
	return out
}

// endBundle (nil-safe) counts the reads of the bundle's queues that ended since they were last
// counted and sets the queue gauges from the latest read of each.
func (w *queueHealthWatch) endBundle(ctx context.Context) {
	if w == nil || len(w.seen) == 0 {
		return
	}
	var worst queueGauges
	done := map[*queueHealth]bool{}
	for dk, h := range w.seen {
		if done[h] {
			continue
		}
		done[h] = true
		g, reads, failures := h.report()
		if reads > 0 {
			beam.NewCounter(MetricsNamespace, MetricQueueHealthReads).Inc(ctx, reads)
		}
		if failures > 0 {
			beam.NewCounter(MetricsNamespace, MetricQueueHealthReadErrors).Inc(ctx, failures)
		}
		if !g.read {
			continue
		}
		if w.perQueue {
			g.set(ctx, MetricDestinationQueueState(dk.queue), MetricDestinationQueueTasks(dk.queue), MetricDestinationQueueOldestTaskAgeSeconds(dk.queue))
		}
		worst = worst.worse(g)
	}
	if worst.read {
		worst.set(ctx, MetricQueueState, MetricQueueTasks, MetricQueueOldestTaskAgeSeconds)
	}
}
