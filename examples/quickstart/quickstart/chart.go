package quickstart

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/perfchart"
)

// chartPoints is about how many samples each series of the chart gets: enough for a smooth
// line, few enough that a run of a million orders still draws a small file.
const chartPoints = 200

// CheckChart checks a chart file path given by name (a flag such as "-chart", or
// "Options.Chart"): empty (no chart), or a path ending in .svg or .png in any case, in a
// folder that exists, so that a run is not made only to find at its end that its chart cannot
// be written. The error names name.
func CheckChart(name, path string) error {
	if path == "" {
		return nil
	}
	if _, err := perfchart.FormatOf(path); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	dir := filepath.Dir(path)
	switch st, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %q: the folder %q does not exist", name, path, dir)
	case err != nil:
		return fmt.Errorf("%s %q: the folder %q cannot be read: %w", name, path, dir, err)
	case !st.IsDir():
		return fmt.Errorf("%s %q: %q is not a folder", name, path, dir)
	}
	return nil
}

// timelineChart draws the run's creates and deliveries over time, in seconds from the first of
// them: the running totals in the upper panel, the rates per second in the lower one. created
// and delivered are the instants of each event, in any order.
func timelineChart(created, delivered []time.Time, rate float64) perfchart.Chart {
	created, delivered = slices.Clone(created), slices.Clone(delivered)
	slices.SortFunc(created, time.Time.Compare)
	slices.SortFunc(delivered, time.Time.Compare)
	start, end := bounds(created, delivered)
	step := max(end.Sub(start)/chartPoints, 10*time.Millisecond)
	n := int(end.Sub(start)/step) + 1

	totals := func(name string, at []time.Time) perfchart.Series {
		s := perfchart.Series{Name: name, Points: []perfchart.Point{{X: 0, Y: 0}}}
		i := 0
		for k := 1; k <= n; k++ {
			edge := start.Add(time.Duration(k) * step)
			for i < len(at) && at[i].Before(edge) {
				i++
			}
			s.Points = append(s.Points, perfchart.Point{X: edge.Sub(start).Seconds(), Y: float64(i)})
		}
		return s
	}
	rates := func(total perfchart.Series) perfchart.Series {
		s := perfchart.Series{Name: total.Name}
		for k := 1; k < len(total.Points); k++ {
			a, b := total.Points[k-1], total.Points[k]
			s.Points = append(s.Points, perfchart.Point{X: b.X, Y: (b.Y - a.Y) / (b.X - a.X)})
		}
		return s
	}
	createdTotal, deliveredTotal := totals("created", created), totals("delivered", delivered)
	limit := perfchart.Series{Name: fmt.Sprintf("queue limit (%g/s)", rate),
		Points: []perfchart.Point{{X: 0, Y: rate}, {X: deliveredTotal.Points[len(deliveredTotal.Points)-1].X, Y: rate}}}
	return perfchart.Chart{Panels: []perfchart.Panel{
		{Title: "Tasks created and delivered", YLabel: "tasks", Series: []perfchart.Series{createdTotal, deliveredTotal}},
		{XLabel: "seconds since the first create", YLabel: "per second", Series: []perfchart.Series{rates(createdTotal), rates(deliveredTotal), limit}},
	}}
}

// bounds returns the earliest and latest instant of either list; both lists are sorted.
func bounds(lists ...[]time.Time) (first, last time.Time) {
	for _, l := range lists {
		if len(l) == 0 {
			continue
		}
		if first.IsZero() || l[0].Before(first) {
			first = l[0]
		}
		if l[len(l)-1].After(last) {
			last = l[len(l)-1]
		}
	}
	return first, last
}
