package quickstart

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/examples/exampleenv"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/perfchart"
)

// runTimes is a run of 600 tasks created in the first second and delivered at 200/s after.
func runTimes() (created, delivered []time.Time) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 600 {
		created = append(created, t0.Add(time.Duration(i)*time.Second/600))
		delivered = append(delivered, t0.Add(100*time.Millisecond+time.Duration(i)*time.Second/200))
	}
	return created, delivered
}

func TestTimelineChartCountsEveryCreateAndDelivery(t *testing.T) {
	created, delivered := runTimes()
	c := timelineChart(created, delivered, 200)
	require.Len(t, c.Panels, 2)
	totals := c.Panels[0].Series
	require.Len(t, totals, 2)
	assert.Equal(t, "created", totals[0].Name)
	assert.Equal(t, "delivered", totals[1].Name)
	for _, s := range totals {
		last := s.Points[len(s.Points)-1]
		assert.Equal(t, float64(600), last.Y, "%s ends at the total", s.Name)
		assert.InDelta(t, 3.1, last.X, 0.1, "the x axis spans the run, in seconds")
		assert.LessOrEqual(t, len(s.Points), chartPoints+2, "a bounded number of points")
	}
	rates := c.Panels[1].Series
	require.Len(t, rates, 3)
	mid := rates[1].Points[len(rates[1].Points)/2]
	assert.InDelta(t, 200, mid.Y, 25, "delivered at the queue's rate in mid run")
	assert.Equal(t, "queue limit (200/s)", rates[2].Name)
}

func TestTheChartIsWrittenAsSVGOrPNG(t *testing.T) {
	created, delivered := runTimes()
	dir := t.TempDir()
	svg, pngPath := filepath.Join(dir, "run.svg"), filepath.Join(dir, "run.PNG")
	require.NoError(t, perfchart.Save(svg, timelineChart(created, delivered, 200)))
	require.NoError(t, perfchart.Save(pngPath, timelineChart(created, delivered, 200)))

	data, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(data[:min(len(data), 200)], []byte("<svg")), "an SVG document")
	assert.Contains(t, string(data), "Tasks created and delivered")

	data, err = os.ReadFile(pngPath)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err, "a PNG image")
	assert.Positive(t, img.Bounds().Dx())
}

func TestABadChartPathIsRefusedBeforeAnythingRuns(t *testing.T) {
	_, err := Run(context.Background(), exampleenv.Env{}, Options{Chart: "run.jpg"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Options.Chart")
	assert.Contains(t, err.Error(), `"run.jpg" must end in .svg or .png`)
	assert.NoError(t, CheckChart("-chart", ""), "no chart asked for")
	assert.True(t, strings.HasPrefix(CheckChart("-chart", "x.gif").Error(), "-chart: "))
}
