package xlang

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestThePythonPackageServesTheSameReleasesAndIdentifier keeps the Python wrapper
// (python/beam_cloudtasks), which checks the caller's Beam release before it expands, in step
// with the service's own check and identifier.
func TestThePythonPackageServesTheSameReleasesAndIdentifier(t *testing.T) {
	src, err := os.ReadFile("python/beam_cloudtasks/__init__.py")
	require.NoError(t, err)
	major, minor, ok := parseVersion(core.SdkVersion)
	require.True(t, ok)
	assert.Contains(t, string(src), fmt.Sprintf(`SERVED_BEAM_RELEASES = (%q, "%d.%d")`, MinBeamVersion, major, minor))
	assert.Contains(t, string(src), fmt.Sprintf(`IDENTIFIER = %q`, Identifier))

	pyproject, err := os.ReadFile("python/pyproject.toml")
	require.NoError(t, err)
	assert.Regexp(t, regexp.QuoteMeta(fmt.Sprintf(`"apache-beam>=%s,<%d.%d"`, MinBeamVersion, major, minor+1)), string(pyproject))
}
