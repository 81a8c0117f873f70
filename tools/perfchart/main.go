// Command perfchart renders a chart from a CSV file of samples, as the
// project's benchmarks write them (perfchart.WriteCSV: the header
// panel,series,x,y, then one row per point). Each panel of the CSV becomes one
// plot, stacked top to bottom with a shared x label; each series one line.
//
//	go run ./tools/perfchart -in series.csv -out docs/quota-adaptive.svg
//
// The output format follows the -out extension: .svg or .png. -series, repeated, draws only
// the series of those names.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/perfchart"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// run is the command without the process around it, for tests.
func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("perfchart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the CSV file of samples (panel,series,x,y); required")
	out := fs.String("out", "", "the chart file to write, .svg or .png; required")
	xlabel := fs.String("xlabel", "seconds", "the label of the x axis, under the bottom panel")
	title := fs.String("title", "", "a title above the top panel, before its own")
	width := fs.Float64("width", perfchart.DefaultWidth, "chart width in points")
	var only []string
	fs.Func("series", "a series name to draw, in every panel; repeat it for several; absent draws all", func(v string) error {
		only = append(only, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("perfchart: -in and -out are required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("perfchart: unexpected arguments %q", fs.Args())
	}
	if _, err := perfchart.FormatOf(*out); err != nil {
		return fmt.Errorf("-out: %w", err)
	}
	f, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("perfchart: -in: %w", err)
	}
	defer f.Close()
	panels, err := perfchart.ReadCSV(f)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if len(only) > 0 {
		if panels, err = keepSeries(panels, only); err != nil {
			return fmt.Errorf("-series: %w", err)
		}
	}
	if len(panels) == 0 {
		return fmt.Errorf("perfchart: %s has a header but no samples", *in)
	}
	panels[len(panels)-1].XLabel = *xlabel
	if *title != "" {
		if panels[0].Title != "" {
			panels[0].Title = *title + ": " + panels[0].Title
		} else {
			panels[0].Title = *title
		}
	}
	return perfchart.Save(*out, perfchart.Chart{Panels: panels, Width: *width})
}

// keepSeries drops every series whose name is not in names, and the panels left empty; a name
// that no panel has is an error.
func keepSeries(panels []perfchart.Panel, names []string) ([]perfchart.Panel, error) {
	seen := map[string]bool{}
	var out []perfchart.Panel
	for _, p := range panels {
		var kept []perfchart.Series
		for _, s := range p.Series {
			if slices.Contains(names, s.Name) {
				kept = append(kept, s)
				seen[s.Name] = true
			}
		}
		if len(kept) > 0 {
			p.Series = kept
			out = append(out, p)
		}
	}
	for _, n := range names {
		if !seen[n] {
			return nil, fmt.Errorf("perfchart: no series is named %q", n)
		}
	}
	return out, nil
}
