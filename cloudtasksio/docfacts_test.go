package cloudtasksio

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// This file checks facts the documentation states against the code that makes them true.

// typeDoc returns the doc comment of the type named name in the package's files.
func typeDoc(t *testing.T, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.Name == name {
					if ts.Doc != nil {
						return ts.Doc.Text()
					}
					return g.Doc.Text()
				}
			}
		}
	}
	t.Fatalf("no type %s", name)
	return ""
}

// failureCodes returns the names of the package's Code constants: the codes a failure that
// reaches the failure policy carries.
func failureCodes(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("failed.go")
	require.NoError(t, err)
	var codes []string
	for _, m := range regexp.MustCompile(`(?m)^\t(Code[A-Z]\w*) += "`).FindAllStringSubmatch(string(src), -1) {
		codes = append(codes, m[1])
	}
	require.NotEmpty(t, codes)
	return codes
}

// FailurePolicy's doc lists every failure that reaches the policy, by its code.
func TestFailurePolicyDocNamesEveryCodeThatReachesIt(t *testing.T) {
	doc := strings.Join(strings.Fields(typeDoc(t, "FailurePolicy")), " ")
	for _, code := range failureCodes(t) {
		assert.Contains(t, doc, code, "FailurePolicy's doc comment names %s", code)
	}
}

// docSection returns the section of a docs page that starts at heading, up to the next
// heading of any level.
func docSection(t *testing.T, page, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", page))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	require.True(t, ok, "docs/%s has the heading %q", page, heading)
	if i := strings.Index(rest, "\n#"); i >= 0 {
		rest = rest[:i]
	}
	return strings.Join(strings.Fields(rest), " ")
}

// configuration.md says what the sink does with a task's size: it refuses one over
// maxTaskBytes itself, and leaves the service to judge the rest.
func TestConfigurationSaysTheSinkRefusesATaskOverItsSizeLimit(t *testing.T) {
	checks := docSection(t, "configuration.md", "### Checks on every task")
	assert.NotContains(t, checks, "left to the service")
	assert.Contains(t, checks, "1,048,576 bytes")
	assert.Equal(t, 1_048_576, maxTaskBytes)
	assert.Contains(t, checks, "TASK_TOO_LARGE")
	assert.Contains(t, checks, "tasksTooLarge")
	assert.Contains(t, checks, "100,000 bytes")
	assert.Equal(t, 100_000, maxStagedTaskBytes)
}

// readme returns the README with runs of white space as one space.
func readme(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	return strings.Join(strings.Fields(string(raw)), " ")
}

// The sink paces its own creates under a create quota (adaptive concurrency), never delivery:
// the README must not say it never paces at all.
func TestReadmeSaysTheSinkPacesCreatesNotDelivery(t *testing.T) {
	r := readme(t)
	assert.NotContains(t, r, "It never paces.")
	assert.Contains(t, r, "never paces delivery")
	assert.Contains(t, r, "create quota")
}

// The e-mail rule checks a shape, not a kind of account: the Compute Engine and App Engine
// default accounts pass, and neither the docs nor the error for a bad address suggest
// otherwise.
func TestEveryKindOfServiceAccountEmailIsAccepted(t *testing.T) {
	for _, email := range []string{
		"dispatcher@my-project.iam.gserviceaccount.com",
		"123456789012-compute@developer.gserviceaccount.com",
		"my-project@appspot.gserviceaccount.com",
	} {
		h := &HTTPTarget{URL: "https://example.com/", OIDC: &OIDCToken{ServiceAccountEmail: email}}
		assert.NoError(t, h.validate(), email)
		h = &HTTPTarget{URL: "https://example.com/", OAuth: &OAuthToken{ServiceAccountEmail: email}}
		assert.NoError(t, h.validate(), email)
	}
	err := (&HTTPTarget{URL: "https://example.com/", OIDC: &OIDCToken{ServiceAccountEmail: "not an address"}}).validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-compute@developer.gserviceaccount.com", "the error shows that a default account is an example of the shape")

	raw, err := os.ReadFile(filepath.Join("..", "docs", "credentials.md"))
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(raw)), " ")
	assert.NotContains(t, doc, "must look like `name@project.iam.gserviceaccount.com`")
	assert.Contains(t, doc, "`123456789-compute@developer.gserviceaccount.com`")
	assert.Contains(t, doc, "`my-project@appspot.gserviceaccount.com`")
}

// testNameInComment matches the name of a test, benchmark, fuzz target or example.
var testNameInComment = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz|Example)[A-Z]\w*`)

// A comment that names a test sends the reader to it: every test, benchmark, fuzz target or
// example a comment of the module's Go files names must exist somewhere in the module.
func TestEveryTestNamedInACommentExists(t *testing.T) {
	fset := token.NewFileSet()
	defined := map[string]bool{}
	mentioned := map[string]string{} // name -> a file that mentions it
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil // not this test's business: the build reports it
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && testNameInComment.MatchString(fn.Name.Name) {
				defined[fn.Name.Name] = true
			}
		}
		for _, cg := range f.Comments {
			for _, name := range testNameInComment.FindAllString(cg.Text(), -1) {
				mentioned[name] = path
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, defined)
	for name, path := range mentioned {
		assert.True(t, defined[name], "%s names %s, which no file of the module defines", path, name)
	}
}

// docText returns a docs page with runs of white space as one space.
func docText(t *testing.T, page string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", page))
	require.NoError(t, err)
	return strings.Join(strings.Fields(string(raw)), " ")
}

// The reference's reasons and advice that this project's docs must carry, in its own words.
func TestDocsCarryTheReferencesFacts(t *testing.T) {
	overview := docText(t, "overview.md")
	assert.Contains(t, overview, "never creates or changes a queue, for two reasons")
	assert.Contains(t, overview, "once a queue is deleted, Cloud Tasks keeps its name from being used again for days")

	formatsDoc := docText(t, "formats.md")
	assert.Contains(t, formatsDoc, "### Multipart bodies")
	assert.Contains(t, formatsDoc, "There is no multipart format")

	creds := docText(t, "credentials.md")
	assert.Contains(t, creds, "Never put its contents in a Kubernetes ConfigMap, in the value of an option key")
	steps := []string{"1. Create a new key", "2. Put it in the Secret", "3. Wait until every pod", "4. Restart the job", "5. Disable the old key", "6. Delete the old key"}
	last := -1
	for _, s := range steps {
		i := strings.Index(creds, s)
		require.Greater(t, i, last, "credentials.md gives the rotation steps in order: %q", s)
		last = i
	}

	r := readme(t)
	assert.Contains(t, r, "## What it takes from the reference connector")
	assert.Contains(t, r, "are facts, never code or text")
}
