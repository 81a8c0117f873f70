// Command perftable renders `go test -bench` output as a markdown table: one row per
// benchmark, the median of its runs in each metric column with the range in brackets.
//
//	go run ./tools/perftable -metrics creates/s,cpu-µs/create docs/perf/engine.txt
//
// A sub-benchmark's key=value parts (latency=20ms/pool=1) become columns of their own. The
// file's configuration lines (cpu:, date:, commit:, load: ...) become the line above the
// table, so the table says when and where it was measured.
//
// With -update PAGE, perftable rewrites every generated table of a markdown page: a line
// `<!-- perftable ARGS -->` followed by the table and `<!-- end perftable -->`, where ARGS
// are this command's flags and files (paths relative to the page). -check PAGE exits with
// status 1 when a table differs from what its ARGS render.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// errStale reports a page whose generated tables differ from their results files.
var errStale = errors.New("perftable: tables are stale")

// run is the command without the process around it, for tests.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("perftable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	update := fs.String("update", "", "a markdown page whose generated tables to rewrite")
	check := fs.String("check", "", "a markdown page whose generated tables to compare, without writing")
	tableFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *update != "" && *check != "":
		return fmt.Errorf("perftable: -update and -check cannot be used together")
	case *update != "" || *check != "":
		if fs.NArg() > 0 {
			return fmt.Errorf("perftable: unexpected arguments %q with -update or -check", fs.Args())
		}
		page := *update + *check
		changed, err := regeneratePage(page, *update != "")
		if err != nil {
			return err
		}
		if *check != "" && len(changed) > 0 {
			fmt.Fprintf(stderr, "%s: regenerate with go run ./tools/perftable -update %s: %s\n", page, page, strings.Join(changed, "; "))
			return errStale
		}
		return nil
	}
	table, err := render(args, ".")
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, table)
	return err
}

// render parses the arguments of one table (its flags and results files, relative to dir)
// and returns the table.
func render(args []string, dir string) (string, error) {
	fs := flag.NewFlagSet("perftable", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	match, metrics, drop := tableFlags(fs)
	if err := fs.Parse(args); err != nil {
		return "", fmt.Errorf("perftable: %w", err)
	}
	if fs.NArg() == 0 {
		return "", fmt.Errorf("perftable: no results file given")
	}
	re, err := regexp.Compile(*match)
	if err != nil {
		return "", fmt.Errorf("perftable: -match: %w", err)
	}
	var res results
	for _, name := range fs.Args() {
		path := name
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, name)
		}
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("perftable: results file: %w", err)
		}
		err = res.read(f, re)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("perftable: %s: %w", name, err)
		}
	}
	if len(res.rows) == 0 {
		return "", fmt.Errorf("perftable: no benchmark in %s matches -match %q", strings.Join(fs.Args(), ", "), *match)
	}
	units := res.units
	if *metrics != "" {
		units = strings.Split(*metrics, ",")
	}
	return res.table(units, splitList(*drop)), nil
}

// tableFlags defines the flags of one table.
func tableFlags(fs *flag.FlagSet) (match, metrics, drop *string) {
	match = fs.String("match", "", "a regular expression a benchmark's full name must match")
	metrics = fs.String("metrics", "", "comma-separated units to show, in order; absent shows all but ns/op")
	drop = fs.String("drop", "", "comma-separated sub-benchmark keys to leave out of the columns")
	return match, metrics, drop
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// row is one benchmark: its name's parts and every run's value of each unit.
type row struct {
	name   string
	keys   map[string]string
	values map[string][]float64
}

// results is what the results files hold, rows in the order of their first run.
type results struct {
	config []string // "key: value" lines, each once
	keys   []string // sub-benchmark keys in order of first appearance
	units  []string // units in order of first appearance, ns/op left out
	rows   []*row
	byName map[string]*row
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

func (r *results) read(in io.Reader, match *regexp.Regexp) error {
	if r.byName == nil {
		r.byName = map[string]*row{}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.ContainsAny(k, " \t") && k != "" && !strings.HasPrefix(k, "Benchmark") {
			if k == "pkg" || k == "goos" || k == "goarch" {
				continue
			}
			if c := k + ": " + strings.TrimSpace(v); !slices.Contains(r.config, c) {
				r.config = append(r.config, c)
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		full := procsSuffix.ReplaceAllString(f[0], "")
		if !match.MatchString(full) {
			continue
		}
		b := r.byName[full]
		if b == nil {
			b = r.newRow(full)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("benchmark %s: value %q of %s is not a number", full, f[i], f[i+1])
			}
			unit := f[i+1]
			if unit != "ns/op" && !slices.Contains(r.units, unit) {
				r.units = append(r.units, unit)
			}
			b.values[unit] = append(b.values[unit], v)
		}
	}
	return sc.Err()
}

func (r *results) newRow(full string) *row {
	parts := strings.Split(strings.TrimPrefix(full, "Benchmark"), "/")
	b := &row{name: parts[0], keys: map[string]string{}, values: map[string][]float64{}}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			b.name += "/" + p
			continue
		}
		b.keys[k] = v
		if !slices.Contains(r.keys, k) {
			r.keys = append(r.keys, k)
		}
	}
	r.rows = append(r.rows, b)
	r.byName[full] = b
	return b
}

// table renders the rows: the configuration line, then the markdown table.
func (r *results) table(units, drop []string) string {
	var sb strings.Builder
	runs := 0
	for _, b := range r.rows {
		for _, v := range b.values {
			runs = max(runs, len(v))
		}
	}
	if runs > 1 {
		fmt.Fprintf(&sb, "Medians of up to %d runs, range in brackets. ", runs)
	}
	sb.WriteString(strings.Join(r.config, "; "))
	sb.WriteString("\n\n")
	keys := slices.DeleteFunc(slices.Clone(r.keys), func(k string) bool { return slices.Contains(drop, k) })
	head := append(append([]string{"benchmark"}, keys...), units...)
	sb.WriteString("| " + strings.Join(head, " | ") + " |\n")
	sb.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	for _, b := range r.rows {
		cells := []string{b.name}
		for _, k := range keys {
			cells = append(cells, b.keys[k])
		}
		for _, u := range units {
			cells = append(cells, summary(b.values[u]))
		}
		sb.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return sb.String()
}

// summary is the median of values, with their range when they differ.
func summary(values []float64) string {
	if len(values) == 0 {
		return ""
	}
	v := slices.Sorted(slices.Values(values))
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	if number(v[0]) == number(v[len(v)-1]) {
		return number(med)
	}
	return fmt.Sprintf("%s [%s–%s]", number(med), number(v[0]), number(v[len(v)-1]))
}

// number prints a figure to three significant digits, thousands with separators, and a
// figure a benchmark could not give (NaN) as a dash.
func number(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	switch a := max(x, -x); {
	case a >= 1000:
		s := strconv.FormatFloat(x, 'f', 0, 64)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		if neg {
			s = "-" + s
		}
		return s
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a == 0:
		return "0"
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}
