package cloudtasksio

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"https://api.example.com/v1/orders", "http://127.0.0.1:8080/x?y=1", "HTTPS://EXAMPLE.COM"} {
		assert.NoError(t, checkURL(ok), ok)
	}
	for _, bad := range []string{"", "/relative", "ftp://example.com/", "https://", "https:///path", "https://exa mple.com/",
		"https://example.com/" + strings.Repeat("a", 2083), "mailto:x@example.com"} {
		assert.Error(t, checkURL(bad), bad)
	}
}
