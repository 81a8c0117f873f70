package formats

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWithDoesNotModifyTheOriginal(t *testing.T) {
	base := CSV().With(OptionCSVFieldDelimiter, ";")
	derived := base.With(OptionCSVNullLiteral, "NULL")
	assert.Equal(t, map[string]string{"field-delimiter": ";"}, base.Options)
	assert.Equal(t, map[string]string{"field-delimiter": ";", "null-literal": "NULL"}, derived.Options)
}
