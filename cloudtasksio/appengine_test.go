package cloudtasksio

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckRelativeURI(t *testing.T) {
	for _, ok := range []string{"", "/", "/tasks/orders", "/tasks?id=1&x=%20y"} {
		assert.NoError(t, checkRelativeURI(ok), ok)
	}
	for _, bad := range []string{"tasks", "//host/tasks", "/a b", "/a#frag", "/a\tb", "/a\nb", "/" + strings.Repeat("a", 2083)} {
		assert.Error(t, checkRelativeURI(bad), bad)
	}
}

func FuzzCheckRelativeURI(f *testing.F) {
	for _, s := range []string{"", "/", "/a?b=c", "//x", "/a#b", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		if checkRelativeURI(uri) != nil {
			return
		}
		if uri == "" {
			return
		}
		if uri[0] != '/' || strings.HasPrefix(uri, "//") || strings.ContainsAny(uri, "# \t\r\n") || len(uri) > maxURLLength {
			t.Fatalf("accepted %q", uri)
		}
	})
}
