package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxBackUp is issue 22's bound on the arrows that may run back up a floor.
const maxBackUp = 20

// TestModuleKeepsItsLayers measures this module: at most maxBackUp arrows back up a floor, no
// import cycle, and nothing runs back up into the module-root internal/ folder, which holds
// only libraries (of cloudtasksio, formats, deadletter and the benchmarks); applications live
// beside their commands, in examples/ and tools/.
func TestModuleKeepsItsLayers(t *testing.T) {
	root, err := moduleRoot(".")
	require.NoError(t, err)
	g, err := loadModule(root)
	require.NoError(t, err)
	r := measure(g)
	t.Log(totals(g, r))

	require.Contains(t, g.pkgs, "cloudtasksio", "the measurement read the module")
	require.Contains(t, g.pkgs, "internal/boundedtext", "the measurement read the module")
	assert.LessOrEqual(t, len(r.backUp), maxBackUp, "arrows back up a floor (go run ./tools/layers lists them):\n%s", describe(r.backUp))
	assert.Empty(t, r.cycles, "import cycles")
	var intoInternal []arrow
	for _, a := range r.backUp {
		if strings.HasPrefix(a.to, "internal/") {
			intoInternal = append(intoInternal, a)
		}
	}
	assert.Zero(t, len(intoInternal), "arrows back up into internal/: it holds something that sits above its importer:\n%s", describe(intoInternal))
}

func describe(arrows []arrow) string {
	var b strings.Builder
	for _, a := range arrows {
		b.WriteString("  " + a.from + " -> " + a.to + ": " + a.why + "\n")
	}
	return b.String()
}

// fixtureModFile is the name the fixture's module files have in testdata: a folder holding a
// file named go.mod is another module, which the go command leaves out of this module's zip,
// so a fixture with one would be missing for anyone who gets the module from a proxy.
const fixtureModFile = "go.mod.txt"

// house copies testdata/house into a temporary folder, naming each fixtureModFile go.mod, and
// returns that folder: the fixture module, with its nested module.
func house(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "house")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if d.Name() == fixtureModFile {
			to = filepath.Join(filepath.Dir(to), "go.mod")
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	require.NoError(t, err)
	for _, mod := range []string{"go.mod", filepath.Join("nested", "go.mod")} {
		require.FileExists(t, filepath.Join(dst, mod), "testdata/house has its module files as %s", fixtureModFile)
	}
	return dst
}

// TestFixturesShipInTheModuleZip: no folder under testdata holds a file named go.mod (in any
// case), which would make it a module of its own, left out of this module's zip (and so out of
// the module cache of anyone who tests the module fetched from a proxy).
func TestFixturesShipInTheModuleZip(t *testing.T) {
	err := filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// The module zip's rule ignores case (golang.org/x/mod/zip).
		assert.False(t, !d.IsDir() && strings.EqualFold(d.Name(), "go.mod"), "%s makes its folder another module, dropped from the module zip; name it %s", p, fixtureModFile)
		return nil
	})
	require.NoError(t, err)
}

// TestLoadReadsImportClausesOfThePlatformsFiles loads testdata/house and checks what counts: build
// and test imports apart, external tests folded into their package, a test-only folder marked,
// and testdata, "_" folders, nested modules and files of other builds left out.
func TestLoadReadsImportClausesOfThePlatformsFiles(t *testing.T) {
	g, err := loadModule(house(t))
	require.NoError(t, err)
	assert.Equal(t, "example.com/house", g.module)
	assert.ElementsMatch(t, []string{"core", "e2e", "shared/app", "shared/lib"}, keys(g), "testdata, _old and nested (its own module) are not packages of the module")

	assert.Equal(t, []string{"shared/lib"}, g.pkgs["core"].build)
	assert.Equal(t, []string{"shared/app"}, g.pkgs["core"].test, "core_test imports core itself (not an arrow) and shared/app")
	assert.False(t, g.pkgs["core"].testOnly)
	assert.Empty(t, g.pkgs["shared/lib"].build, "ignored.go is excluded by its build constraint")
	assert.True(t, g.pkgs["e2e"].testOnly)
	assert.Equal(t, []string{"shared/app"}, g.pkgs["e2e"].test)
}

// TestHouseOfTestdata is the measurement of testdata/house, worked by hand: shared/ holds a
// library of core and an application on core, so core's arrows into shared/ run back up; the
// external test of core closes a cycle through shared/app.
func TestHouseOfTestdata(t *testing.T) {
	g, err := loadModule(house(t))
	require.NoError(t, err)
	r := measure(g)

	assert.Equal(t, map[string]int{"shared/lib": 0, "core": 1, "shared/app": 2, "e2e": 3}, r.floor, "a test-only folder sits above what it tests")
	assert.Equal(t, 4, r.floors())
	assert.Len(t, r.arrows, 4)
	assert.Equal(t, 2, r.testArrows())
	assert.Equal(t, []string{"core -> shared/app (test)", "core -> shared/lib"}, names(r.backUp))
	assert.Equal(t, "folder shared/ also holds shared/app, above core", r.backUp[0].why, "core -> shared/lib")
	assert.Equal(t, "shared/app is on floor 2, core on floor 1; folder shared/ also holds shared/app, above core", r.backUp[1].why, "core -> shared/app, a test arrow")
	assert.Equal(t, map[string][]string{"shared/": {"core"}}, r.straddling)
	assert.Equal(t, [][]string{{"core", "shared/app"}}, r.cycles)
	assert.Equal(t, "example.com/house: 4 packages on 4 floors, 4 arrows (2 build, 2 test), 2 run back up a floor, 1 import cycles", totals(g, r))
}

// TestFloorIsTheLongestChainOfBuildArrows: a package's floor is one more than the highest it
// imports, not one more than the first; test arrows do not lift a package.
func TestFloorIsTheLongestChainOfBuildArrows(t *testing.T) {
	r := measure(newGraph(map[string]pkg{
		"a": {},
		"b": {build: []string{"a"}},
		"c": {build: []string{"b"}},
		"d": {build: []string{"a", "c"}, test: []string{"e"}},
		"e": {},
	}))
	assert.Equal(t, map[string]int{"a": 0, "b": 1, "c": 2, "d": 3, "e": 0}, r.floor)
	assert.Empty(t, r.backUp, "every arrow runs down; d's test arrow goes to a lower floor")
}

// TestTestArrowSidewaysOrUpRunsBackUp: a test that imports a package on its own floor or
// higher runs back up; one to a lower floor does not.
func TestTestArrowSidewaysOrUpRunsBackUp(t *testing.T) {
	r := measure(newGraph(map[string]pkg{
		"lib":  {},
		"sink": {build: []string{"lib"}, test: []string{"fake", "app", "lib2"}},
		"fake": {build: []string{"lib"}},
		"app":  {build: []string{"sink"}},
		"lib2": {},
	}))
	assert.Equal(t, []string{"sink -> app (test)", "sink -> fake (test)"}, names(r.backUp))
	assert.Equal(t, [][]string{{"app", "sink"}}, r.cycles, "the test arrow to app closes a cycle")
}

// TestFolderBothBelowAndAboveRunsBackUp is the shape issue 22 names: a module-root internal/
// holding a library of the sink and an application on it. Every arrow from the sink's side into
// internal/ runs back up, the application's arrows down do not; with the application moved
// beside its command, none runs back up.
func TestFolderBothBelowAndAboveRunsBackUp(t *testing.T) {
	before := measure(newGraph(map[string]pkg{
		"internal/text":         {},
		"internal/examples/app": {build: []string{"sink", "internal/text"}},
		"sink":                  {build: []string{"internal/text", "sink/internal/engine"}},
		"sink/internal/engine":  {build: []string{"internal/text"}},
		"examples/app":          {build: []string{"internal/examples/app"}},
	}))
	assert.Equal(t, []string{"sink -> internal/text", "sink/internal/engine -> internal/text"}, names(before.backUp))
	assert.Equal(t, map[string][]string{"internal/": {"sink", "sink/internal/engine"}}, before.straddling)

	after := measure(newGraph(map[string]pkg{
		"internal/text":        {},
		"examples/app/app":     {build: []string{"sink", "internal/text"}},
		"sink":                 {build: []string{"internal/text", "sink/internal/engine"}},
		"sink/internal/engine": {build: []string{"internal/text"}},
		"examples/app":         {build: []string{"examples/app/app"}},
	}))
	assert.Empty(t, after.backUp)
	assert.Empty(t, after.straddling)
}

// TestImportOfTheFoldersOwnPackageWeighsThatPackageAlone: a package that imports its parent
// folder's package (pubsubdl imports deadletter) runs down even when a sibling below that
// folder sits above the importer; only the parent package itself is weighed.
func TestImportOfTheFoldersOwnPackageWeighsThatPackageAlone(t *testing.T) {
	r := measure(newGraph(map[string]pkg{
		"dl":        {},
		"dl/pubsub": {build: []string{"dl"}},
		"dl/replay": {build: []string{"dl/pubsub"}},
	}))
	assert.Empty(t, r.backUp)

	part, parent := partHolding("dl/pubsub", "dl")
	assert.Equal(t, "dl", part)
	assert.True(t, parent)
	part, parent = partHolding("a/b/c", "a/d/e")
	assert.Equal(t, "a/d", part)
	assert.False(t, parent)
	part, parent = partHolding("a", "a/d/e")
	assert.Equal(t, "a/d", part)
	assert.False(t, parent)
}

// TestTestOnlyPackageSitsAboveWhatItTests: an integration folder made of tests only is placed
// above every package its tests import, so none of its arrows runs back up.
func TestTestOnlyPackageSitsAboveWhatItTests(t *testing.T) {
	r := measure(newGraph(map[string]pkg{
		"lib":         {},
		"app":         {build: []string{"lib"}},
		"integration": {test: []string{"app", "lib"}, testOnly: true},
	}))
	assert.Equal(t, 2, r.floor["integration"])
	assert.Empty(t, r.backUp)
	assert.Equal(t, 2, r.testArrows())
}

func TestModulePathReadsTheModuleLine(t *testing.T) {
	assert.Equal(t, "example.com/m", modulePath([]byte("// c\nmodule example.com/m\n\ngo 1.26\n")))
	assert.Equal(t, "example.com/q", modulePath([]byte("module \"example.com/q\"\n")))
	assert.Equal(t, "", modulePath([]byte("go 1.26\n")))
}

func newGraph(pkgs map[string]pkg) *graph {
	g := &graph{module: "example.com/m", pkgs: map[string]*pkg{}}
	for d, p := range pkgs {
		p.dir = d
		g.pkgs[d] = &p
	}
	return g
}

func keys(g *graph) []string {
	var out []string
	for d := range g.pkgs {
		out = append(out, d)
	}
	return out
}

func names(arrows []arrow) []string {
	var out []string
	for _, a := range arrows {
		n := a.from + " -> " + a.to
		if a.test {
			n += " (test)"
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// examplesAllowedInternal lists the example packages that may still import the module's
// internal/ packages, with the reason. Every other package under examples/ imports only public
// packages: examples are what users copy into their own modules, where Go refuses another
// module's internal/ imports.
var examplesAllowedInternal = map[string]string{
	"examples/quickstart/quickstart": "its optional -chart draws with internal/perfchart, the chart library the benchmarks " +
		"share; the chart is not what the quickstart teaches (copy it without chart.go and the -chart flag)",
}

// TestExamplesImportOnlyPublicPackages fails when a file under examples/ (test files included)
// imports an internal/ package of this module, unless the package is in
// examplesAllowedInternal; and when an allowed package no longer needs its entry.
func TestExamplesImportOnlyPublicPackages(t *testing.T) {
	root, err := moduleRoot(".")
	require.NoError(t, err)
	g, err := loadModule(root)
	require.NoError(t, err)
	internal := func(dir string) bool {
		return dir == "internal" || strings.HasPrefix(dir, "internal/") || strings.Contains(dir, "/internal/") || strings.HasSuffix(dir, "/internal")
	}
	seen := 0
	for dir, p := range g.pkgs {
		if !strings.HasPrefix(dir, "examples/") {
			continue
		}
		seen++
		var bad []string
		for _, imp := range append(slices.Clone(p.build), p.test...) {
			if internal(imp) {
				bad = append(bad, imp)
			}
		}
		if _, allowed := examplesAllowedInternal[dir]; allowed {
			assert.NotEmpty(t, bad, "%s no longer imports internal/ packages: remove its entry from examplesAllowedInternal", dir)
			continue
		}
		assert.Empty(t, bad, "%s imports the module's internal packages; examples use only the public API (move what they need into a public package)", dir)
	}
	assert.Greater(t, seen, 5, "the check read the examples")
}
