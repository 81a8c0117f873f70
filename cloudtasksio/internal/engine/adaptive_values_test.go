package engine

import (
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The controller's constants that the engine's tests assert against. Package adaptive keeps
// them unexported, so these tests keep copies, and
// TestTheControllersValuesCopiedHereAreTheControllers checks that each is written here as
// package adaptive writes it.
const (
	initialLimit        = 0
	initialRate         = 100.0
	decreaseFactor      = 0.9
	growthFloor         = 1.0
	growthDoubling      = 500 * time.Millisecond
	growthDoublings     = 5
	loneRejectionFactor = 0.97
	shareHoldBand       = 0.1
	slowStartRound      = 60 * time.Millisecond
)

// atOnce is how many creates slow start lets go at once on a queue's first use: its first
// limit, and one create may always be in flight.
const atOnce = max(initialLimit, 1)

// constants returns the source of the value of each constant declared in the first const
// declaration of the files, or of every const declaration when first is false.
func constants(t *testing.T, files []string, first bool) map[string]string {
	t.Helper()
	values := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						var b strings.Builder
						require.NoError(t, format.Node(&b, fset, vs.Values[i]))
						values[n.Name] = b.String()
					}
				}
			}
			if first {
				return values
			}
		}
	}
	return values
}

func TestTheControllersValuesCopiedHereAreTheControllers(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("adaptive", "*.go"))
	require.NoError(t, err)
	var sources []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			sources = append(sources, f)
		}
	}
	controller := constants(t, sources, false)
	copies := constants(t, []string{"adaptive_values_test.go"}, true)
	require.NotEmpty(t, copies)
	for name, value := range copies {
		assert.Equal(t, controller[name], value, "%s as package adaptive writes it", name)
	}
}
