package doclinks

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the module's root, two folders up from this package.
const root = "../.."

// TestEveryRelativeLinkReachesAFileAndItsAnchor follows each relative link of every markdown
// page of the module (outside testdata and hidden folders) to its file and, for a link into a
// markdown page, to a heading's anchor as GitHub makes it.
func TestEveryRelativeLinkReachesAFileAndItsAnchor(t *testing.T) {
	pages := markdownPages(t)
	require.NotEmpty(t, pages)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		raw, err := os.ReadFile(page)
		require.NoError(t, err)
		anchors[page] = headingAnchors(string(raw))
		return anchors[page]
	}
	checked := 0
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, l := range relativeLinks(string(raw)) {
			checked++
			target, anchor, _ := strings.Cut(l.target, "#")
			file := page
			if target != "" {
				file = filepath.Join(filepath.Dir(page), target)
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: the link %q leads to no file", rel(page), l.line, l.target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			assert.True(t, anchorsOf(file)[anchor], "%s:%d: the link %q names no heading of %s", rel(page), l.line, l.target, rel(file))
		}
	}
	assert.Greater(t, checked, 100, "the pages' links were found")
}

func TestHeadingAnchorsAreGitHubs(t *testing.T) {
	got := headingAnchors("# Performance\n\n## Under a create quota\n\n```sh\n# not a heading\n```\n\n" +
		"### The goal cases under the issue's own quota (250/s, bucket 25)\n## `Write` on [prism](x.md), **fast**\n## Under a create quota\n")
	for _, want := range []string{"performance", "under-a-create-quota", "the-goal-cases-under-the-issues-own-quota-250s-bucket-25", "write-on-prism-fast", "under-a-create-quota-1"} {
		assert.True(t, got[want], "anchor %q among %v", want, got)
	}
	assert.False(t, got["not-a-heading"], "a comment in a code block is no heading")
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}

func markdownPages(t *testing.T) []string {
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			pages = append(pages, path)
		}
		return nil
	})
	require.NoError(t, err)
	return pages
}

type link struct {
	line   int
	target string
}

var linkPattern = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// relativeLinks returns the links of a page that stay in the module, outside code.
func relativeLinks(md string) []link {
	var links []link
	fence := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || strings.HasPrefix(line, "    ") {
			continue
		}
		line = inlineCode.ReplaceAllString(line, "")
		for _, m := range linkPattern.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, link{line: i + 1, target: target})
		}
	}
	return links
}

var (
	inlineCode  = regexp.MustCompile("`[^`]*`")
	inlineLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	headingLine = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// headingAnchors returns the anchors GitHub gives a page's headings: the text lowercased,
// without punctuation, spaces as hyphens, a repeated anchor numbered from -1.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		m := headingLine.FindStringSubmatch(line)
		if fence || m == nil {
			continue
		}
		text := inlineLink.ReplaceAllString(m[1], "$1")
		var sb strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
				sb.WriteRune(r)
			case r == ' ':
				sb.WriteRune('-')
			}
		}
		a := sb.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
