package perfchart_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/perfchart"
)

func tinyChart() perfchart.Chart {
	return perfchart.Chart{Panels: []perfchart.Panel{
		{Title: "creates/s", YLabel: "creates/s", Series: []perfchart.Series{
			{Name: "adaptive off", Points: []perfchart.Point{{X: 0, Y: 300}, {X: 1, Y: 120}, {X: 2, Y: 310}}},
			{Name: "adaptive on", Points: []perfchart.Point{{X: 0, Y: 290}, {X: 1, Y: 295}, {X: 2, Y: 300}}},
		}},
		{Title: "rejected/s", XLabel: "seconds", Series: []perfchart.Series{
			{Name: "adaptive off", Points: []perfchart.Point{{X: 0, Y: 4000}, {X: 1, Y: 3800}}},
			{Name: "adaptive on", Points: []perfchart.Point{{X: 0, Y: 12}, {X: 1, Y: 3}}},
		}},
	}}
}

// svgTexts parses an SVG document (failing the test when it is not well-formed XML with an
// <svg> root) and returns the text of its <text> elements.
func svgTexts(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var texts []string
	root := ""
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the chart is not well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			inText = el.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(el)))
			}
		}
	}
	require.Equal(t, "svg", root, "the root element of the chart")
	return texts
}

func TestSaveWritesAnSVGWithEverySeriesAndPanel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.svg")
	require.NoError(t, perfchart.Save(path, tinyChart()))
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	texts := svgTexts(t, doc)
	for _, want := range []string{"adaptive off", "adaptive on", "creates/s", "rejected/s", "seconds"} {
		assert.Contains(t, texts, want)
	}
}

func TestSaveWritesAPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.PNG")
	c := tinyChart()
	c.Width, c.Height = 320, 400
	require.NoError(t, perfchart.Save(path, c))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err, "the chart is not a PNG")
	// vgimg draws at 96 dpi: 320 by 400 points are 427 by 533 pixels.
	assert.Equal(t, 427, img.Bounds().Dx())
	assert.Equal(t, 533, img.Bounds().Dy())
}

func TestSameSeriesNameKeepsItsColourAcrossPanels(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, perfchart.Render(&buf, "svg", tinyChart()))
	// Okabe-Ito vermillion is the first name's colour, blue the second's; each is used by
	// that name's line in both panels and by its legend entry in both.
	svg := buf.String()
	assert.Equal(t, 4, strings.Count(svg, "stroke:#D55E00;"))
	assert.Equal(t, 4, strings.Count(svg, "stroke:#0072B2;"))
}

func TestBadChartsAreErrorsNamingWhatIsWrong(t *testing.T) {
	one := func(pts ...perfchart.Point) perfchart.Chart {
		return perfchart.Chart{Panels: []perfchart.Panel{{Title: "p", Series: []perfchart.Series{{Name: "s", Points: pts}}}}}
	}
	for _, c := range []struct {
		name  string
		chart perfchart.Chart
		want  string
	}{
		{"no panels", perfchart.Chart{}, "no panels"},
		{"no series", perfchart.Chart{Panels: []perfchart.Panel{{Title: "p"}}}, `panel 1 ("p") has no series`},
		{"no points", one(), `series "s" of panel 1 ("p") has no points`},
		{"NaN", one(perfchart.Point{X: 0, Y: math.NaN()}), `series "s" of panel 1 ("p") has a point that is not finite`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := perfchart.Render(&buf, "svg", c.chart)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Zero(t, buf.Len(), "nothing is written for a bad chart")
		})
	}
	var buf bytes.Buffer
	assert.ErrorContains(t, perfchart.Render(&buf, "gif", tinyChart()), `format "gif" is not one of svg, png`)
	path := filepath.Join(t.TempDir(), "chart.jpg")
	assert.ErrorContains(t, perfchart.Save(path, tinyChart()), "must end in .svg or .png")
	assert.NoFileExists(t, path)
}

func TestCSVRoundTrip(t *testing.T) {
	panels := tinyChart().Panels
	var buf bytes.Buffer
	require.NoError(t, perfchart.WriteCSV(&buf, panels))
	assert.True(t, strings.HasPrefix(buf.String(), "panel,series,x,y\ncreates/s,adaptive off,0,300\n"), buf.String())
	got, err := perfchart.ReadCSV(&buf)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i := range panels {
		assert.Equal(t, panels[i].Title, got[i].Title)
		assert.Equal(t, panels[i].Title, got[i].YLabel)
		assert.Equal(t, panels[i].Series, got[i].Series)
	}
}

func TestReadCSVRejectsBadInputNamingTheLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "the CSV is empty"},
		{"header", "a,b,c,d\n", `the CSV header is "a,b,c,d"`},
		{"not a number", "panel,series,x,y\np,s,1,2\np,s,two,3\n", `CSV line 3: x "two" and y "3" must be finite numbers`},
		{"infinite", "panel,series,x,y\np,s,1,+Inf\n", "CSV line 2"},
		{"short row", "panel,series,x,y\np,s,1\n", "wrong number of fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := perfchart.ReadCSV(strings.NewReader(c.in))
			assert.ErrorContains(t, err, c.want)
		})
	}
}
