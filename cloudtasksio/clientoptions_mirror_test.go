package cloudtasksio_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

// The sink (cloudtasksio) and the Pub/Sub dead-letter publisher (pubsubdl) each declare
// ClientOptions and Telemetry, so that neither package imports the other. A user moves
// settings between the two field for field; these tests fail as soon as the declarations
// drift apart. Only the defaults' meaning differs on purpose (TelemetryDefault is off for the
// sink, on for the publisher), which each type's doc comment says.

// fieldShape is what a user sees of a struct field: its name, its type (by name, since the
// Telemetry types live in different packages), its kind and its tag.
type fieldShape struct {
	Name     string
	TypeName string
	Kind     reflect.Kind
	Elem     string
	Tag      reflect.StructTag
}

func shapeOf(t reflect.Type) []fieldShape {
	var fields []fieldShape
	for i := range t.NumField() {
		f := t.Field(i)
		s := fieldShape{Name: f.Name, TypeName: f.Type.Name(), Kind: f.Type.Kind(), Tag: f.Tag}
		if f.Type.Kind() == reflect.Slice {
			s.Elem = f.Type.Elem().String()
		}
		if f.Type.PkgPath() != "" && f.Type.PkgPath() != t.PkgPath() {
			// A named type from a third package must be the very same type in both.
			s.TypeName = f.Type.String()
		}
		fields = append(fields, s)
	}
	return fields
}

func TestClientOptionsMatchesThePubSubDeadLetterClientOptions(t *testing.T) {
	sink := reflect.TypeFor[cloudtasksio.ClientOptions]()
	deadLetter := reflect.TypeFor[pubsubdl.ClientOptions]()
	if got, want := shapeOf(sink), shapeOf(deadLetter); !reflect.DeepEqual(got, want) {
		t.Errorf("cloudtasksio.ClientOptions and pubsubdl.ClientOptions have drifted apart:\ncloudtasksio: %+v\npubsubdl:     %+v", got, want)
	}
	if len(shapeOf(sink)) == 0 {
		t.Fatal("cloudtasksio.ClientOptions has no fields; the comparison above checked nothing")
	}
}

func TestTelemetryMatchesThePubSubDeadLetterTelemetry(t *testing.T) {
	sink, deadLetter := reflect.TypeFor[cloudtasksio.Telemetry](), reflect.TypeFor[pubsubdl.Telemetry]()
	if sink.Kind() != deadLetter.Kind() || sink.Name() != deadLetter.Name() {
		t.Errorf("cloudtasksio.Telemetry is %s %s, pubsubdl.Telemetry is %s %s", sink.Name(), sink.Kind(), deadLetter.Name(), deadLetter.Kind())
	}
	// Go cannot list a package's constants by reflection: the names come from the source of
	// both packages, and the values from the table below, which must name every one of them.
	constants := []struct {
		name             string
		sink, deadLetter int
	}{
		{"TelemetryDefault", int(cloudtasksio.TelemetryDefault), int(pubsubdl.TelemetryDefault)},
		{"TelemetryOn", int(cloudtasksio.TelemetryOn), int(pubsubdl.TelemetryOn)},
		{"TelemetryOff", int(cloudtasksio.TelemetryOff), int(pubsubdl.TelemetryOff)},
	}
	var listed []string
	for _, c := range constants {
		listed = append(listed, c.name)
	}
	for _, dir := range []string{".", filepath.Join("..", "deadletter", "pubsubdl")} {
		if declared := telemetryConstants(t, dir); !slices.Equal(declared, listed) {
			t.Errorf("%s declares the Telemetry constants %v; this test compares %v", dir, declared, listed)
		}
	}
	seen := map[int]string{}
	for _, c := range constants {
		if c.sink != c.deadLetter {
			t.Errorf("%s is %d in cloudtasksio but %d in pubsubdl", c.name, c.sink, c.deadLetter)
		}
		if other, dup := seen[c.sink]; dup {
			t.Errorf("%s and %s share the value %d", c.name, other, c.sink)
		}
		seen[c.sink] = c.name
	}
}

// telemetryConstants lists, in order, the constants of type Telemetry that the package in dir
// declares outside its tests.
func telemetryConstants(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			// In a const block a spec without a type repeats the previous spec's type.
			inBlock := false
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Type != nil {
					id, ok := vs.Type.(*ast.Ident)
					inBlock = ok && id.Name == "Telemetry"
				} else if len(vs.Values) > 0 {
					inBlock = false
				}
				if inBlock {
					for _, n := range vs.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatalf("found no Telemetry constants in %s", dir)
	}
	return names
}
