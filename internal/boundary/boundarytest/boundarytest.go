// Package boundarytest checks, in a package's tests, that the package prefixes its errors in
// one place (see package boundary): by reading the package's source, and by looking at the
// errors it returns.
package boundarytest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// BoundaryFile is the file of a package that declares its prefix.
const BoundaryFile = "boundary.go"

// Source is the parsed non-test Go files of one package, by file name.
type Source struct {
	Fset  *token.FileSet
	Files map[string]*ast.File
}

// Parse reads the non-test Go files of the folder a test runs in (its package's), and fails t
// when it finds fewer than atLeast: a check that reads nothing must not pass.
func Parse(t testing.TB, atLeast int) Source {
	t.Helper()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	src := Source{Fset: token.NewFileSet(), Files: map[string]*ast.File{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		text, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(src.Fset, name, text, parser.SkipObjectResolution)
		require.NoError(t, err)
		src.Files[name] = f
	}
	require.GreaterOrEqual(t, len(src.Files), atLeast, "the package's source files were not found")
	return src
}

// Pos is the position of n, for a message.
func (s Source) Pos(n ast.Node) string { return s.Fset.Position(n.Pos()).String() }

// NoHandWrittenPrefix fails t for each string literal starting with prefix outside
// BoundaryFile: an error, a log line or a panic that writes the prefix by hand shows it twice
// once it crosses the boundary. With declared set, BoundaryFile must hold the one literal that
// declares the prefix, or the scan saw nothing; a package whose errors leave through another
// package's boundary declares none.
func (s Source) NoHandWrittenPrefix(t testing.TB, prefix string, declared bool) {
	t.Helper()
	var found []string
	inBoundary := 0
	for name, f := range s.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			switch {
			case !strings.HasPrefix(v, prefix):
			case name == BoundaryFile:
				inBoundary++
			default:
				found = append(found, s.Pos(lit)+": "+lit.Value)
			}
			return true
		})
	}
	sort.Strings(found)
	assert.Empty(t, found, "the prefix %q is written by hand outside %s; build the text without it and let the boundary add it", prefix, BoundaryFile)
	if declared {
		assert.Equal(t, 1, inBoundary, "the scan must see the one prefix literal of %s, or it sees nothing", BoundaryFile)
	}
}

// FuncName is "Recv.Name" for a method, "Name" for a function.
func FuncName(fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if ix, ok := recv.(*ast.IndexExpr); ok {
		recv = ix.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return "?." + fn.Name.Name
}

// IsCallOf reports whether e calls the package-level function name.
func IsCallOf(e ast.Expr, name string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == name
}

// EachReturn calls check with the last value of each return statement of fn (not of its
// closures) that returns values.
func (s Source) EachReturn(fn *ast.FuncDecl, check func(last ast.Expr, pos string)) {
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return false // a closure's returns are not the function's
		}
		if ret, ok := n.(*ast.ReturnStmt); ok && len(ret.Results) > 0 {
			check(ret.Results[len(ret.Results)-1], s.Pos(ret))
		}
		return true
	})
}

// ExportedReturnThroughTheBoundary checks the shape of the package's ways out: each return
// statement of an exported function or method whose last result is an error (the DoFn methods
// Beam calls included) ends in nil or withPrefix(...), and the Error method of an exported
// error type returns prefixText(...). Unwrap, which hands out the wrapped error as it is, and
// the functions in exempt ("Recv.Name" for a method) are not checked. It returns the names it
// checked, for the caller to make sure it saw the ones it means.
func (s Source) ExportedReturnThroughTheBoundary(t testing.TB, exempt map[string]bool) map[string]bool {
	t.Helper()
	checked := map[string]bool{}
	for _, f := range s.Files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !fn.Name.IsExported() || fn.Name.Name == "Unwrap" || fn.Type.Results == nil {
				continue
			}
			name := FuncName(fn)
			results := fn.Type.Results.List
			last, _ := results[len(results)-1].Type.(*ast.Ident)
			var want string
			switch {
			case exempt[name]:
			case last != nil && last.Name == "error":
				want = "withPrefix"
			case fn.Name.Name == "Error" && fn.Recv != nil && ast.IsExported(strings.TrimSuffix(name, ".Error")):
				want = "prefixText"
			}
			if want == "" {
				continue
			}
			checked[name] = true
			s.EachReturn(fn, func(last ast.Expr, pos string) {
				if id, ok := last.(*ast.Ident); ok && id.Name == "nil" && want == "withPrefix" {
					return
				}
				assert.True(t, IsCallOf(last, want), "%s: %s returns without %s", pos, name, want)
			})
		}
	}
	return checked
}

// PrefixedOnce checks that err starts with prefix and carries it once: at its start, or
// after ": " (where a wrapped error's text starts). Other words ending in the prefix's text
// ("known formats: ") do not count.
func PrefixedOnce(t testing.TB, err error, prefix, what string) {
	t.Helper()
	require.Error(t, err, what)
	text := err.Error()
	assert.True(t, strings.HasPrefix(text, prefix), "%s: %q does not start with %q", what, text, prefix)
	assert.Equal(t, 1, strings.Count(": "+text, ": "+prefix), "%s: %q carries %q more than once", what, text, prefix)
}
