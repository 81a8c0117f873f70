package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const benchOutput = `date: 2026-12-05
commit: abc1234
goos: linux
goarch: amd64
pkg: github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio
cpu: AMD EPYC 7B13
BenchmarkEngineCreates/latency=20ms/pool=1-2         	       3	2000000 ns/op	      4000 creates/s	       100.0 cpu-µs/create
BenchmarkEngineCreates/latency=20ms/pool=1-2         	       3	2000000 ns/op	      3000 creates/s	       120.0 cpu-µs/create
BenchmarkEngineCreates/latency=20ms/pool=1-2         	       3	2000000 ns/op	      3500 creates/s	       110.0 cpu-µs/create
BenchmarkWrite/latency=200ms/delivery=exactly-once-2 	       3	2000000 ns/op	       470.4 creates/s	       0.1684 rejected/task	 NaN %-of-quota
some log line: with a colon
PASS
`

func writeResults(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "perf"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "perf", "r.txt"), []byte(benchOutput), 0o644))
}

func TestRunRendersMediansAndRangesPerBenchmark(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir)
	var out, stderr bytes.Buffer
	require.NoError(t, run([]string{"-metrics", "creates/s,cpu-µs/create", filepath.Join(dir, "perf", "r.txt")}, &out, &stderr))
	assert.Equal(t, "Medians of up to 3 runs, range in brackets. date: 2026-12-05; commit: abc1234; cpu: AMD EPYC 7B13\n\n"+
		"| benchmark | latency | pool | delivery | creates/s | cpu-µs/create |\n"+
		"|---|---|---|---|---|---|\n"+
		"| EngineCreates | 20ms | 1 |  | 3,500 [3,000–4,000] | 110 [100–120] |\n"+
		"| Write | 200ms |  | exactly-once | 470 |  |\n", out.String())
}

func TestRunSelectsBenchmarksAndColumns(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir)
	var out, stderr bytes.Buffer
	require.NoError(t, run([]string{"-match", "Write/", "-drop", "delivery", filepath.Join(dir, "perf", "r.txt")}, &out, &stderr))
	assert.Contains(t, out.String(), "| benchmark | latency | creates/s | rejected/task | %-of-quota |\n")
	assert.Contains(t, out.String(), "| Write | 200ms | 470 | 0.168 | - |\n", "a NaN is a dash")
	assert.NotContains(t, out.String(), "EngineCreates")
}

func TestRunNamesWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir)
	r := filepath.Join(dir, "perf", "r.txt")
	var out, stderr bytes.Buffer
	assert.ErrorContains(t, run(nil, &out, &stderr), "no results file given")
	assert.ErrorContains(t, run([]string{filepath.Join(dir, "missing.txt")}, &out, &stderr), "results file:")
	assert.ErrorContains(t, run([]string{"-match", "Nothing", r}, &out, &stderr), `no benchmark in`)
	assert.ErrorContains(t, run([]string{"-match", "(", r}, &out, &stderr), "-match:")
	assert.ErrorContains(t, run([]string{"-update", "a.md", "-check", "a.md"}, &out, &stderr), "cannot be used together")
}

func TestUpdateRewritesEveryMarkedTableAndCheckFindsStaleOnes(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir)
	page := filepath.Join(dir, "page.md")
	require.NoError(t, os.WriteFile(page, []byte("# Page\n\nText.\n\n"+
		"<!-- perftable -match EngineCreates -metrics creates/s perf/r.txt -->\n| old | table |\n<!-- end perftable -->\n\nAfter.\n"), 0o644))
	var out, stderr bytes.Buffer
	assert.ErrorIs(t, run([]string{"-check", page}, &out, &stderr), errStale)
	assert.Contains(t, stderr.String(), "-match EngineCreates -metrics creates/s perf/r.txt")

	require.NoError(t, run([]string{"-update", page}, &out, &stderr))
	got, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Equal(t, "# Page\n\nText.\n\n"+
		"<!-- perftable -match EngineCreates -metrics creates/s perf/r.txt -->\n"+
		"Medians of up to 3 runs, range in brackets. date: 2026-12-05; commit: abc1234; cpu: AMD EPYC 7B13\n\n"+
		"| benchmark | latency | pool | creates/s |\n|---|---|---|---|\n| EngineCreates | 20ms | 1 | 3,500 [3,000–4,000] |\n"+
		"<!-- end perftable -->\n\nAfter.\n", string(got))
	require.NoError(t, run([]string{"-check", page}, &out, &stderr))
}

func TestAMarkerWithoutItsEndIsAnError(t *testing.T) {
	dir := t.TempDir()
	writeResults(t, dir)
	page := filepath.Join(dir, "page.md")
	require.NoError(t, os.WriteFile(page, []byte("<!-- perftable perf/r.txt -->\n| t |\n"), 0o644))
	var out, stderr bytes.Buffer
	assert.ErrorContains(t, run([]string{"-check", page}, &out, &stderr), `page.md:1: "<!-- perftable perf/r.txt -->" has no "<!-- end perftable -->" after it`)
}

// TestDocsPerformanceTablesAreTheirResultsFiles keeps the generated tables of
// docs/performance.md what their results files render: they are regenerated, not edited.
func TestDocsPerformanceTablesAreTheirResultsFiles(t *testing.T) {
	var out, stderr bytes.Buffer
	err := run([]string{"-check", filepath.Join("..", "..", "docs", "performance.md")}, &out, &stderr)
	require.NoError(t, err, "%s\nfrom the module's root: go run ./tools/perftable -update docs/performance.md", stderr.String())
}

// TestDocsPerformanceStaysAPageAUserReads keeps docs/performance.md short enough to read in
// minutes: the history of the figures belongs in docs/performance-history.md.
func TestDocsPerformanceStaysAPageAUserReads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	require.NoError(t, err)
	lines := bytes.Count(raw, []byte("\n"))
	assert.Less(t, lines, 300, "docs/performance.md has %d lines; move what a user need not read to docs/performance-history.md", lines)
}
