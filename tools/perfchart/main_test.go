package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunRendersTheCSVIntoAnSVG(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "series.csv")
	require.NoError(t, os.WriteFile(in, []byte("panel,series,x,y\n"+
		"created/s,adaptive off,0,300\ncreated/s,adaptive off,1,80\n"+
		"created/s,adaptive on,0,290\ncreated/s,adaptive on,1,300\n"+
		"rejected/s,adaptive off,0,900\nrejected/s,adaptive on,0,4\n"), 0o644))
	out := filepath.Join(dir, "chart.svg")
	var stderr bytes.Buffer
	require.NoError(t, run([]string{"-in", in, "-out", out, "-title", "quota 300/s"}, &stderr))
	doc, err := os.ReadFile(out)
	require.NoError(t, err)
	svg := string(doc)
	assert.True(t, strings.HasPrefix(strings.TrimSpace(svg), "<?xml") || strings.HasPrefix(strings.TrimSpace(svg), "<svg"), "not an SVG document")
	for _, want := range []string{">adaptive off<", ">adaptive on<", ">quota 300/s: created/s<", ">rejected/s<", ">seconds<"} {
		assert.Contains(t, svg, want)
	}
}

func TestRunNamesTheFlagThatIsWrong(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "series.csv")
	require.NoError(t, os.WriteFile(in, []byte("panel,series,x,y\n"), 0o644))
	var stderr bytes.Buffer
	assert.ErrorContains(t, run([]string{"-in", in}, &stderr), "-in and -out are required")
	assert.ErrorContains(t, run([]string{"-in", in, "-out", filepath.Join(dir, "c.gif")}, &stderr), "-out: chart file")
	assert.ErrorContains(t, run([]string{"-in", filepath.Join(dir, "missing.csv"), "-out", filepath.Join(dir, "c.svg")}, &stderr), "-in:")
	assert.ErrorContains(t, run([]string{"-in", in, "-out", filepath.Join(dir, "c.svg")}, &stderr), "has a header but no samples")
	assert.NoFileExists(t, filepath.Join(dir, "c.svg"))
}

func TestRunDrawsOnlyTheSeriesAsked(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "series.csv")
	require.NoError(t, os.WriteFile(in, []byte("panel,series,x,y\n"+
		"created/s,adaptive off,0,300\ncreated/s,adaptive on,0,290\ncreated/s,\"adaptive on, RetryInfo\",0,1\n"), 0o644))
	out := filepath.Join(dir, "chart.svg")
	var stderr bytes.Buffer
	require.NoError(t, run([]string{"-in", in, "-out", out, "-series", "adaptive off", "-series", "adaptive on, RetryInfo"}, &stderr))
	doc, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(doc), ">adaptive off<")
	assert.Contains(t, string(doc), ">adaptive on, RetryInfo<")
	assert.NotContains(t, string(doc), ">adaptive on<")
	assert.ErrorContains(t, run([]string{"-in", in, "-out", out, "-series", "adaptive of"}, &stderr), `-series: perfchart: no series is named "adaptive of"`)
}
