package bodyformat

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// Metadata keys: the values of a `cloudtasks:"<key>"` struct tag. A field carrying one of these
// tags is request metadata: it configures the task's request and never reaches the body. Which
// keys a target accepts is the caller's rule, passed to Schema.CheckKeys.
const (
	// KeyURL (type string) overrides the target's fixed URL; empty keeps it.
	KeyURL = "url"
	// KeyRelativeURI (type string) overrides the fixed relative URI; empty keeps it.
	KeyRelativeURI = "relative-uri"
	// KeyHTTPMethod (type string) overrides the method, case-insensitively; empty keeps it.
	KeyHTTPMethod = "http-method"
	// KeyHeaders (type map[string]string) adds headers, replacing fixed headers of the same
	// case-insensitive name.
	KeyHeaders = "headers"
	// KeyAppEngineService (type *string) selects the App Engine service: nil keeps the fixed
	// routing, "" clears it.
	KeyAppEngineService = "app-engine-service"
	// KeyAppEngineVersion (type *string) selects the App Engine version: nil keeps the fixed
	// routing, "" clears it.
	KeyAppEngineVersion = "app-engine-version"
	// KeyAppEngineInstance (type *string) selects the App Engine instance: nil keeps the fixed
	// routing, "" clears it.
	KeyAppEngineInstance = "app-engine-instance"
	// KeyScheduleTime (type time.Time) delays dispatch until that instant; the zero time means
	// "as soon as possible".
	KeyScheduleTime = "schedule-time"
	// KeyDispatchDeadline (type time.Duration) bounds each dispatch attempt of the task; zero
	// keeps the target's fixed deadline. The caller checks the service's bounds.
	KeyDispatchDeadline = "dispatch-deadline"
	// KeyTaskID (type string) is the key a named task's id is derived from. Its presence on the
	// element type turns naming on for the whole sink.
	KeyTaskID = "task-id"
)

// TagName is the struct tag that marks a metadata field: `cloudtasks:"<key>"`.
const TagName = "cloudtasks"

// keySpec is one row of the metadata key table: a key and the Go type its field needs.
type keySpec struct {
	key  string
	want string // the Go type, as shown in errors and docs
	fits func(reflect.Type) bool
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
)

func isStringKind(t reflect.Type) bool { return t.Kind() == reflect.String }

func isStringMap(t reflect.Type) bool {
	return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String
}

func isStringPtr(t reflect.Type) bool {
	return t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.String
}

// keySpecs is the metadata key table, in the order of the documentation table.
var keySpecs = []keySpec{
	{KeyURL, "string", isStringKind},
	{KeyRelativeURI, "string", isStringKind},
	{KeyHTTPMethod, "string", isStringKind},
	{KeyHeaders, "map[string]string", isStringMap},
	{KeyAppEngineService, "*string", isStringPtr},
	{KeyAppEngineVersion, "*string", isStringPtr},
	{KeyAppEngineInstance, "*string", isStringPtr},
	{KeyScheduleTime, "time.Time", func(t reflect.Type) bool { return t == timeType }},
	{KeyDispatchDeadline, "time.Duration", func(t reflect.Type) bool { return t == durationType }},
	{KeyTaskID, "string", isStringKind},
}

// Keys returns every metadata key, in the order of the documentation table.
func Keys() []string {
	keys := make([]string, len(keySpecs))
	for i, k := range keySpecs {
		keys[i] = k.key
	}
	return keys
}

// Field is one body field of an element type.
type Field struct {
	// Name is the field's name in the body: its json tag name when it has one, else the Go
	// field name. It is "" for a plain string or []byte element, which has no field names.
	Name string
	// GoName is the Go struct field name ("" for a plain string or []byte element).
	GoName string
	// Index is the field's index in the struct (reflect.Value.Field), or -1 for a plain
	// string or []byte element, whose whole value is the single body field.
	Index int
	// Type is the field's Go type.
	Type reflect.Type
	// jsonTag is the field's original json tag, kept for the JSON encoder.
	jsonTag string
}

// Describe names the field in error messages: Go name, plus the body name when it differs.
func (f Field) Describe() string {
	switch {
	case f.Index < 0:
		return "the element value"
	case f.Name != f.GoName:
		return fmt.Sprintf("field %s (body name %s)", f.GoName, boundedtext.Quote(f.Name))
	}
	return "field " + f.GoName
}

type metaField struct {
	key    string
	goName string
	index  int
}

// Schema is the analysis of an element type: which of its fields form the body and which carry
// request metadata. Build it once with NewSchema (at pipeline construction and again on the
// worker); it is immutable and safe for concurrent use.
type Schema struct {
	typ   reflect.Type // as given to NewSchema
	base  reflect.Type // typ without its pointer
	plain bool         // a string or []byte element: one body field, no metadata
	body  []Field
	meta  []metaField
	byKey map[string]int // key -> index into meta
}

// NewSchema analyses an element type. t is a struct, a pointer to a struct, or a plain type
// whose kind is string or []byte (one body field, no metadata).
//
// Fields tagged `cloudtasks:"<key>"` are metadata; every other exported field is a body field,
// named by its json tag when it has one (a field tagged json:"-" is neither). Unexported
// untagged fields are ignored. The error names the field and the tag for: an unknown key, a
// field whose Go type does not fit its key, a key used twice, a tagged unexported field, two
// body fields with the same name, and an embedded field, exported or not, whose fields
// encoding/json would promote (embedding is not supported; give the field a name).
func NewSchema(t reflect.Type) (*Schema, error) {
	s, err := newSchema(t)
	return s, withPrefix(err)
}

// newSchema is NewSchema without the package prefix on its errors; the schema is nil on error.
func newSchema(t reflect.Type) (*Schema, error) {
	if t == nil {
		return nil, fmt.Errorf("element type is nil")
	}
	s := &Schema{typ: t, base: t, byKey: map[string]int{}}
	if t.Kind() == reflect.Pointer {
		s.base = t.Elem()
	}
	if isPlainBody(s.base) {
		if t.Kind() == reflect.Pointer {
			return nil, fmt.Errorf("element type %s: a plain string or []byte element must not be a pointer", t)
		}
		s.plain = true
		s.body = []Field{{Index: -1, Type: t}}
		return s, nil
	}
	if s.base.Kind() != reflect.Struct {
		return nil, fmt.Errorf("element type %s: want a struct, a pointer to a struct, a string or a []byte", t)
	}
	names := map[string]string{} // body name -> Go name
	for i := range s.base.NumField() {
		sf := s.base.Field(i)
		key, tagged := sf.Tag.Lookup(TagName)
		if tagged {
			if err := s.addMeta(sf, i, key); err != nil {
				return nil, err
			}
			continue
		}
		jsonTag := sf.Tag.Get("json")
		name, skip := bodyName(sf.Name, jsonTag)
		if skip {
			continue
		}
		if embeddedStruct(sf) {
			return nil, fmt.Errorf("embedded field %s of %s: embedded fields are not supported; give the field a name", sf.Name, t)
		}
		if !sf.IsExported() {
			continue
		}
		if other, dup := names[name]; dup {
			return nil, fmt.Errorf("fields %s and %s of %s both have the body name %s", other, sf.Name, t, boundedtext.Quote(name))
		}
		names[name] = sf.Name
		s.body = append(s.body, Field{Name: name, GoName: sf.Name, Index: i, Type: sf.Type, jsonTag: jsonTag})
	}
	return s, nil
}

func (s *Schema) addMeta(sf reflect.StructField, index int, key string) error {
	where := fmt.Sprintf("field %s (%s:%s) of %s", sf.Name, TagName, boundedtext.Quote(key), s.typ)
	i := slices.IndexFunc(keySpecs, func(k keySpec) bool { return k.key == key })
	if i < 0 {
		return fmt.Errorf("%s: unknown metadata key; known keys: %s", where, strings.Join(Keys(), ", "))
	}
	if !sf.IsExported() {
		return fmt.Errorf("%s: a metadata field must be exported", where)
	}
	if spec := keySpecs[i]; !spec.fits(sf.Type) {
		return fmt.Errorf("%s: has Go type %s, want %s", where, sf.Type, spec.want)
	}
	if prev, dup := s.byKey[key]; dup {
		return fmt.Errorf("%s: key already used by field %s", where, s.meta[prev].goName)
	}
	s.byKey[key] = len(s.meta)
	s.meta = append(s.meta, metaField{key: key, goName: sf.Name, index: index})
	return nil
}

// embeddedStruct reports whether sf is an embedded field whose fields encoding/json would
// promote: an exported embedded field of any type, or an unexported one of a struct (or
// pointer to struct) type. Rejecting these keeps a promoted field from being dropped silently.
func embeddedStruct(sf reflect.StructField) bool {
	if !sf.Anonymous {
		return false
	}
	if sf.IsExported() {
		return true
	}
	t := sf.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

func isPlainBody(t reflect.Type) bool {
	return t.Kind() == reflect.String || (t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8)
}

// bodyName applies the json tag naming rules: the tag's name part when it is a valid name,
// else the Go name; skip is true for json:"-".
func bodyName(goName, jsonTag string) (name string, skip bool) {
	if jsonTag == "-" {
		return "", true
	}
	name, _, _ = strings.Cut(jsonTag, ",")
	if !validTagName(name) {
		return goName, false
	}
	return name, false
}

// validTagName mirrors the names encoding/json accepts in a tag, so that every format names a
// field the same way JSON does.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// Plain reports whether the element type is a plain string or []byte type: its whole value is
// the single body field (BodyFields()[0], Index -1) and it carries no metadata.
func (s *Schema) Plain() bool { return s.plain }

// NestedFields lists the fields of a struct type nested in a body field (a record inside the
// body) with the body naming rules: json tag names, json:"-" skipped, unexported fields
// ignored. path names the nested value in errors; an embedded field is an error.
func NestedFields(t reflect.Type, path string) ([]Field, error) {
	var fields []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, skip := bodyName(sf.Name, sf.Tag.Get("json"))
		if skip {
			continue
		}
		if embeddedStruct(sf) {
			return nil, fmt.Errorf("%s: embedded field %s is not supported; give the field a name", path, sf.Name)
		}
		if !sf.IsExported() {
			continue
		}
		fields = append(fields, Field{Name: name, GoName: sf.Name, Index: i, Type: sf.Type})
	}
	return fields, nil
}

// Type returns the element type the schema was built from, as given to NewSchema.
func (s *Schema) Type() reflect.Type { return s.typ }

// Has reports whether the element type carries a field tagged with the metadata key.
func (s *Schema) Has(key string) bool {
	_, ok := s.byKey[key]
	return ok
}

// MetadataKeys returns the metadata keys the element type carries, in field order.
func (s *Schema) MetadataKeys() []string {
	keys := make([]string, len(s.meta))
	for i, m := range s.meta {
		keys[i] = m.key
	}
	return keys
}

// CheckKeys reports an error naming the field and key when the element type carries a
// metadata key that is not in allowed. by names what accepts the keys, for the message (for
// example "app-engine targets": "key is not accepted by app-engine targets").
func (s *Schema) CheckKeys(allowed []string, by string) error {
	for _, m := range s.meta {
		if !slices.Contains(allowed, m.key) {
			return withPrefix(fmt.Errorf("field %s (%s:%s) of %s: key is not accepted by %s",
				m.goName, TagName, boundedtext.Quote(m.key), s.typ, by))
		}
	}
	return nil
}

// BodyFields returns the body fields in declaration order. The slice is shared: do not modify it.
func (s *Schema) BodyFields() []Field { return s.body }

// Metadata holds the request metadata read from one element, one field per key. A zero field
// means "not set": the target's fixed value applies. Which keys a target accepts, and what
// their values mean to it, is the caller's rule (Schema.CheckKeys).
type Metadata struct {
	// URL is the value of the url field; "" = not set.
	URL string
	// RelativeURI is the value of the relative-uri field; "" = not set.
	RelativeURI string
	// Method overrides the target's method as written on the element; "" = not set.
	Method string
	// Headers are the element's headers; nil = none. The map is the element's own: do not modify it.
	Headers map[string]string
	// Service, Version and Instance are the app-engine-service, -version and -instance
	// fields: nil = not set, a pointer to "" clears the part.
	Service, Version, Instance *string
	// ScheduleTime is when the task becomes due; the zero time means now.
	ScheduleTime time.Time
	// DispatchDeadline bounds each dispatch attempt; zero = not set. It is not range-checked
	// here: the caller knows the bounds.
	DispatchDeadline time.Duration
	// TaskID is the key a named task's id is derived from.
	TaskID string
	// HasTaskID is true when the element type carries a task-id field. An empty TaskID is then
	// an error for the caller to report.
	HasTaskID bool
}

// Metadata reads the metadata fields of one element. elem must have the schema's type (a value
// or a pointer to it is accepted either way; a nil pointer is an error).
func (s *Schema) Metadata(elem any) (Metadata, error) {
	md := Metadata{HasTaskID: s.Has(KeyTaskID)}
	v, err := s.Value(elem)
	if err != nil {
		return md, withPrefix(err)
	}
	for _, m := range s.meta {
		f := v.Field(m.index)
		switch m.key {
		case KeyURL:
			md.URL = f.String()
		case KeyRelativeURI:
			md.RelativeURI = f.String()
		case KeyHTTPMethod:
			md.Method = f.String()
		case KeyTaskID:
			md.TaskID = f.String()
		case KeyHeaders:
			md.Headers = stringMap(f)
		case KeyAppEngineService:
			md.Service = stringPtr(f)
		case KeyAppEngineVersion:
			md.Version = stringPtr(f)
		case KeyAppEngineInstance:
			md.Instance = stringPtr(f)
		case KeyScheduleTime:
			md.ScheduleTime = f.Interface().(time.Time)
		case KeyDispatchDeadline:
			md.DispatchDeadline = time.Duration(f.Int())
		}
	}
	return md, nil
}

// stringMap returns a map[string]string field as that type, converting named map or key types.
func stringMap(f reflect.Value) map[string]string {
	if f.IsNil() {
		return nil
	}
	if m, ok := f.Interface().(map[string]string); ok {
		return m
	}
	out := make(map[string]string, f.Len())
	for it := f.MapRange(); it.Next(); {
		out[it.Key().String()] = it.Value().String()
	}
	return out
}

func stringPtr(f reflect.Value) *string {
	if f.IsNil() {
		return nil
	}
	if p, ok := f.Interface().(*string); ok {
		return p
	}
	str := f.Elem().String()
	return &str
}

// Value returns the element as a (dereferenced) value of the schema's base type; the error
// names the types when elem is nil or of another type, never its data. It is for encoders,
// whose errors leave through NewEncoder or Encoder.Encode: it has no package prefix.
func (s *Schema) Value(elem any) (reflect.Value, error) {
	v := reflect.ValueOf(elem)
	if !v.IsValid() {
		return v, fmt.Errorf("element is nil, want %s", s.typ)
	}
	if v.Type() == s.base {
		return v, nil
	}
	if v.Kind() == reflect.Pointer && v.Type().Elem() == s.base {
		if v.IsNil() {
			return v, fmt.Errorf("element is a nil %s", v.Type())
		}
		return v.Elem(), nil
	}
	return v, fmt.Errorf("element has type %s, want %s", v.Type(), s.typ)
}

// fieldValue returns the value of body field f of the element value v.
func fieldValue(v reflect.Value, f Field) reflect.Value {
	if f.Index < 0 {
		return v
	}
	return v.Field(f.Index)
}
