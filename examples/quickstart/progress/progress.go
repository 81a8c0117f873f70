// Package progress shows how far a run of the examples has come: how many tasks were created
// and how many were delivered, as one bar redrawn in place on a terminal, or as a plain line
// at a fixed interval when the output is a file or a pipe.
package progress

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Counts is one sample of a run: tasks created so far and requests delivered so far.
type Counts struct {
	Created   int
	Delivered int
}

// Reporter samples Counts at an interval and writes them to Out until its context is done.
type Reporter struct {
	// Out receives the progress. Required.
	Out io.Writer
	// Total is the number of tasks the run expects; it scales the bars.
	Total int
	// Bar redraws one line in place (for a terminal). False writes a plain line per Interval.
	Bar bool
	// Width is the width of the terminal line in columns. 0 means 80.
	Width int
	// Interval is the time between samples. 0 means 100ms with Bar and 1s without.
	Interval time.Duration
	// Sample returns the current counts. Required; called from the Run goroutine only.
	Sample func() Counts
}

// rateWindow is how far back the delivery rate looks.
const rateWindow = time.Second

type sample struct {
	at        time.Time
	delivered int
}

// Run writes progress until ctx is done, then writes the final counts once more (ending the
// redrawn line with a newline in Bar mode) and returns.
func (r *Reporter) Run(ctx context.Context) {
	interval := r.Interval
	if interval <= 0 {
		interval = time.Second
		if r.Bar {
			interval = 100 * time.Millisecond
		}
	}
	start := time.Now()
	history := []sample{{at: start}}
	draw := func(final bool) {
		now := time.Now()
		c := r.Sample()
		history = append(history, sample{at: now, delivered: c.Delivered})
		for len(history) > 1 && now.Sub(history[1].at) >= rateWindow {
			history = history[1:]
		}
		rate := 0.0
		if span := now.Sub(history[0].at); span > 0 {
			rate = float64(c.Delivered-history[0].delivered) / span.Seconds()
		}
		if r.Bar {
			end := ""
			if final {
				end = "\n"
			}
			fmt.Fprintf(r.Out, "\r%s\x1b[K%s", r.barLine(c, rate, now.Sub(start)), end)
			return
		}
		fmt.Fprintln(r.Out, r.plainLine(c, rate, now.Sub(start)))
	}

	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			draw(true)
			return
		case <-ticker.C:
			draw(false)
		}
	}
}

// plainLine renders one periodic line, for example
// "  3.0s  created 3000/3000  delivered 412/3000  delivering at 200/s".
func (r *Reporter) plainLine(c Counts, rate float64, elapsed time.Duration) string {
	return fmt.Sprintf("%6.1fs  created %d/%d  delivered %d/%d  delivering at %.0f/s",
		elapsed.Seconds(), c.Created, r.Total, c.Delivered, r.Total, rate)
}

// barLine renders the in-place line: two bars sharing the terminal width, for example
// "created [#########] 3000/3000  delivered [##-------] 412/3000  200/s  3.0s".
func (r *Reporter) barLine(c Counts, rate float64, elapsed time.Duration) string {
	width := r.Width
	if width <= 0 {
		width = 80
	}
	digits := len(fmt.Sprint(r.Total))
	tail := fmt.Sprintf("  %5.0f/s %5.1fs", rate, elapsed.Seconds())
	fixed := len("created [] ") + 2*digits + 1 + len("  delivered [] ") + 2*digits + 1 + len(tail)
	barWidth := max((width-1-fixed)/2, 5)
	return fmt.Sprintf("created [%s] %*d/%d  delivered [%s] %*d/%d%s",
		bar(c.Created, r.Total, barWidth), digits, c.Created, r.Total,
		bar(c.Delivered, r.Total, barWidth), digits, c.Delivered, r.Total, tail)
}

// bar draws n of total as a bar of width cells.
func bar(n, total, width int) string {
	filled := width
	if total > 0 && n < total {
		filled = max(n, 0) * width / total
	}
	return strings.Repeat("#", filled) + strings.Repeat("-", width-filled)
}
