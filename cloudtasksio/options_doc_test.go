package cloudtasksio_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// docOptionRow matches a reference row of docs/options.md: a table row whose first cell is
// one option key in backquotes.
var docOptionRow = regexp.MustCompile("^\\| `([a-z][a-z0-9.-]*(?:<Name>)?)` \\|")

// documentedOptionKeys returns the keys of the reference tables of docs/options.md: every
// section before the differences from the reference connectors, which list keys this package
// refuses on purpose.
func documentedOptionKeys(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../docs/options.md")
	require.NoError(t, err)
	var keys []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## Differences") {
			break
		}
		if m := docOptionRow.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// TestEveryOptionKeyIsDocumentedAndEveryDocumentedKeyExists keeps docs/options.md and the keys
// ConfigFromOptions accepts the same set: the fixed keys, the two header families (documented
// as "<prefix><Name>") and the format options ("<format>.<option>").
func TestEveryOptionKeyIsDocumentedAndEveryDocumentedKeyExists(t *testing.T) {
	accepted := cloudtasksio.OptionKeys()
	for _, p := range cloudtasksio.OptionHeaderPrefixes() {
		accepted = append(accepted, p+"<Name>")
	}
	for _, opt := range []string{formats.OptionCSVFieldDelimiter, formats.OptionCSVNullLiteral,
		formats.OptionCSVQuoteCharacter, formats.OptionCSVDisableQuoteCharacter} {
		accepted = append(accepted, formats.NameCSV+"."+opt)
	}
	accepted = append(accepted, formats.NameAvro+"."+formats.OptionAvroSchema)

	documented := documentedOptionKeys(t)
	require.NotEmpty(t, documented, "no option rows found in docs/options.md")
	for _, k := range accepted {
		assert.Contains(t, documented, k, "option key %q is accepted but has no row in docs/options.md", k)
	}
	for _, k := range documented {
		assert.Contains(t, accepted, k, "docs/options.md documents %q, which ConfigFromOptions does not accept", k)
	}
	slices.Sort(documented)
	assert.Equal(t, len(documented), len(slices.Compact(documented)), "a key has two rows in docs/options.md")
}
