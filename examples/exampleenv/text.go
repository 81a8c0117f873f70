package exampleenv

import (
	"strconv"
	"unicode/utf8"
)

// CutMarker ends a text that Cut shortened.
const CutMarker = "...[truncated]"

// maxQuoted is how much of a value Quote repeats.
const maxQuoted = 120

// Cut returns s when it has at most n bytes, else its longest prefix that ends on a
// character boundary and leaves room for CutMarker, followed by CutMarker. The examples cut
// every value they repeat from their input or from a message, so that an error or a log line
// stays short whatever the data.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	keep := max(n-len(CutMarker), 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + CutMarker
}

// Quote is Cut to 120 bytes, then Go-quoted: how the examples name a value in an error.
func Quote(s string) string { return strconv.Quote(Cut(s, maxQuoted)) }
