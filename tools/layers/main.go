// Command layers measures how well the module's folders show its layers. It reads the import
// clauses of every package of the module (no build, no network) and prints, for each package,
// its floor, the module packages its code imports and those only its tests import; then every
// arrow that runs back up a floor, with the reason, and the totals:
//
//	go run ./tools/layers              # from anywhere inside the module
//	go run ./tools/layers -summary     # the totals only
//	go run ./tools/layers -root DIR    # another checkout (DIR holds its go.mod)
//
// Its test (tools/layers/layers_test.go, part of go test ./...) fails when more than 20 arrows
// run back up a floor, when an import cycle appears, or when any arrow runs back up into the
// module-root internal/ folder. docs/architecture.md describes the layout this keeps.
//
// # Definitions
//
// A package of the module is a room. An arrow is a pair of packages P -> Q (P is not Q) where a
// Go file of P imports Q; it is a build arrow when a non-test file does, else a test arrow (only
// P's _test.go files, of package P or of its external test package P_test, import Q). Each pair
// counts once.
//
// P's floor is the length of the longest chain of build arrows that starts at P: 0 for a package
// that imports nothing of the module, else one more than the highest floor it imports. So
// libraries sit low and applications high. A folder that holds only test files (integration/)
// is made of nothing but tests: its test arrows count as its build arrows, and it sits above
// everything it tests. Q is beneath P when a chain of such arrows leads from P to Q.
//
// An arrow P -> Q runs back up a floor when either
//
//   - Q is on P's floor or higher: a test that reaches sideways or up the house (a build arrow
//     cannot, short of a cycle); or
//   - the folder the arrow enters also sits above P. Take the deepest folder that holds both P
//     and Q; the part of it that holds Q is Q's folder one level below it (with everything under
//     that), or Q alone when Q is that deepest folder's own package. When that part also holds a
//     package that P is beneath, the part is both below P (through Q) and above it, and the
//     folder tree no longer says which way the imports run. This is the case of a module-root
//     internal/ that holds both libraries of cloudtasksio and applications built on it: every
//     arrow from cloudtasksio's side into internal/ runs back up.
//
// An import cycle is a set of two or more packages that reach each other along arrows of either
// kind. Go rejects a cycle of build arrows, and one of in-package test arrows; an external
// test package can still close one (P_test imports Q, which imports P), and it is counted.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	root := flag.String("root", "", "the `folder` holding the module's go.mod (default: the module holding the current folder)")
	summary := flag.Bool("summary", false, "print the totals only")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "layers: unexpected argument %q (see -help)\n", flag.Arg(0))
		os.Exit(2)
	}
	dir := *root
	if dir == "" {
		var err error
		if dir, err = moduleRoot("."); err != nil {
			fmt.Fprintln(os.Stderr, "layers:", err)
			os.Exit(1)
		}
	}
	g, err := loadModule(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers:", err)
		os.Exit(1)
	}
	r := measure(g)
	if !*summary {
		printPackages(os.Stdout, g, r)
		printBackUp(os.Stdout, r)
	}
	fmt.Println(totals(g, r))
}

// moduleRoot returns the nearest folder at or above dir that holds a go.mod.
func moduleRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod in " + abs + " or above it (use -root)")
		}
	}
}

// totals is the report's last line: the figures the issue tracker and docs quote.
func totals(g *graph, r *report) string {
	return fmt.Sprintf("%s: %d packages on %d floors, %d arrows (%d build, %d test), %d run back up a floor, %d import cycles",
		g.module, len(r.dirs), r.floors(), len(r.arrows), len(r.arrows)-r.testArrows(), r.testArrows(), len(r.backUp), len(r.cycles))
}

// printPackages writes one block per package, highest floor first.
func printPackages(w io.Writer, g *graph, r *report) {
	for f := r.floors() - 1; f >= 0; f-- {
		fmt.Fprintf(w, "floor %d\n", f)
		for _, d := range r.dirs {
			if r.floor[d] != f {
				continue
			}
			p := g.pkgs[d]
			kind := ""
			if p.testOnly {
				kind = " (tests only)"
			}
			fmt.Fprintf(w, "  %s%s\n", d, kind)
			if len(p.build) > 0 {
				fmt.Fprintf(w, "      imports: %s\n", strings.Join(p.build, " "))
			}
			if len(p.test) > 0 {
				fmt.Fprintf(w, "      tests import: %s\n", strings.Join(p.test, " "))
			}
		}
	}
}

// printBackUp writes the arrows that run back up a floor, the folders that straddle a package,
// and the cycles.
func printBackUp(w io.Writer, r *report) {
	fmt.Fprintf(w, "\narrows back up a floor: %d\n", len(r.backUp))
	for _, a := range r.backUp {
		kind := "imports"
		if a.test {
			kind = "tests import"
		}
		fmt.Fprintf(w, "  %s %s %s: %s\n", a.from, kind, a.to, a.why)
	}
	if len(r.straddling) > 0 {
		fmt.Fprintf(w, "\nfolders both below and above a package:\n")
		for _, name := range sortedKeys(r.straddling) {
			fmt.Fprintf(w, "  %s: %s\n", name, strings.Join(r.straddling[name], ", "))
		}
	}
	fmt.Fprintf(w, "\nimport cycles: %d\n", len(r.cycles))
	for _, c := range r.cycles {
		fmt.Fprintf(w, "  %s\n", strings.Join(c, " <-> "))
	}
	fmt.Fprintln(w)
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
