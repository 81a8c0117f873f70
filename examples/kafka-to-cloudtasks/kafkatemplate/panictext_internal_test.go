package kafkatemplate

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unprintable panics with itself when printed, so fmt's own recovery of that panic panics again.
type unprintable struct{}

func (unprintable) Error() string { panic(unprintable{}) }

func TestARecoveredValueThatCannotBePrintedIsNamedByItsType(t *testing.T) {
	var text string
	require.NotPanics(t, func() { text = sprintRecovered(unprintable{}) })
	assert.Equal(t, "a kafkatemplate.unprintable that panics when formatted", text)
	assert.Equal(t, "no such scheme", sprintRecovered("no such scheme"))
}

func TestARecoveredTextIsCutAtACharacterBoundary(t *testing.T) {
	text := cutPanicText(strings.Repeat("é", maxPanicText))
	assert.LessOrEqual(t, len(text), maxPanicText)
	assert.True(t, utf8.ValidString(text))
	assert.True(t, strings.HasSuffix(text, "..."))
	assert.Equal(t, "short", cutPanicText("short"))
}

func TestAnInputOfAnUnknownSchemeIsAnErrorNamingTheFlag(t *testing.T) {
	err := validateScheme("nosuchscheme://bucket/records-*")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "--input: "), err.Error())
	assert.LessOrEqual(t, len(err.Error()), len("--input: ")+maxPanicText)
}
