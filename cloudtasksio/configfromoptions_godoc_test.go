package cloudtasksio

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// godocKey is one option key as ConfigFromOptions' doc comment spells it: a fixed key, or a
// header family as "<prefix><Name>".
var godocKey = regexp.MustCompile(`^[a-z][a-z0-9.-]*([a-z0-9]|\.<Name>)$`)

// godocOptionKeys returns the keys ConfigFromOptions' doc comment lists: the words before the
// colon of each item of its list, one item being a line "  - " and the lines indented under it.
func godocOptionKeys(t *testing.T) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "configfromoptions.go", nil, parser.ParseComments)
	require.NoError(t, err)
	var doc string
	for _, d := range file.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "ConfigFromOptions" && fn.Doc != nil {
			doc = fn.Doc.Text()
		}
	}
	require.NotEmpty(t, doc, "ConfigFromOptions has no doc comment in configfromoptions.go")

	var items []string
	for line := range strings.SplitSeq(doc, "\n") {
		switch {
		case strings.HasPrefix(line, "  - "):
			items = append(items, strings.TrimPrefix(line, "  - "))
		case strings.HasPrefix(line, "    ") && len(items) > 0:
			items[len(items)-1] += " " + strings.TrimSpace(line)
		}
	}
	var keys []string
	for _, item := range items {
		named, _, found := strings.Cut(item, ":")
		require.True(t, found, "the doc item %q names no keys before a colon", item)
		for k := range strings.SplitSeq(named, ",") {
			k = strings.TrimSpace(k)
			require.Regexp(t, godocKey, k, "the doc item %q has a word before its colon that is not an option key", item)
			keys = append(keys, k)
		}
	}
	return keys
}

// acceptedOptionKeys returns every key the option table accepts, spelled as the doc comment
// spells them: the fixed keys, "<prefix><Name>" for a header family, and each entry of a
// format's options.
func acceptedOptionKeys() []string {
	var keys []string
	for _, r := range optionTable {
		switch {
		case !r.prefix:
			keys = append(keys, r.key)
		case r.entries == nil:
			keys = append(keys, r.key+"<Name>")
		default:
			for _, e := range r.entries {
				keys = append(keys, r.key+e)
			}
		}
	}
	return keys
}

// TestConfigFromOptionsDocListsExactlyTheAcceptedKeys keeps the key list in ConfigFromOptions'
// doc comment and the key table the parser reads the same set, both ways, each key once.
func TestConfigFromOptionsDocListsExactlyTheAcceptedKeys(t *testing.T) {
	documented := godocOptionKeys(t)
	accepted := acceptedOptionKeys()
	require.Contains(t, accepted, "csv.field-delimiter", "the table has the format options")
	require.Contains(t, accepted, "http.headers.<Name>", "the table has the header families")
	for _, k := range accepted {
		assert.Contains(t, documented, k, "ConfigFromOptions accepts %q, but its doc comment does not list it", k)
	}
	for _, k := range documented {
		assert.Contains(t, accepted, k, "ConfigFromOptions' doc comment lists %q, which it does not accept", k)
	}
	slices.Sort(documented)
	assert.Equal(t, len(documented), len(slices.Compact(documented)), "the doc comment lists a key twice")
}
