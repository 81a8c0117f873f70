package exampleenv

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestCutKeepsShortTextAndCutsLongTextOnACharacterBoundary(t *testing.T) {
	assert.Equal(t, "short", Cut("short", 10))
	got := Cut(strings.Repeat("é", 100), 51)
	assert.True(t, utf8.ValidString(got))
	assert.LessOrEqual(t, len(got), 51)
	assert.True(t, strings.HasSuffix(got, CutMarker))
	assert.Equal(t, CutMarker, Cut("0123456789", 3), "a limit below the marker keeps the marker")
	q := Quote(strings.Repeat("x", 1000))
	assert.Less(t, len(q), 200)
	assert.True(t, strings.HasPrefix(q, `"xxx`))
}
