package boundedtext

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBoundedTextCutsOnARuneBoundary(t *testing.T) {
	s := strings.Repeat("東", 1000)
	got := Cut(s, 100)
	assert.LessOrEqual(t, len(got), 100)
	assert.True(t, strings.HasSuffix(got, "[truncated]"))
	assert.True(t, strings.HasPrefix(s, strings.TrimSuffix(got, "...[truncated]")))
	assert.Equal(t, "short", Cut("short", 100))
}

func TestShortTextIsKept(t *testing.T) {
	assert.Equal(t, "short", Cut("short", 100))
	exact := strings.Repeat("x", 100)
	assert.Equal(t, exact, Cut(exact, 100), "a text of exactly n bytes is not cut")
}

func TestLongTextIsCutToTheLimitWithTheMarker(t *testing.T) {
	got := Cut(strings.Repeat("e", 5000), 1024)
	assert.Len(t, got, 1024)
	assert.Equal(t, strings.Repeat("e", 1024-len(Marker))+Marker, got)
}

func TestACutNeverSplitsAUTF8Sequence(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 100), strings.Repeat("日本", 50), strings.Repeat("🙂", 40), "a" + strings.Repeat("€", 60)} {
		for n := len(Marker); n < len(s); n++ {
			got := Cut(s, n)
			assert.True(t, utf8.ValidString(got), "n=%d: %q", n, got)
			assert.LessOrEqual(t, len(got), n, "n=%d", n)
			kept, ok := strings.CutSuffix(got, Marker)
			assert.True(t, ok, "n=%d: %q ends with the marker", n, got)
			assert.True(t, strings.HasPrefix(s, kept), "n=%d: the kept part is a prefix", n)
			assert.Greater(t, len(kept), n-len(Marker)-utf8.UTFMax, "n=%d: at most one character is given up", n)
		}
	}
}

func TestALimitSmallerThanTheMarkerGivesTheMarker(t *testing.T) {
	assert.Equal(t, Marker, Cut("a long enough text to be cut", 3))
	assert.Equal(t, Marker, Cut("a long enough text to be cut", 0))
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 8)
	f.Add(strings.Repeat("🙂", 10), 17)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 4096
		if n < 0 {
			n = -n
		}
		got := Cut(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Cut(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		kept, ok := strings.CutSuffix(got, Marker)
		if !ok || !strings.HasPrefix(s, kept) {
			t.Fatalf("Cut(%q, %d) = %q: not a prefix plus the marker", s, n, got)
		}
		if n >= len(Marker) && len(got) > n {
			t.Fatalf("Cut(%q, %d) is %d bytes", s, n, len(got))
		}
		if kept != "" && !utf8.RuneStart(s[len(kept)]) {
			t.Fatalf("Cut(%q, %d) splits a UTF-8 sequence", s, n)
		}
	})
}

func TestQuoteCutsALongValueAndQuotesIt(t *testing.T) {
	assert.Equal(t, `"orders"`, Quote("orders"))
	assert.Equal(t, `"a\x00b"`, Quote("a\x00b"), "control characters are escaped, not printed")
	long := Quote(strings.Repeat("q", 1<<20))
	assert.LessOrEqual(t, len(long), MaxEcho+2)
	assert.True(t, strings.HasSuffix(long, Marker+`"`))
}

// Each of these panics with itself from the method fmt calls, so fmt's own recovery of the
// first panic panics again; stringPanicOnce panics with a plain string.
type (
	stringPanic struct{}
	errorPanic  struct{}
	formatPanic struct{}
)

func (stringPanic) String() string         { panic(stringPanic{}) }
func (errorPanic) Error() string           { panic(errorPanic{}) }
func (formatPanic) Format(fmt.State, rune) { panic(formatPanic{}) }

type stringPanicOnce struct{ name string }

func (p *stringPanicOnce) String() string { panic("cannot print " + p.name) }

func TestSprintFormatsAValueWhoseMethodPanicsAsItsType(t *testing.T) {
	for v, want := range map[any]string{
		stringPanic{}: "a boundedtext.stringPanic that panics when formatted",
		errorPanic{}:  "a boundedtext.errorPanic that panics when formatted",
		formatPanic{}: "a boundedtext.formatPanic that panics when formatted",
	} {
		var got string
		require.NotPanics(t, func() { got = Sprint(v, 200) }, "%T", v)
		assert.Equal(t, want, got)
		assert.LessOrEqual(t, len(Sprint(v, 20)), 20, "%T: bounded", v)
	}
}

func TestSprintFormatsOtherValuesAsFmtDoes(t *testing.T) {
	assert.Equal(t, "boom", Sprint("boom", 100))
	assert.Equal(t, "boom", Sprint(errors.New("boom"), 100))
	assert.Equal(t, "<nil>", Sprint(nil, 100))
	assert.Equal(t, "%!v(PANIC=String method: cannot print x)", Sprint(&stringPanicOnce{name: "x"}, 100),
		"a method that panics once is fmt's to report")
	long := Sprint(strings.Repeat("p", 1<<20), 100)
	assert.Len(t, long, 100)
	assert.True(t, strings.HasSuffix(long, Marker))
}
