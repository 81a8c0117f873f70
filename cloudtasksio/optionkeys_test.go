package cloudtasksio

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionKeysAreTheKeysConfigFromOptionsKnows checks that every listed key, and a header
// entry under every listed prefix, is a key ConfigFromOptions recognizes (whatever it then
// says about the value), and that the list is a copy.
func TestOptionKeysAreTheKeysConfigFromOptionsKnows(t *testing.T) {
	keys := OptionKeys()
	require.Contains(t, keys, "project")
	require.Contains(t, keys, "sink.recovery.max-attempts")
	for _, prefix := range OptionHeaderPrefixes() {
		keys = append(keys, prefix+"X-Test")
	}
	for _, k := range keys {
		_, err := ConfigFromOptions(map[string]string{k: "x"})
		var oe *OptionError
		if errors.As(err, &oe) && oe.Key == k {
			assert.NotContains(t, oe.Reason, "unknown option key", "key %q", k)
		}
	}
	_, err := ConfigFromOptions(map[string]string{"http.uri": "x"})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "unknown option key"), "an unlisted key is unknown: %v", err)

	OptionKeys()[0] = "changed"
	assert.Equal(t, "project", OptionKeys()[0], "callers get a copy")
}
