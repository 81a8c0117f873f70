package kafkatemplate

import (
	"strconv"
	"unicode/utf8"
)

// maxQuoted is how much of a value an error repeats: enough to recognise it, never a whole
// mistaken flag value or record.
const maxQuoted = 120

// cut returns s when it has at most n bytes, else its longest prefix that ends on a character
// boundary followed by "...[truncated]", n bytes at most.
func cut(s string, n int) string {
	const marker = "...[truncated]"
	if len(s) <= n {
		return s
	}
	keep := max(n-len(marker), 0)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + marker
}

// quote is how an error names a value that came from a flag or a record: cut, then quoted.
func quote(s string) string { return strconv.Quote(cut(s, maxQuoted)) }
