package cloudtasksio_test

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the metric tables of doc.go from docs/metrics.md")

// docs/metrics.md is the source of the metric tables `go doc cloudtasksio` prints: each row of
// doc.go's tables is a row of the page's, in the same order, with the same names and kind and
// the first sentence of what it counts. After editing the page, run
//
//	go test -run TestPackageMetricTablesAreDocsMetricsMd ./cloudtasksio/ -update-doc
func TestPackageMetricTablesAreDocsMetricsMd(t *testing.T) {
	tables := metricTablesOf(readFile(t, "../docs/metrics.md"))
	require.Len(t, tables, 5, "docs/metrics.md has five metric tables: the sink's, throttling, preflight, queue health, exactly-once")
	src := readFile(t, "doc.go")
	lines := strings.Split(src, "\n")
	blocks := metricBlocksOf(lines)
	require.Len(t, blocks, len(tables), "doc.go's # Metrics section has one table per table of docs/metrics.md")

	var want []string
	for i, tb := range tables {
		want = append(want, renderMetricTable(tb, i == 0)...)
	}
	var got []string
	for _, b := range blocks {
		got = append(got, lines[b[0]:b[1]]...)
	}
	if *updateDoc {
		out := append([]string(nil), lines[:blocks[0][0]]...)
		for i, b := range blocks {
			out = append(out, renderMetricTable(tables[i], i == 0)...)
			end := len(lines)
			if i+1 < len(blocks) {
				end = blocks[i+1][0]
			}
			out = append(out, lines[b[1]:end]...)
		}
		require.NoError(t, os.WriteFile("doc.go", []byte(strings.Join(out, "\n")), 0o644))
		return
	}
	assert.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"),
		"doc.go's metric tables differ from docs/metrics.md; run this test with -update-doc")
}

// metricRow is one row of a metric table: its names (several share a row), kind and text.
type metricRow struct {
	names      []string
	kind, text string
}

var (
	mdMetricRow = regexp.MustCompile("^\\| (`[^|]+`) \\| (counter|gauge|distribution) \\| (.+) \\|$")
	mdCode      = regexp.MustCompile("`([^`]*)`")
	mdLink      = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)
	mdBold      = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// metricTablesOf returns the metric tables of a markdown page: runs of rows whose first cell
// holds backquoted names and second a metric kind.
func metricTablesOf(md string) [][]metricRow {
	var tables [][]metricRow
	inTable := false
	for _, line := range strings.Split(md, "\n") {
		m := mdMetricRow.FindStringSubmatch(line)
		if m == nil {
			inTable = inTable && strings.HasPrefix(line, "|")
			continue
		}
		if !inTable {
			tables = append(tables, nil)
			inTable = true
		}
		var names []string
		for _, n := range mdCode.FindAllStringSubmatch(m[1], -1) {
			names = append(names, n[1])
		}
		tables[len(tables)-1] = append(tables[len(tables)-1], metricRow{names: names, kind: m[2], text: firstSentence(plainText(m[3]))})
	}
	return tables
}

// plainText is markdown text as go doc shows it: no code quotes, links or bold.
func plainText(md string) string {
	s := mdLink.ReplaceAllString(md, "$1")
	s = mdBold.ReplaceAllString(s, "$1")
	return mdCode.ReplaceAllString(s, "$1")
}

// firstSentence returns s up to the first full stop, outside parentheses, that a space and a
// capital letter follow.
func firstSentence(s string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case '.':
			if depth == 0 && i+2 < len(s) && s[i+1] == ' ' && s[i+2] >= 'A' && s[i+2] <= 'Z' {
				return s[:i+1]
			}
		}
	}
	return s
}

// The columns of doc.go's metric tables.
const (
	metricNameWidth = 40
	metricKindWidth = 14
	metricTextWidth = 62
)

// renderMetricTable returns the doc.go comment lines of a table.
func renderMetricTable(rows []metricRow, header bool) []string {
	line := func(name, kind, text string) string {
		return strings.TrimRight(fmt.Sprintf("//\t%-*s%-*s%s", metricNameWidth, name, metricKindWidth, kind, text), " ")
	}
	var out []string
	if header {
		out = append(out, line("name", "kind", "counts"))
	}
	for _, r := range rows {
		// A name too long for its column has a line of its own, with its kind, before the
		// row's text.
		var names []string
		for _, n := range r.names {
			if len(n) >= metricNameWidth {
				out = append(out, "//\t"+n+"  "+r.kind)
			} else {
				names = append(names, n)
			}
		}
		text := wrapWords(r.text, metricTextWidth)
		for i := 0; i < max(len(names), len(text)); i++ {
			name, kind, chunk := "", "", ""
			if i < len(names) {
				name, kind = names[i], r.kind
			}
			if i < len(text) {
				chunk = text[i]
			}
			out = append(out, line(name, kind, chunk))
		}
	}
	return out
}

// wrapWords breaks s into lines of at most width bytes, between words.
func wrapWords(s string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(w) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	return append(lines, cur)
}

// metricBlocksOf returns the [start, end) line ranges of the preformatted blocks in doc.go's
// "# Metrics" section: its metric tables.
func metricBlocksOf(lines []string) [][2]int {
	var blocks [][2]int
	in, start := false, -1
	for i, l := range lines {
		switch {
		case l == "// # Metrics":
			in = true
		case in && strings.HasPrefix(l, "// # "):
			in = false
		}
		pre := in && strings.HasPrefix(l, "//\t")
		switch {
		case pre && start < 0:
			start = i
		case !pre && start >= 0:
			blocks = append(blocks, [2]int{start, i})
			start = -1
		}
	}
	return blocks
}
