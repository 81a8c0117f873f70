package main

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// pkg is one package of the module: its folder relative to the module root ("." for the root
// itself) and the module packages its files import, as folders relative to the root.
type pkg struct {
	dir string
	// build holds what the package's non-test files import; test what only its _test.go
	// files import (in-package or external tests), each once, never the package itself.
	build, test []string
	// testOnly is set for a folder with test files and no other Go file (integration/).
	testOnly bool
}

// graph is the module's import graph: every package, by folder.
type graph struct {
	module string
	pkgs   map[string]*pkg
}

// loadModule reads the module whose go.mod is in root: every folder below it with Go files
// for the current platform, skipping testdata, vendor, folders whose name starts with "." or
// "_" (as the go command does) and nested modules. It reads only the files' import clauses.
func loadModule(root string) (*graph, error) {
	modFile, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	module := modulePath(modFile)
	if module == "" {
		return nil, fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
	}
	g := &graph{module: module, pkgs: map[string]*pkg{}}
	ctx := build.Default
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != root {
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		bp, err := ctx.ImportDir(p, 0)
		if err != nil {
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		inModule := func(imports []string) []string {
			var out []string
			for _, imp := range imports {
				if d, ok := g.folderOf(imp); ok && d != rel {
					out = append(out, d)
				}
			}
			return out
		}
		pk := &pkg{dir: rel, build: inModule(bp.Imports)}
		for _, d := range inModule(append(slices.Clone(bp.TestImports), bp.XTestImports...)) {
			if !slices.Contains(pk.build, d) && !slices.Contains(pk.test, d) {
				pk.test = append(pk.test, d)
			}
		}
		slices.Sort(pk.build)
		slices.Sort(pk.test)
		pk.testOnly = len(bp.GoFiles)+len(bp.CgoFiles) == 0
		g.pkgs[rel] = pk
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// modulePath returns the path on go.mod's module line, or "" without one.
func modulePath(goMod []byte) string {
	for line := range strings.Lines(string(goMod)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// folderOf returns the folder, relative to the module root, of an import path inside the
// module; ok is false for a path outside it.
func (g *graph) folderOf(importPath string) (string, bool) {
	if importPath == g.module {
		return ".", true
	}
	rest, ok := strings.CutPrefix(importPath, g.module+"/")
	return rest, ok
}

// arrow is one import between two packages of the module; test is set when only test files
// make it.
type arrow struct {
	from, to string
	test     bool
	// why is empty for an arrow that runs down the layering, else why it runs back up.
	why string
}

// report is the measurement of one graph.
type report struct {
	dirs   []string       // every package, sorted
	floor  map[string]int // each package's floor
	arrows []arrow        // every arrow, sorted by from and to
	backUp []arrow        // the arrows that run back up a floor
	cycles [][]string     // each import cycle: its packages, sorted
	// straddling lists, for each folder that is both below and above some package, those
	// packages.
	straddling map[string][]string
}

// floors is the number of floors: one more than the highest.
func (r *report) floors() int {
	top := -1
	for _, f := range r.floor {
		top = max(top, f)
	}
	return top + 1
}

// testArrows counts the arrows that only tests make.
func (r *report) testArrows() int {
	n := 0
	for _, a := range r.arrows {
		if a.test {
			n++
		}
	}
	return n
}

// measure places every package on its floor and finds the arrows that run back up a floor
// and the import cycles; the command's doc comment defines each.
func measure(g *graph) *report {
	r := &report{floor: map[string]int{}, straddling: map[string][]string{}}
	for d := range g.pkgs {
		r.dirs = append(r.dirs, d)
	}
	slices.Sort(r.dirs)

	// deps are the arrows that decide the layering: build arrows, or for a package made only
	// of tests, its test arrows.
	deps := func(d string) []string {
		p := g.pkgs[d]
		if p.testOnly {
			return p.test
		}
		return p.build
	}

	// Floors, by depth-first search. Go rejects a cycle of build arrows, but the files may be
	// mid-edit: an arrow that closes one adds nothing to a floor (the cycle is reported).
	const visiting = -1
	var place func(d string) int
	place = func(d string) int {
		if f, ok := r.floor[d]; ok {
			return max(f, 0)
		}
		r.floor[d] = visiting
		f := 0
		for _, q := range deps(d) {
			if _, ok := g.pkgs[q]; ok && r.floor[q] != visiting {
				f = max(f, place(q)+1)
			}
		}
		r.floor[d] = f
		return f
	}
	for _, d := range r.dirs {
		place(d)
	}

	// beneath[p] is every package a chain of deps leads to from p.
	beneath := map[string]map[string]bool{}
	for _, d := range r.dirs {
		seen := map[string]bool{}
		stack := slices.Clone(deps(d))
		for len(stack) > 0 {
			q := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[q] || g.pkgs[q] == nil {
				continue
			}
			seen[q] = true
			stack = append(stack, deps(q)...)
		}
		beneath[d] = seen
	}

	for _, d := range r.dirs {
		p := g.pkgs[d]
		add := func(to string, test bool) {
			if g.pkgs[to] == nil {
				return // not a package for this platform
			}
			a := arrow{from: d, to: to, test: test}
			var why []string
			if r.floor[to] >= r.floor[d] {
				why = append(why, fmt.Sprintf("%s is on floor %d, %s on floor %d", to, r.floor[to], d, r.floor[d]))
			}
			part, parent := partHolding(d, to)
			var above []string
			for _, x := range r.dirs {
				if x != d && inPart(x, part, parent) && beneath[x][d] {
					above = append(above, x)
				}
			}
			if len(above) > 0 {
				why = append(why, fmt.Sprintf("folder %s also holds %s, above %s", partName(part, parent), strings.Join(above, ", "), d))
				name := partName(part, parent)
				if !slices.Contains(r.straddling[name], d) {
					r.straddling[name] = append(r.straddling[name], d)
				}
			}
			a.why = strings.Join(why, "; ")
			r.arrows = append(r.arrows, a)
			if a.why != "" {
				r.backUp = append(r.backUp, a)
			}
		}
		for _, q := range p.build {
			add(q, false)
		}
		for _, q := range p.test {
			add(q, true)
		}
	}
	for _, list := range r.straddling {
		slices.Sort(list)
	}
	r.cycles = cycles(g, r.dirs)
	return r
}

// partHolding returns the part of the deepest folder holding both from and to that holds to:
// to's own folder alone when to is that folder's package (parent is then true), else the
// folder one level below it on the way to to.
func partHolding(from, to string) (part string, parent bool) {
	fe, te := split(from), split(to)
	k := 0
	for k < len(fe) && k < len(te) && fe[k] == te[k] {
		k++
	}
	if k == len(te) {
		return to, true
	}
	return path.Join(te[:k+1]...), false
}

// inPart reports whether the package in folder d lies in the part.
func inPart(d, part string, parent bool) bool {
	if parent {
		return d == part
	}
	return d == part || strings.HasPrefix(d, part+"/")
}

// partName is how the report names a part: a folder with a trailing slash, or a package alone.
func partName(part string, parent bool) string {
	if parent {
		return part + " (the package alone)"
	}
	return part + "/"
}

func split(d string) []string {
	if d == "." {
		return nil
	}
	return strings.Split(d, "/")
}

// cycles returns the strongly connected components of two or more packages over every arrow,
// build and test (Tarjan's algorithm).
func cycles(g *graph, dirs []string) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(d string)
	visit = func(d string) {
		index[d], low[d] = next, next
		next++
		stack = append(stack, d)
		onStack[d] = true
		p := g.pkgs[d]
		for _, q := range append(slices.Clone(p.build), p.test...) {
			if g.pkgs[q] == nil {
				continue
			}
			if _, seen := index[q]; !seen {
				visit(q)
				low[d] = min(low[d], low[q])
			} else if onStack[q] {
				low[d] = min(low[d], index[q])
			}
		}
		if low[d] == index[d] {
			var scc []string
			for {
				q := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[q] = false
				scc = append(scc, q)
				if q == d {
					break
				}
			}
			if len(scc) > 1 {
				slices.Sort(scc)
				out = append(out, scc)
			}
		}
	}
	for _, d := range dirs {
		if _, seen := index[d]; !seen {
			visit(d)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}
