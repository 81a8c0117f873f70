package xlang

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file reads the caller's input PCollection from an expansion request: rows or bytes,
// its schema and Go type, its windowing and boundedness.

// Coder and window URNs of the portable model.
const (
	urnBytesCoder   = "beam:coder:bytes:v1"
	urnRowCoder     = "beam:coder:row:v1"
	urnGlobalWindow = "beam:window_fn:global_windows:v1"
)

// input is the caller's input PCollection.
type input struct {
	// Tag is its input tag in the request, ID its PCollection id.
	Tag, ID string
	// Rows says it holds schema rows; else it holds bytes.
	Rows bool
	// Schema is the rows' schema; RowType its Go type (Beam's schema.ToType).
	Schema  *pipepb.Schema
	RowType reflect.Type
	// Windowed says its windowing is not the global window.
	Windowed bool
	// Unbounded says it is an unbounded PCollection.
	Unbounded bool
}

// elemType is the Go type of the input's elements.
func (in input) elemType() reflect.Type {
	if in.Rows {
		return in.RowType
	}
	return reflect.TypeFor[[]byte]()
}

// readInput finds the request's one input and what it holds.
func readInput(req *requestParts) (input, error) {
	if len(req.inputs) != 1 {
		return input{}, configErr("the transform takes one input PCollection (tag input), of rows or bytes; the request has %d", len(req.inputs))
	}
	var in input
	for tag, id := range req.inputs {
		in.Tag, in.ID = tag, id
	}
	pc := req.components.GetPcollections()[in.ID]
	if pc == nil {
		return input{}, fmt.Errorf("the request's input PCollection %s is not among its components", quoteName(in.ID))
	}
	in.Unbounded = pc.GetIsBounded() == pipepb.IsBounded_UNBOUNDED
	if ws := req.components.GetWindowingStrategies()[pc.GetWindowingStrategyId()]; ws != nil {
		in.Windowed = ws.GetWindowFn().GetUrn() != urnGlobalWindow
	}
	c := req.components.GetCoders()[pc.GetCoderId()]
	switch c.GetSpec().GetUrn() {
	case urnBytesCoder:
		return in, nil
	case urnRowCoder:
		in.Rows = true
		in.Schema = &pipepb.Schema{}
		if err := proto.Unmarshal(c.GetSpec().GetPayload(), in.Schema); err != nil {
			return input{}, configErr("the input's row schema cannot be read: %v", err)
		}
		t, err := rowType(in.Schema)
		if err != nil {
			return input{}, err
		}
		in.RowType = t
		return in, nil
	}
	return input{}, configErr("the input holds neither rows nor bytes: its coder is %s; give the transform a PCollection of schema rows "+
		"(for example beam.Row in Python, Row in Java) or of bytes (for example map strings with str.encode)", quoteName(c.GetSpec().GetUrn()))
}

// rowType is the Go type of rows of schema s, as Beam's Go SDK builds it on the worker. It
// fails, naming the field, for a schema the Go SDK cannot read.
func rowType(s *pipepb.Schema) (t reflect.Type, err error) {
	if err := checkFieldNames(s, ""); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, configErr("Beam's Go SDK cannot read the input's row schema: %s", boundedtext.Sprint(r, 512))
		}
	}()
	t, err = schema.ToType(s)
	if err != nil {
		for _, f := range s.GetFields() {
			if _, ferr := schema.ToType(&pipepb.Schema{Fields: []*pipepb.Field{f}}); ferr != nil {
				return nil, configErr("input field %s holds %s, which Beam's Go SDK cannot read; convert it before this transform "+
					"(for example to a string)", quoteName(f.GetName()), typeName(f.GetType()))
			}
		}
		return nil, configErr("Beam's Go SDK cannot read the input's row schema: %s", boundedtext.Cut(err.Error(), 512))
	}
	return t, nil
}

// checkFieldNames rejects a field name Beam's Go SDK cannot turn into a Go struct field: it
// must start with a letter and hold only letters, digits and underscores.
func checkFieldNames(s *pipepb.Schema, path string) error {
	for _, f := range s.GetFields() {
		name := f.GetName()
		first, _ := utf8.DecodeRuneInString(name)
		ok := name != "" && unicode.IsLetter(first) && !strings.ContainsFunc(name, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
		})
		if !ok {
			return configErr("input field %s: Beam's Go SDK reads only fields whose names start with a letter and hold letters, "+
				"digits and underscores; rename it before this transform", quoteName(path+name))
		}
		if rt := f.GetType().GetRowType(); rt != nil {
			if err := checkFieldNames(rt.GetSchema(), path+name+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkMetadataFields checks the *_field settings against the input: they need rows, and each
// must name a field of a type it can read.
func checkMetadataFields(st settings, in input) error {
	named := []struct{ setting, field, accepts string }{
		{fieldTaskID, st.taskIDField, "a string or an integer"},
		{fieldURL, st.urlField, "a string"},
		{fieldScheduleTime, st.scheduleTimeField, "an instant (micros_instant, millis_instant), an RFC 3339 string or an integer of seconds since the Unix epoch"},
	}
	for _, n := range named {
		if n.field == "" {
			continue
		}
		if !in.Rows {
			return configErr("field %s names an input field, but the input is bytes, which have none; give the transform rows", n.setting)
		}
		i := slices.IndexFunc(in.Schema.GetFields(), func(f *pipepb.Field) bool { return f.GetName() == n.field })
		if i < 0 {
			var names []string
			for _, f := range in.Schema.GetFields() {
				names = append(names, f.GetName())
			}
			return configErr("field %s names %s, which the input rows do not have; their fields are %s", n.setting, quoteName(n.field),
				boundedtext.Cut(strings.Join(names, ", "), 512))
		}
		t := in.Schema.GetFields()[i].GetType()
		a := t.GetAtomicType()
		ok := false
		switch n.setting {
		case fieldTaskID:
			ok = a == pipepb.AtomicType_STRING || a == pipepb.AtomicType_INT64 || a == pipepb.AtomicType_INT32 || a == pipepb.AtomicType_INT16 || a == pipepb.AtomicType_BYTE
		case fieldURL:
			ok = a == pipepb.AtomicType_STRING
		case fieldScheduleTime:
			urn := t.GetLogicalType().GetUrn()
			ok = a == pipepb.AtomicType_STRING || a == pipepb.AtomicType_INT64 || a == pipepb.AtomicType_INT32 || a == pipepb.AtomicType_INT16 ||
				urn == urnMicrosInstant || urn == urnMillisInstant
		}
		if !ok {
			return configErr("field %s names %s, which holds %s; it must hold %s", n.setting, quoteName(n.field), typeName(t), n.accepts)
		}
	}
	return nil
}
