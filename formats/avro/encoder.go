package avro

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// parseOptions is the avro format's option parser, registered with bodyformat by init: it
// parses the required schema option and returns the constructor of the encoder it configures.
func parseOptions(opts map[string]string) (bodyformat.EncoderFactory, error) {
	o, err := parseAvroOptions(opts)
	if err != nil {
		return nil, err
	}
	return func(s *bodyformat.Schema) (bodyformat.ElementEncoder, error) { return newAvroEncoder(s, o) }, nil
}

// avroOptions are the parsed options of the avro format.
type avroOptions struct {
	schema hamba.Schema
}

func parseAvroOptions(opts map[string]string) (avroOptions, error) {
	text := strings.TrimSpace(opts[formats.OptionAvroSchema])
	if text == "" {
		return avroOptions{}, bodyformat.NewOptionError(fmt.Errorf("avro: option %q is required: the writer schema as JSON text", formats.OptionAvroSchema), formats.OptionAvroSchema)
	}
	// A private cache keeps named types of one schema from clashing with another's.
	sch, err := hamba.ParseWithCache(text, "", &hamba.SchemaCache{})
	if err != nil {
		return avroOptions{}, bodyformat.NewOptionError(fmt.Errorf("avro: option %q does not parse: %w", formats.OptionAvroSchema, err), formats.OptionAvroSchema)
	}
	return avroOptions{schema: sch}, nil
}

// avroWrite writes one Go value in Avro binary encoding. path names the value in errors.
type avroWrite func(w *avroWriter, v reflect.Value) error

// avroWriter is the writer of one Encode, with how deeply recursive records are nested at the
// value being written and, past cycleCheckDepth, the addresses of the records on that path.
type avroWriter struct {
	*hamba.Writer
	depth int
	path  map[uintptr]bool
}

// cycleCheckDepth is the nesting of a recursive record type past which each record's address
// is remembered along the path: a value that points back into itself (a linked list or tree
// with a cycle) would otherwise recurse until the goroutine's stack overflows and the worker
// process dies. A long list that ends is encoded, as encoding/json does.
const cycleCheckDepth = 1000

// avroEncoder writes Avro binary (a single datum, no container file and no schema prefix).
// The plan of which Go value goes where is compiled from the schema and the Go type once, at
// construction, so that every mismatch is found before the pipeline runs.
type avroEncoder struct {
	s     *bodyformat.Schema
	write avroWrite
}

func newAvroEncoder(s *bodyformat.Schema, o avroOptions) (bodyformat.ElementEncoder, error) {
	c := &avroCompiler{memo: map[avroKey]*avroWrite{}}
	e := &avroEncoder{s: s}
	if s.Plain() {
		w, err := c.compile(o.schema, s.Type(), "the element value")
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		e.write = w
		return e, nil
	}
	rec, ok := resolveRef(o.schema).(*hamba.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("avro: the schema of a struct element must be a record, not %s", o.schema.Type())
	}
	w, err := c.record(rec, s.BodyFields(), "")
	if err != nil {
		return nil, fmt.Errorf("avro: %w", err)
	}
	e.write = w
	return e, nil
}

func (e *avroEncoder) Encode(elem any) ([]byte, error) {
	v, err := e.s.Value(elem)
	if err != nil {
		return nil, err
	}
	w := &avroWriter{Writer: hamba.NewWriter(nil, 256)}
	err = e.write(w, v)
	if err == nil && w.Error != nil {
		err = fmt.Errorf("writing failed: %w", w.Error)
	}
	if err != nil {
		return nil, fmt.Errorf("avro: %w", err)
	}
	return w.Buffer(), nil
}

type avroKey struct {
	schema hamba.Schema
	typ    reflect.Type
}

// avroCompiler builds avroWrite plans; memo ends the recursion of recursive record types.
type avroCompiler struct {
	memo map[avroKey]*avroWrite
}

func resolveRef(sch hamba.Schema) hamba.Schema {
	if ref, ok := sch.(*hamba.RefSchema); ok {
		return ref.Schema()
	}
	return sch
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
	ratType      = reflect.TypeFor[big.Rat]()
)

func logicalType(sch hamba.Schema) hamba.LogicalType {
	if l, ok := sch.(hamba.LogicalTypeSchema); ok && l.Logical() != nil {
		return l.Logical().Type()
	}
	return ""
}

// mismatch is the construction error for a Go type that does not fit a schema.
func mismatch(path string, t reflect.Type, sch hamba.Schema) error {
	what := string(sch.Type())
	if lt := logicalType(sch); lt != "" {
		what += " (logical type " + string(lt) + ")"
	}
	return fmt.Errorf("%s: Go type %s does not fit avro %s", path, t, what)
}

// compile returns the plan for writing a Go value of type t under schema sch.
func (c *avroCompiler) compile(sch hamba.Schema, t reflect.Type, path string) (avroWrite, error) {
	sch = resolveRef(sch)
	if t.Kind() == reflect.Interface {
		return nil, fmt.Errorf("%s: Go type %s is an interface; the avro format needs concrete types to check against the schema", path, t)
	}
	if u, ok := sch.(*hamba.UnionSchema); ok {
		return c.union(u, t, path)
	}
	if t.Kind() == reflect.Pointer && !(t.Elem() == ratType && logicalType(sch) == hamba.Decimal) {
		inner, err := c.compile(sch, t.Elem(), path)
		if err != nil {
			return nil, err
		}
		return func(w *avroWriter, v reflect.Value) error {
			if v.IsNil() {
				return fmt.Errorf("%s is nil but its avro type %s has no null branch", path, sch.Type())
			}
			return inner(w, v.Elem())
		}, nil
	}
	switch sch := sch.(type) {
	case *hamba.PrimitiveSchema:
		return primitive(sch, t, path)
	case *hamba.EnumSchema:
		if t.Kind() != reflect.String {
			return nil, mismatch(path, t, sch)
		}
		symbols := sch.Symbols()
		return func(w *avroWriter, v reflect.Value) error {
			i := slices.Index(symbols, v.String())
			if i < 0 {
				return fmt.Errorf("%s: the value is not a symbol of enum %s", path, sch.FullName())
			}
			w.WriteInt(int32(i))
			return nil
		}, nil
	case *hamba.FixedSchema:
		if logicalType(sch) == hamba.Decimal {
			return delegated(sch, t, path, ratType)
		}
		if t.Kind() != reflect.Array || t.Elem().Kind() != reflect.Uint8 || t.Len() != sch.Size() {
			return nil, fmt.Errorf("%s: Go type %s does not fit avro fixed %s of size %d (want [%d]byte)", path, t, sch.FullName(), sch.Size(), sch.Size())
		}
		return func(w *avroWriter, v reflect.Value) error {
			buf := make([]byte, v.Len())
			reflect.Copy(reflect.ValueOf(buf), v)
			_, _ = w.Write(buf)
			return nil
		}, nil
	case *hamba.ArraySchema:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil, mismatch(path, t, sch)
		}
		item, err := c.compile(sch.Items(), t.Elem(), path+" > item")
		if err != nil {
			return nil, err
		}
		return func(w *avroWriter, v reflect.Value) error {
			if n := v.Len(); n > 0 {
				w.WriteLong(int64(n))
				for i := range n {
					if err := item(w, v.Index(i)); err != nil {
						return err
					}
				}
			}
			w.WriteLong(0)
			return nil
		}, nil
	case *hamba.MapSchema:
		if t.Kind() != reflect.Map || t.Key().Kind() != reflect.String {
			return nil, mismatch(path, t, sch)
		}
		val, err := c.compile(sch.Values(), t.Elem(), path+" > value")
		if err != nil {
			return nil, err
		}
		return func(w *avroWriter, v reflect.Value) error {
			if n := v.Len(); n > 0 {
				keys := v.MapKeys()
				slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
				w.WriteLong(int64(n))
				for _, k := range keys {
					w.WriteString(k.String())
					if err := val(w, v.MapIndex(k)); err != nil {
						return err
					}
				}
			}
			w.WriteLong(0)
			return nil
		}, nil
	case *hamba.RecordSchema:
		if t.Kind() != reflect.Struct || t == timeType {
			return nil, mismatch(path, t, sch)
		}
		key := avroKey{sch, t}
		if p, ok := c.memo[key]; ok {
			return func(w *avroWriter, v reflect.Value) error {
				w.depth++
				defer func() { w.depth-- }()
				if w.depth > cycleCheckDepth && v.CanAddr() {
					addr := v.UnsafeAddr()
					if w.path[addr] {
						return fmt.Errorf("%s: the value holds a cycle: a record %s contains itself", path, sch.FullName())
					}
					if w.path == nil {
						w.path = map[uintptr]bool{}
					}
					w.path[addr] = true
					defer delete(w.path, addr)
				}
				return (*p)(w, v)
			}, nil
		}
		p := new(avroWrite)
		c.memo[key] = p
		fields, err := bodyformat.NestedFields(t, path)
		if err != nil {
			delete(c.memo, key)
			return nil, err
		}
		rec, err := c.record(sch, fields, path)
		if err != nil {
			// A failed plan must not be found again (a union tries several branches).
			delete(c.memo, key)
			return nil, err
		}
		*p = rec
		return rec, nil
	}
	return nil, mismatch(path, t, sch)
}

// record matches the record's fields one to one with the Go fields by name and compiles each.
// prefix is the path of the record itself, "" for the element.
func (c *avroCompiler) record(rec *hamba.RecordSchema, fields []bodyformat.Field, prefix string) (avroWrite, error) {
	byName := map[string]bodyformat.Field{}
	for _, f := range fields {
		byName[f.Name] = f
	}
	type step struct {
		index int
		write avroWrite
	}
	steps := make([]step, 0, len(rec.Fields()))
	used := map[string]bool{}
	for _, af := range rec.Fields() {
		f, ok := byName[af.Name()]
		if !ok {
			where := "the element type"
			if prefix != "" {
				where = prefix
			}
			return nil, fmt.Errorf("record %s: schema field %q has no matching field in %s (fields are named by their json tag, else their Go name)", rec.FullName(), af.Name(), where)
		}
		used[f.Name] = true
		path := memberPath(prefix, f)
		write, err := c.compile(af.Type(), f.Type, path)
		if err != nil {
			return nil, err
		}
		steps = append(steps, step{f.Index, write})
	}
	for _, f := range fields {
		if !used[f.Name] {
			path := memberPath(prefix, f)
			return nil, fmt.Errorf("%s: record %s has no field named %q; add it to the schema or exclude the field with json:\"-\"", path, rec.FullName(), f.Name)
		}
	}
	return func(w *avroWriter, v reflect.Value) error {
		for _, s := range steps {
			if err := s.write(w, v.Field(s.index)); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// memberPath names field f of a record at path prefix ("" for the element's own body fields),
// for example `field Customer (body name "customer") > Name`.
func memberPath(prefix string, f bodyformat.Field) string {
	if prefix == "" {
		return f.Describe()
	}
	return prefix + " > " + f.GoName
}

// union writes the branch index (a long) and then the value. A nil pointer, slice or map takes
// the null branch; any other value the first non-null branch that fits its Go type.
func (c *avroCompiler) union(u *hamba.UnionSchema, t reflect.Type, path string) (avroWrite, error) {
	nullIndex := -1
	for i, b := range u.Types() {
		if b.Type() == hamba.Null {
			nullIndex = i
			break
		}
	}
	valueType := t
	nillable := t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map
	if t.Kind() == reflect.Pointer && t.Elem() != ratType {
		valueType = t.Elem()
	}
	branch, write := -1, avroWrite(nil)
	var firstErr error
	for i, b := range u.Types() {
		if b.Type() == hamba.Null {
			continue
		}
		w, err := c.compile(b, valueType, path)
		if err == nil {
			branch, write = i, w
			break
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if branch < 0 {
		if firstErr == nil {
			return nil, fmt.Errorf("%s: Go type %s does not fit the avro union %s, which has only null", path, t, u.String())
		}
		return nil, fmt.Errorf("%s: Go type %s fits no branch of the avro union (first mismatch: %w)", path, t, firstErr)
	}
	if nillable && nullIndex < 0 {
		return nil, fmt.Errorf("%s: Go type %s can be nil but the avro union has no null branch", path, t)
	}
	deref := valueType != t
	return func(w *avroWriter, v reflect.Value) error {
		if nillable && v.IsNil() {
			w.WriteLong(int64(nullIndex))
			return nil
		}
		w.WriteLong(int64(branch))
		if deref {
			v = v.Elem()
		}
		return write(w, v)
	}, nil
}

// primitive compiles the plain Avro types. Logical types whose encoding hamba/avro defines
// (dates, times, timestamps, decimals) are delegated to it.
func primitive(sch *hamba.PrimitiveSchema, t reflect.Type, path string) (avroWrite, error) {
	lt := logicalType(sch)
	switch {
	case t == timeType:
		switch {
		case sch.Type() == hamba.Int && lt == hamba.Date,
			sch.Type() == hamba.Long && (lt == hamba.TimestampMillis || lt == hamba.TimestampMicros ||
				lt == hamba.LocalTimestampMillis || lt == hamba.LocalTimestampMicros):
			return delegated(sch, t, path, timeType)
		}
		return nil, mismatch(path, t, sch)
	case t == durationType && (lt == hamba.TimeMillis || lt == hamba.TimeMicros):
		return delegated(sch, t, path, durationType)
	case t.Kind() == reflect.Pointer && t.Elem() == ratType:
		if sch.Type() == hamba.Bytes && lt == hamba.Decimal {
			return delegated(sch, t, path, ratType)
		}
		return nil, mismatch(path, t, sch)
	}
	k := t.Kind()
	switch sch.Type() {
	case hamba.Boolean:
		if k == reflect.Bool {
			return func(w *avroWriter, v reflect.Value) error { w.WriteBool(v.Bool()); return nil }, nil
		}
	case hamba.Int:
		switch k {
		case reflect.Int8, reflect.Int16, reflect.Int32:
			return func(w *avroWriter, v reflect.Value) error { w.WriteInt(int32(v.Int())); return nil }, nil
		case reflect.Uint8, reflect.Uint16:
			return func(w *avroWriter, v reflect.Value) error { w.WriteInt(int32(v.Uint())); return nil }, nil
		case reflect.Int, reflect.Int64:
			if t == durationType {
				break
			}
			return func(w *avroWriter, v reflect.Value) error {
				n := v.Int()
				if n < math.MinInt32 || n > math.MaxInt32 {
					return fmt.Errorf("%s: the value is out of the range of avro int (32 bits)", path)
				}
				w.WriteInt(int32(n))
				return nil
			}, nil
		}
	case hamba.Long:
		if lt == hamba.TimestampMillis || lt == hamba.TimestampMicros || lt == hamba.LocalTimestampMillis || lt == hamba.LocalTimestampMicros {
			if t == durationType {
				break
			}
		}
		switch k {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return func(w *avroWriter, v reflect.Value) error { w.WriteLong(v.Int()); return nil }, nil
		case reflect.Uint8, reflect.Uint16, reflect.Uint32:
			return func(w *avroWriter, v reflect.Value) error { w.WriteLong(int64(v.Uint())); return nil }, nil
		}
	case hamba.Float:
		if k == reflect.Float32 {
			return func(w *avroWriter, v reflect.Value) error { w.WriteFloat(float32(v.Float())); return nil }, nil
		}
	case hamba.Double:
		if k == reflect.Float32 || k == reflect.Float64 {
			return func(w *avroWriter, v reflect.Value) error { w.WriteDouble(v.Float()); return nil }, nil
		}
	case hamba.String:
		if k == reflect.String {
			return func(w *avroWriter, v reflect.Value) error { w.WriteString(v.String()); return nil }, nil
		}
	case hamba.Bytes:
		if k == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return func(w *avroWriter, v reflect.Value) error { w.WriteBytes(v.Bytes()); return nil }, nil
		}
	}
	return nil, mismatch(path, t, sch)
}

// delegated lets hamba/avro write a value of a logical type; the value is converted to the
// standard Go type hamba expects (time.Time, time.Duration, or *big.Rat used as is).
func delegated(sch hamba.Schema, t reflect.Type, path string, std reflect.Type) (avroWrite, error) {
	isRat := std == ratType
	switch {
	case isRat && t.Kind() == reflect.Pointer && t.Elem() == ratType:
	case !isRat && t.ConvertibleTo(std):
	default:
		return nil, mismatch(path, t, sch)
	}
	return func(w *avroWriter, v reflect.Value) error {
		var val any
		if isRat {
			if v.IsNil() {
				return fmt.Errorf("%s is nil but its avro type %s has no null branch", path, sch.Type())
			}
			val = v.Interface()
		} else {
			val = v.Convert(std).Interface()
		}
		w.WriteVal(sch, val)
		if w.Error != nil {
			return fmt.Errorf("%s: writing the avro %s value failed", path, logicalType(sch))
		}
		return nil
	}, nil
}
