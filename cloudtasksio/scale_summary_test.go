//go:build linux

package cloudtasksio

import (
	"math"
	"slices"
	"strings"
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
	if r.HeldNet != r.HeldShare {
		t.Errorf("without a bucket, HeldNet = %v, want HeldShare %v", r.HeldNet, r.HeldShare)
	}
	// A bucket of 101 tokens: 100 of the tasks after the first came from it, not from the rate.
	c.Burst = 101
	if want := 1900 / 2.0 / 1000; math.Abs(summarizeScale(c, rs).HeldNet-want) > 1e-9 {
		t.Errorf("HeldNet = %v, want %v (the bucket's head start left out)", summarizeScale(c, rs).HeldNet, want)
	}
	// Several queues: each bucket gives its head start, and no net share is read.
	c.Queues = 4
	if r := summarizeScale(c, rs); !math.IsNaN(r.HeldNet) {
		t.Errorf("with 4 queues, HeldNet = %v, want NaN", r.HeldNet)
	}
	c.Burst, c.Queues = 0, 1
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
	if r := summarizeScale(c, rs); t90(c, r.T90) != "-" {
		t.Errorf("without a quota: T90 %v reads %q, want -", r.T90, t90(c, r.T90))
	}
	if c.Quota = 1000; t90(c, scaleNever) != "never" {
		t.Errorf("a T90 never reached reads %q, want never", t90(c, scaleNever))
	}
	c.Quota = 1000
	one := []scaleWorkerResult{{Created: 1, FirstCreated: time.Second, LastCreated: time.Second, Duration: 2 * time.Second}}
	if r := summarizeScale(c, one); !math.IsNaN(r.HeldShare) {
		t.Errorf("one task: HeldShare %v, want NaN", r.HeldShare)
	}
}

// Equal parts cover every task once, differ by one task at most between instances and between
// workers, and each is cut into as few bundles as hold it, of sizes that differ by one at most.
func TestScaleEqualPartsAreEqualAndWhole(t *testing.T) {
	for _, c := range []scaleCase{
		{Procs: 8, Instances: 16, Tasks: 2500},
		{Procs: 8, Instances: 16, Tasks: 20000},
		{Procs: 1, Instances: 1, Tasks: 20000},
		{Procs: 4, Instances: 64, Tasks: 100},
		{Procs: 2, Instances: 3, Tasks: 1001},
	} {
		seen := make([]int, c.Tasks)
		var perWorker []int
		for w := range c.Procs {
			cfg := scaleWorkerConfig{Worker: w, Workers: c.Procs, Instances: c.Instances, Tasks: c.Tasks, Bundle: c.bundle()}
			total := 0
			for i := range c.Instances {
				next := scaleEqualPart(cfg, i)
				var sizes []int
				part := 0
				for {
					first, n, err := next()
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						break
					}
					if n > cfg.Bundle {
						t.Fatalf("%v: worker %d instance %d: a bundle of %d, above %d", c, w, i, n, cfg.Bundle)
					}
					for id := first; id < first+n; id++ {
						seen[id]++
					}
					sizes = append(sizes, n)
					part += n
				}
				// At most scaleMaxBundle tasks to a bundle, and no more bundles than that needs:
				// a part of 20 tasks is one bundle, not 19 and a last one a flush later.
				if want := (part + scaleMaxBundle - 1) / scaleMaxBundle; len(sizes) != want {
					t.Errorf("%v: worker %d instance %d: %d tasks in %d bundles %v, want %d", c, w, i, part, len(sizes), sizes, want)
				}
				if len(sizes) > 0 && slicesSpread(sizes) > 1 {
					t.Errorf("%v: worker %d instance %d: bundle sizes %v differ by more than one", c, w, i, sizes)
				}
				if lo, hi := c.Tasks/(c.Procs*c.Instances), (c.Tasks+c.Procs*c.Instances-1)/(c.Procs*c.Instances); part < lo || part > hi {
					t.Errorf("%v: worker %d instance %d: a part of %d, want %d to %d", c, w, i, part, lo, hi)
				}
				total += part
			}
			perWorker = append(perWorker, total)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("%v: task %d written %d times", c, id, n)
			}
		}
		if slicesSpread(perWorker) > 1 {
			t.Errorf("%v: workers' parts %v differ by more than one", c, perWorker)
		}
	}
}

// slicesSpread is the largest of s less its smallest.
func slicesSpread(s []int) int { return slices.Max(s) - slices.Min(s) }

// The sporadic set runs every case with adaptive concurrency off, then on, in one worker
// process without a quota and under a cap, and the on run reads its rate over the off one's.
func TestScaleSporadicCasesComeOffThenOn(t *testing.T) {
	cases := scaleSets()["sporadic"]
	if len(cases) != 20 {
		t.Fatalf("%d sporadic cases, want 20: 2 latencies x (4 shares + a burst) x off and on", len(cases))
	}
	ids := map[string]bool{}
	for i, c := range cases {
		if ids[c.id()] {
			t.Errorf("case %s twice", c.id())
		}
		ids[c.id()] = true
		if want := []string{"off", "on"}[i%2]; c.Adaptive != want {
			t.Errorf("case %d %s: adaptive %q, want %q", i, c.id(), c.Adaptive, want)
		}
		if c.Procs != 1 || c.Quota != 0 || c.Cap <= 0 || c.Refuse < 0 || c.Refuse > 0.10 {
			t.Errorf("case %s: %d processes, quota %v, cap %v, refuse %v", c.id(), c.Procs, c.Quota, c.Cap, c.Refuse)
		}
	}
	for _, id := range []string{
		"sporadic/K=1/M=4/N=12000/Q=1/latency=5ms/adaptive=on",
		"sporadic/K=1/M=4/N=12000/Q=1/latency=5ms/refuse=2%/adaptive=off",
		"sporadic/K=1/M=4/N=1500/Q=1/latency=200ms/refuse=10%/adaptive=on",
		"sporadic/K=1/M=4/N=1500/Q=1/latency=200ms/burst=40@500ms/adaptive=off",
	} {
		if !ids[id] {
			t.Errorf("no case %s", id)
		}
	}

	var tab sporadicTable
	two, five := cases[2], cases[4] // 2% and 5% at 5 ms, off
	if r := tab.record(two, scaleResult{CreatesPerSec: 1000}); !math.IsNaN(r.ratio) {
		t.Errorf("an off run has no ratio, got %v", r.ratio)
	}
	two.Adaptive, five.Adaptive = "on", "on"
	if r := tab.record(two, scaleResult{CreatesPerSec: 900}); math.Abs(r.ratio-0.9) > 1e-9 {
		t.Errorf("on/off = %v, want 0.9", r.ratio)
	}
	if r := tab.record(five, scaleResult{CreatesPerSec: 900, Capped: true}); !math.IsNaN(r.ratio) {
		t.Errorf("an on run without its off run has no ratio, got %v", r.ratio)
	}
	got := tab.table()
	for _, want := range []string{"| 5ms | 2% | 1000 | 900 | 0.90 |", "| 5ms | 5% | - | 900* | - |"} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}
