//go:build linux

package cloudtasksio

import (
	"math"
	"testing"
	"time"
)

// The held share leaves out the round trip before the first task and after the last one, and
// keeps every gap between them, however the processes split the work.
func TestScaleSummaryHeldShare(t *testing.T) {
	c := scaleCase{Procs: 2, Tasks: 2001, Queues: 1, Quota: 1000, Latency: 200 * time.Millisecond}
	rs := []scaleWorkerResult{
		{Created: 1000, FirstCreated: 250 * time.Millisecond, LastCreated: 1200 * time.Millisecond, Duration: 1400 * time.Millisecond},
		{Created: 1001, FirstCreated: 200 * time.Millisecond, LastCreated: 2200 * time.Millisecond, Duration: 2400 * time.Millisecond},
	}
	r := summarizeScale(c, rs)
	if want := 2001 / 2.4 / 1000; math.Abs(r.QuotaShare-want) > 1e-9 {
		t.Errorf("QuotaShare = %v, want %v (the tasks over the wall time)", r.QuotaShare, want)
	}
	if want := 2000 / 2.0 / 1000; math.Abs(r.HeldShare-want) > 1e-9 {
		t.Errorf("HeldShare = %v, want %v (the tasks after the first over 0.2 s to 2.2 s)", r.HeldShare, want)
	}
	if want := 1.4 / 2.4; math.Abs(r.FirstEnd-want) > 1e-9 {
		t.Errorf("FirstEnd = %v, want %v", r.FirstEnd, want)
	}

	// A worker that made no task does not move the span.
	rs = append(rs, scaleWorkerResult{Duration: 2400 * time.Millisecond})
	c.Procs = 3
	if r := summarizeScale(c, rs); math.Abs(r.HeldShare-1) > 1e-9 {
		t.Errorf("with an idle worker, HeldShare = %v, want 1", r.HeldShare)
	}

	// Without a quota there is no share, and one task spans nothing.
	c.Quota = 0
	if r := summarizeScale(c, rs); !math.IsNaN(r.QuotaShare) || !math.IsNaN(r.HeldShare) {
		t.Errorf("without a quota: QuotaShare %v, HeldShare %v, want NaN", r.QuotaShare, r.HeldShare)
	}
	c.Quota = 1000
	one := []scaleWorkerResult{{Created: 1, FirstCreated: time.Second, LastCreated: time.Second, Duration: 2 * time.Second}}
	if r := summarizeScale(c, one); !math.IsNaN(r.HeldShare) {
		t.Errorf("one task: HeldShare %v, want NaN", r.HeldShare)
	}
}
