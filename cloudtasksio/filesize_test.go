package cloudtasksio

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxSourceLines is the most lines a non-test .go file under cloudtasksio/ may have: a longer
// file mixes concerns a newcomer has to tell apart, and is split by concern instead.
const maxSourceLines = 500

// oversizeAllowed lists the files, relative to cloudtasksio/, that may still exceed
// maxSourceLines, each with the reason. Keep it empty: an entry is a debt with a name on it,
// and the test fails once the file fits, so the entry goes away in the same commit as the split.
var oversizeAllowed = map[string]string{}

// TestNoSourceFileOver500Lines walks cloudtasksio/ and its subpackages (the engine, the
// emulator and its command) and fails naming every non-test .go file longer than
// maxSourceLines, counting lines as wc -l does.
func TestNoSourceFileOver500Lines(t *testing.T) {
	lines := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// The go tool ignores testdata and directories starting with "." or "_".
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(src, []byte("\n"))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			n++
		}
		lines[filepath.ToSlash(path)] = n
		return nil
	})
	require.NoError(t, err)
	for _, want := range []string{"write.go", "internal/engine/engine.go", "cloudtaskstest/server.go", "cloudtaskstest/cmd/cloudtasks-emulator/main.go"} {
		require.Contains(t, lines, want, "the walk must reach every subpackage, or it checks nothing")
	}

	var over, fits []string
	for path, n := range lines {
		_, allowed := oversizeAllowed[path]
		switch {
		case n > maxSourceLines && !allowed:
			over = append(over, path+" ("+strconv.Itoa(n)+" lines)")
		case n <= maxSourceLines && allowed:
			fits = append(fits, path+" ("+strconv.Itoa(n)+" lines)")
		}
	}
	for path := range oversizeAllowed {
		if _, ok := lines[path]; !ok {
			fits = append(fits, path+" (no such file)")
		}
	}
	sort.Strings(over)
	sort.Strings(fits)
	assert.Empty(t, over, "these files have more than %d lines: split each by concern into files of the same package", maxSourceLines)
	assert.Empty(t, fits, "these files are allowed to exceed %d lines in oversizeAllowed but no longer do: remove their entries", maxSourceLines)
}
