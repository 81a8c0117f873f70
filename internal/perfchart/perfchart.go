// Package perfchart draws the project's performance charts: line charts of
// series over time, stacked in panels that share the x axis, written as SVG or
// PNG with gonum.org/v1/plot. Benchmarks and examples record their samples as
// Panels (or as CSV, see ReadCSV and WriteCSV) and render them with Save or
// Render; the tools/perfchart command turns such a CSV file into a chart. It is
// a library of cloudtasksio's benchmarks and of the quickstart, so it lives in internal/.
package perfchart

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Point is one sample of a series.
type Point struct{ X, Y float64 }

// Series is one line of a panel. A series of the same Name in several panels
// of a chart is drawn in the same colour and dash in each, so "adaptive off"
// is recognisable throughout.
type Series struct {
	Name   string
	Points []Point
}

// Panel is one plot of a chart, with its own y axis.
type Panel struct {
	// Title is drawn above the panel; empty draws none.
	Title string
	// XLabel and YLabel name the axes; empty draws none.
	XLabel, YLabel string
	// Series are the panel's lines, at least one, each with at least one
	// point. The legend lists them in this order.
	Series []Series
}

// Chart is one or more panels stacked top to bottom.
type Chart struct {
	// Panels are drawn in order, the first at the top. At least one.
	Panels []Panel
	// Width and Height are the size of the whole chart in points (1/72 inch).
	// Zero picks DefaultWidth, and DefaultPanelHeight per panel.
	Width, Height float64
}

// The default size of a chart: DefaultWidth wide, DefaultPanelHeight per panel.
const (
	DefaultWidth       = 640
	DefaultPanelHeight = 240
)

// Formats are the output formats Render accepts, and the file extensions Save
// recognises (with a leading dot, any case).
var Formats = []string{"svg", "png"}

// FormatOf returns the output format for a file path from its extension:
// "svg" for .svg, "png" for .png, any case; anything else is an error naming
// the path and the formats accepted. The error has no package prefix: a caller
// checking a flag or field puts that name in front of it.
func FormatOf(path string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	for _, f := range Formats {
		if ext == f {
			return f, nil
		}
	}
	return "", fmt.Errorf("chart file %q must end in .svg or .png", path)
}

// Save renders c into the file at path, in the format its extension names
// (see FormatOf). The file is created or truncated; on a render error it is
// not written at all.
func Save(path string, c Chart) error {
	format, err := FormatOf(path)
	if err != nil {
		return fmt.Errorf("perfchart: %w", err)
	}
	var buf bytes.Buffer
	if err := Render(&buf, format, c); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("perfchart: writing chart: %w", err)
	}
	return nil
}

// Render draws c and writes it to w in format "svg" or "png". It returns an
// error, and writes nothing, when c has no panel, a panel has no series, a
// series has no point or a point is not finite, naming the panel and series.
func Render(w io.Writer, format string, c Chart) error {
	if !isFormat(format) {
		return fmt.Errorf("perfchart: format %q is not one of %s", format, strings.Join(Formats, ", "))
	}
	if err := c.validate(); err != nil {
		return err
	}
	width := vg.Length(c.Width)
	if width <= 0 {
		width = DefaultWidth
	}
	height := vg.Length(c.Height)
	if height <= 0 {
		height = vg.Length(DefaultPanelHeight * len(c.Panels))
	}
	styles := seriesStyles(c.Panels)
	xmin, xmax := xRange(c.Panels)
	plots := make([][]*plot.Plot, len(c.Panels))
	for i, p := range c.Panels {
		pl, err := p.plot(styles, xmin, xmax)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{pl}
	}
	canvas, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return fmt.Errorf("perfchart: %w", err)
	}
	tiles := draw.Tiles{
		Rows: len(plots), Cols: 1,
		PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter,
	}
	dc := draw.New(canvas)
	for i, row := range plot.Align(plots, tiles, dc) {
		plots[i][0].Draw(row[0])
	}
	if _, err := canvas.WriteTo(w); err != nil {
		return fmt.Errorf("perfchart: writing %s: %w", format, err)
	}
	return nil
}

func isFormat(format string) bool {
	for _, f := range Formats {
		if format == f {
			return true
		}
	}
	return false
}

func (c Chart) validate() error {
	if len(c.Panels) == 0 {
		return errors.New("perfchart: the chart has no panels")
	}
	for i, p := range c.Panels {
		name := fmt.Sprintf("panel %d (%q)", i+1, p.Title)
		if len(p.Series) == 0 {
			return fmt.Errorf("perfchart: %s has no series", name)
		}
		for _, s := range p.Series {
			if len(s.Points) == 0 {
				return fmt.Errorf("perfchart: series %q of %s has no points", s.Name, name)
			}
			for _, pt := range s.Points {
				if !finite(pt.X) || !finite(pt.Y) {
					return fmt.Errorf("perfchart: series %q of %s has a point that is not finite (%v, %v)", s.Name, name, pt.X, pt.Y)
				}
			}
		}
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// style is how one series name is drawn.
type style struct {
	color  color.Color
	dashes []vg.Length
}

// palette is a set of colours that stay apart in print and for the common
// colour-vision deficiencies (Okabe and Ito's).
var palette = []color.Color{
	color.RGBA{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // vermillion
	color.RGBA{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
	color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, // bluish green
	color.RGBA{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, // reddish purple
	color.RGBA{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, // orange
	color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, // sky blue
	color.RGBA{R: 0x00, G: 0x00, B: 0x00, A: 0xff}, // black
}

// seriesStyles gives every distinct series name of the chart a style, in the
// order the names first appear.
func seriesStyles(panels []Panel) map[string]style {
	out := map[string]style{}
	for _, p := range panels {
		for _, s := range p.Series {
			if _, ok := out[s.Name]; ok {
				continue
			}
			n := len(out)
			var dashes []vg.Length
			if n/len(palette)%2 == 1 { // a second round of colours is dashed
				dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			out[s.Name] = style{color: palette[n%len(palette)], dashes: dashes}
		}
	}
	return out
}

// xRange is the smallest and largest x of every point: the panels share their
// x axis, so that a moment lines up across them.
func xRange(panels []Panel) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range panels {
		for _, s := range p.Series {
			for _, pt := range s.Points {
				lo, hi = min(lo, pt.X), max(hi, pt.X)
			}
		}
	}
	return lo, hi
}

// legendRoom is the share of a panel's height kept free above the highest
// point, for the legend.
const legendRoom = 0.08

func (p Panel) plot(styles map[string]style, xmin, xmax float64) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.X.Min, pl.X.Max = xmin, xmax
	ymax := 0.0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			ymax = max(ymax, pt.Y)
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	pl.Y.Min, pl.Y.Max = 0, ymax*(1+legendRoom*float64(len(p.Series)))
	pl.Legend.Top = true
	pl.Legend.XOffs = -4 * vg.Millimeter
	pl.Add(plotter.NewGrid())
	for _, s := range p.Series {
		xys := make(plotter.XYs, len(s.Points))
		for i, pt := range s.Points {
			xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("perfchart: series %q: %w", s.Name, err)
		}
		st := styles[s.Name]
		line.Color = st.color
		line.Dashes = st.dashes
		line.Width = vg.Points(1.5)
		pl.Add(line)
		pl.Legend.Add(s.Name, line)
	}
	return pl, nil
}

// csvHeader is the first row of the CSV form of a chart's samples: one row per
// point, naming its panel and series.
var csvHeader = []string{"panel", "series", "x", "y"}

// WriteCSV writes the samples of panels as CSV: the header "panel,series,x,y",
// then one row per point, the panel named by its Title. ReadCSV reads it back.
func WriteCSV(w io.Writer, panels []Panel) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return fmt.Errorf("perfchart: writing CSV: %w", err)
	}
	for _, p := range panels {
		for _, s := range p.Series {
			for _, pt := range s.Points {
				row := []string{p.Title, s.Name, strconv.FormatFloat(pt.X, 'g', -1, 64), strconv.FormatFloat(pt.Y, 'g', -1, 64)}
				if err := cw.Write(row); err != nil {
					return fmt.Errorf("perfchart: writing CSV: %w", err)
				}
			}
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("perfchart: writing CSV: %w", err)
	}
	return nil
}

// ReadCSV reads what WriteCSV writes: panels in the order their titles first
// appear, each panel's series in the order their names first appear within
// it, each with the panel's title as its YLabel too. A missing or different
// header, a row without four fields, or an x or y that is not a finite number
// is an error naming the line.
func ReadCSV(r io.Reader) ([]Panel, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(csvHeader)
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("perfchart: the CSV is empty; want the header panel,series,x,y")
	}
	if err != nil {
		return nil, fmt.Errorf("perfchart: reading CSV: %w", err)
	}
	if strings.Join(header, ",") != strings.Join(csvHeader, ",") {
		return nil, fmt.Errorf("perfchart: the CSV header is %q, want %q", strings.Join(header, ","), strings.Join(csvHeader, ","))
	}
	var panels []Panel
	panelAt := map[string]int{}
	seriesAt := map[[2]string]int{}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("perfchart: reading CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		x, errX := strconv.ParseFloat(row[2], 64)
		y, errY := strconv.ParseFloat(row[3], 64)
		if errX != nil || errY != nil || !finite(x) || !finite(y) {
			return nil, fmt.Errorf("perfchart: CSV line %d: x %q and y %q must be finite numbers", line, row[2], row[3])
		}
		pi, ok := panelAt[row[0]]
		if !ok {
			pi = len(panels)
			panelAt[row[0]] = pi
			panels = append(panels, Panel{Title: row[0], YLabel: row[0]})
		}
		key := [2]string{row[0], row[1]}
		si, ok := seriesAt[key]
		if !ok {
			si = len(panels[pi].Series)
			seriesAt[key] = si
			panels[pi].Series = append(panels[pi].Series, Series{Name: row[1]})
		}
		s := &panels[pi].Series[si]
		s.Points = append(s.Points, Point{X: x, Y: y})
	}
	return panels, nil
}
