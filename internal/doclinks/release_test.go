package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	versionHeading = regexp.MustCompile(`(?m)^## (v\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$`)
	beamRequire    = regexp.MustCompile(`(?m)^\s*github\.com/apache/beam/sdks/v2 (v\S+)`)
	pythonVersion  = regexp.MustCompile(`(?m)^version = "([^"]+)"`)
	goGetVersion   = regexp.MustCompile(`go get github\.com/beam-cloudtasks/beam-cloudtasks@(v\S+?)\x60`)
)

func readRoot(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	require.NoError(t, err)
	return string(raw)
}

// TestTheNewestVersionIsTheOneTheModuleShips keeps the release notes in step with what a
// release ships: CHANGELOG.md has an Unreleased section above its versions, newest first; the
// newest names the Beam Go SDK that go.mod requires; and the README's go get line and the
// Python wrapper's version are that version.
func TestTheNewestVersionIsTheOneTheModuleShips(t *testing.T) {
	changelog := readRoot(t, "CHANGELOG.md")
	versions := versionHeading.FindAllStringSubmatchIndex(changelog, -1)
	require.NotEmpty(t, versions, "CHANGELOG.md has a heading \"## vX.Y.Z (YYYY-MM-DD)\" per version")
	unreleased := strings.Index(changelog, "\n## Unreleased\n")
	require.Positive(t, unreleased, "CHANGELOG.md has an \"## Unreleased\" section")
	assert.Less(t, unreleased, versions[0][0], "the Unreleased section comes before the versions")

	newest := changelog[versions[0][2]:versions[0][3]]
	for i := 1; i < len(versions); i++ {
		older := changelog[versions[i][2]:versions[i][3]]
		assert.True(t, semverLess(older, newest), "versions go newest first: %s after %s", older, newest)
		newest = older
	}
	newest = changelog[versions[0][2]:versions[0][3]]

	section := changelog[versions[0][0]:]
	if len(versions) > 1 {
		section = changelog[versions[0][0]:versions[1][0]]
	}
	beam := beamRequire.FindStringSubmatch(readRoot(t, "go.mod"))
	require.NotNil(t, beam, "go.mod requires the Beam Go SDK")
	assert.Contains(t, section, "Beam Go SDK "+beam[1], "the newest version names the Beam Go SDK that go.mod requires")

	readme := goGetVersion.FindStringSubmatch(readRoot(t, "README.md"))
	require.NotNil(t, readme, "the README says how to pin a version with go get")
	assert.Equal(t, newest, readme[1], "the README pins the newest version")

	py := pythonVersion.FindStringSubmatch(readRoot(t, "cloudtasksio/xlang/python/pyproject.toml"))
	require.NotNil(t, py, "the Python wrapper has a version")
	assert.Equal(t, strings.TrimPrefix(newest, "v"), py[1], "the Python wrapper's version is the module's")
}

// semverLess reports whether version a (vX.Y.Z) comes before b.
func semverLess(a, b string) bool {
	pa, pb := strings.Split(strings.TrimPrefix(a, "v"), "."), strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := range 3 {
		x, _ := strconv.Atoi(pa[i]) // the heading's pattern holds digits only
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return false
}
