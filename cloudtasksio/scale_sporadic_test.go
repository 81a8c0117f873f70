//go:build linux

package cloudtasksio

// The sporadic set of the scale harness (CLOUDTASKSIO_SCALE=sporadic): refusals that do not
// follow the rate. One worker process of a few DoFn instances writes to one queue without a
// quota, while the emulator refuses a steady share of the creates at random (-create-refuse)
// or a burst of them early in the run (-create-refuse-burst). Each case runs with adaptive
// concurrency off, then on; the on case reports its created rate over the off case's
// (on/off). Its CSV rows have columns of their own, so the set runs apart from the others
// when CLOUDTASKSIO_SCALE_OUT is set.

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sporadicTasks sizes each latency's cases to a few seconds unrefused on a 2-core machine.
var sporadicTasks = map[time.Duration]int{5 * time.Millisecond: 12000, 200 * time.Millisecond: 1500}

// sporadicCap ends a case whose controller collapses: at a hundredth of its unrefused rate a
// case would take minutes.
const sporadicCap = 30 * time.Second

// sporadicCases are the sporadic set: at 5 ms and 200 ms, 0%, 2%, 5% and 10% of the creates
// refused at random and a burst of 40 refused from 500 ms after the first create, each with
// adaptive concurrency off, then on.
func sporadicCases() []scaleCase {
	var cs []scaleCase
	for _, lat := range []time.Duration{5 * time.Millisecond, 200 * time.Millisecond} {
		base := scaleCase{Name: "sporadic", Procs: 1, Instances: 4, Tasks: sporadicTasks[lat], Queues: 1, Latency: lat, Cap: sporadicCap}
		var refusals []scaleCase
		for _, share := range []float64{0, 0.02, 0.05, 0.10} {
			c := base
			c.Refuse = share
			refusals = append(refusals, c)
		}
		burst := base
		burst.RefuseBurst, burst.RefuseAfter = 40, 500*time.Millisecond
		refusals = append(refusals, burst)
		for _, c := range refusals {
			for _, a := range []string{"off", "on"} {
				c.Adaptive = a
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// refusals names what the emulator refuses in c: "none", "2%", "burst 40@500ms".
func (c scaleCase) refusals() string {
	var parts []string
	if c.Refuse > 0 {
		parts = append(parts, fmt.Sprintf("%g%%", 100*c.Refuse))
	}
	if c.RefuseBurst > 0 {
		parts = append(parts, fmt.Sprintf("burst %d@%v", c.RefuseBurst, c.RefuseAfter))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " + ")
}

// sporadicRun is one case of the set and its figures.
type sporadicRun struct {
	c     scaleCase
	r     scaleResult
	ratio float64 // on: created/s over the off case's; NaN for off, or without it
}

// sporadicTable collects the set's runs for its CSV rows and the table at the end.
type sporadicTable struct{ runs []sporadicRun }

// record keeps c's run, with its on/off ratio when c is on and its off case ran before it.
func (t *sporadicTable) record(c scaleCase, r scaleResult) sporadicRun {
	run := sporadicRun{c: c, r: r, ratio: math.NaN()}
	if off, ok := t.find(c, "off"); ok && c.Adaptive == "on" && off.r.CreatesPerSec > 0 {
		run.ratio = r.CreatesPerSec / off.r.CreatesPerSec
	}
	t.runs = append(t.runs, run)
	return run
}

// add records c's run, reports its on/off ratio, and writes its CSV row.
func (t *sporadicTable) add(b *testing.B, c scaleCase, r scaleResult) {
	run := t.record(c, r)
	if !math.IsNaN(run.ratio) {
		b.ReportMetric(run.ratio, "on/off")
	}
	path := os.Getenv(scaleOutEnv)
	if path == "" {
		return
	}
	appendScaleCSV(b, path, []string{"set", "K", "M", "N", "latency_ms", "refuse_share", "refuse_burst", "adaptive", "creates_per_s", "on_off_ratio",
		"rejected_per_task", "server_rejected_per_task", "failed_bundles", "wall_s", "created", "server_created", "capped", "max_rss_mib"},
		[]string{c.Name, strconv.Itoa(c.Procs), strconv.Itoa(c.Instances), strconv.Itoa(c.Tasks), strconv.FormatInt(c.Latency.Milliseconds(), 10),
			fmt.Sprint(c.Refuse), burstText(c), c.Adaptive, f1(r.CreatesPerSec), ratioText(run.ratio),
			f3(r.RejectedPerTask), f3(r.ServerRejectedPerTask), strconv.Itoa(r.FailedBundles), f1(r.Wall.Seconds()),
			strconv.Itoa(r.Created), strconv.Itoa(r.ServerCreated), strconv.FormatBool(r.Capped), f1(r.MaxRSSMiB)})
}

// find returns the run of c's case with adaptive concurrency a.
func (t *sporadicTable) find(c scaleCase, a string) (sporadicRun, bool) {
	c.Adaptive = a
	for _, run := range t.runs {
		if run.c.id() == c.id() {
			return run, true
		}
	}
	return sporadicRun{}, false
}

// print prints the set's runs as a table on stdout. Not in a log: the testing package cuts a
// benchmark's log to ten lines, and prints the log of one with sub-benchmarks only with -test.v.
func (t *sporadicTable) print() {
	if len(t.runs) > 0 {
		fmt.Print(t.table())
	}
}

// table is the set's runs in Markdown, one row per case with its off and on figures.
func (t *sporadicTable) table() string {
	var sb strings.Builder
	sb.WriteString("\nsporadic refusals, adaptive concurrency off and on (* stopped at the cap):\n\n")
	sb.WriteString("| latency | refused | created/s off | created/s on | on/off | rejected/task off | rejected/task on | failed bundles off/on |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|\n")
	cell := func(run sporadicRun, ok bool, f func(sporadicRun) string) string {
		switch {
		case !ok:
			return "-"
		case run.r.Capped:
			return f(run) + "*"
		}
		return f(run)
	}
	for _, run := range t.runs {
		if run.c.Adaptive == "on" {
			if _, ok := t.find(run.c, "off"); ok {
				continue // in its off case's row
			}
		}
		off, okOff := t.find(run.c, "off")
		on, okOn := t.find(run.c, "on")
		rate := func(r sporadicRun) string { return fmt.Sprintf("%.0f", r.r.CreatesPerSec) }
		rej := func(r sporadicRun) string { return f3(r.r.RejectedPerTask) }
		ratio, bundles := "-", "-"
		if okOn {
			ratio = ratioText(on.ratio)
		}
		if okOff && okOn {
			bundles = fmt.Sprintf("%d/%d", off.r.FailedBundles, on.r.FailedBundles)
		}
		fmt.Fprintf(&sb, "| %v | %s | %s | %s | %s | %s | %s | %s |\n", run.c.Latency, run.c.refusals(),
			cell(off, okOff, rate), cell(on, okOn, rate), ratio, cell(off, okOff, rej), cell(on, okOn, rej), bundles)
	}
	return sb.String()
}

func burstText(c scaleCase) string {
	if c.RefuseBurst == 0 {
		return "-"
	}
	return fmt.Sprintf("%d@%v", c.RefuseBurst, c.RefuseAfter)
}

func ratioText(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
