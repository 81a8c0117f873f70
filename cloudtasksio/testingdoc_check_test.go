package cloudtasksio_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docs/testing.md opens with a complete pipeline test, and that test is testingdoc_test.go,
// compiled and run with this package: the page's first section and first Go block must be the
// file's text from its import block on, so the page cannot drift from code that works.
func TestTestingDocOpensWithThisFile(t *testing.T) {
	doc, err := os.ReadFile("../docs/testing.md")
	require.NoError(t, err)
	src, err := os.ReadFile("testingdoc_test.go")
	require.NoError(t, err)

	_, code, ok := strings.Cut(string(src), "\nimport (")
	require.True(t, ok, "testingdoc_test.go has an import block")
	want := "import (" + code

	before, rest, ok := strings.Cut(string(doc), "```go\n")
	require.True(t, ok, "docs/testing.md has a Go block")
	block, _, ok := strings.Cut(rest, "```\n")
	require.True(t, ok, "the Go block is closed")
	assert.Equal(t, want, block, "docs/testing.md's first Go block differs from testingdoc_test.go; copy the file's text from `import (` on into the page")

	headings := 0
	for _, line := range strings.Split(before, "\n") {
		if strings.HasPrefix(line, "## ") {
			headings++
		}
	}
	assert.Equal(t, 1, headings, "the block is in the page's first section")
}
