// Package boundedtext cuts text that goes into errors, logs, dead letters and message
// attributes to a size limit, the same way everywhere: at a character boundary, never inside a
// UTF-8 sequence, ending with one marker so a reader sees the text was cut.
package boundedtext

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Marker ends every text Cut has shortened.
const Marker = "...[truncated]"

// Cut returns s when it is at most n bytes long; otherwise the longest prefix of s that ends at
// a character boundary and leaves room for Marker, followed by Marker, at most n bytes in all.
// When n is too small to hold Marker, the result is Marker alone.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(Marker), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Marker
}

// MaxEcho is how many bytes of a rejected value an error repeats: enough to recognise the
// value, never a whole mistaken or hostile megabyte.
const MaxEcho = 120

// Quote returns s as a Go double-quoted string for an error message, first cut to MaxEcho
// bytes by Cut. Use it for every value an error repeats that came from a user.
func Quote(s string) string { return strconv.Quote(Cut(s, MaxEcho)) }

// Sprint returns v formatted as fmt.Sprint formats it, cut to n bytes by Cut. Use it for a
// value the program did not make, above all one that recover returned. Formatting such a
// value runs its String, Error or Format method, which may panic; fmt recovers a first panic
// there but not one raised while printing that panic's own value. Sprint never panics: when
// formatting v panics, it returns v's dynamic type instead.
func Sprint(v any, n int) (s string) {
	defer func() {
		if recover() != nil {
			s = Cut(fmt.Sprintf("a %T that panics when formatted", v), n)
		}
	}()
	return Cut(fmt.Sprint(v), n)
}
