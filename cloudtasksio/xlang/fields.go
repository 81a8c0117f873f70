package xlang

import (
	"fmt"
	"reflect"
	"strings"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// This file holds the transform's configuration fields: one per option key of
// cloudtasksio.ConfigFromOptions (derived from its key table, cloudtasksio.OptionSpecs), one map
// per header family, one per format option, and the fields of this transform's own (the
// *_field settings, on_failure, error_handling). Discovery lists them and the configuration a
// caller sends is checked against them.

// fieldKind is what a configuration field holds.
type fieldKind int

const (
	kindText          fieldKind = iota // STRING: any option value ConfigFromOptions reads as text
	kindInteger                        // INT64 (INT16, INT32 and BYTE accepted)
	kindBoolean                        // BOOLEAN
	kindDecimal                        // DOUBLE (FLOAT and integers accepted)
	kindHeaders                        // MAP<STRING, STRING>: a header family
	kindErrorHandling                  // ROW{output: STRING}, or MAP<STRING, STRING> with the key "output"
)

// typeName says what a field of the kind takes, in errors and descriptions.
func (k fieldKind) typeName() string {
	switch k {
	case kindInteger:
		return "an integer"
	case kindBoolean:
		return "a boolean"
	case kindDecimal:
		return "a number"
	case kindHeaders:
		return "a map of strings to strings"
	case kindErrorHandling:
		return "a row or map with a string field output"
	}
	return "a string"
}

// field is one configuration field.
type field struct {
	// Name is the field's name in the configuration ("sink_in_flight_max_tasks").
	Name string
	// Key is the option key it sets ("sink.in-flight.max-tasks"), or for a header map the
	// family's prefix ("http.headers."); empty for the transform's own fields.
	Key  string
	Kind fieldKind
	// Required fields must be given.
	Required bool
	// Description is the one line discovery shows.
	Description string
}

// The transform's own fields.
const (
	fieldTaskID        = "task_id_field"
	fieldURL           = "url_field"
	fieldScheduleTime  = "schedule_time_field"
	fieldOnFailure     = "on_failure"
	fieldErrorHandling = "error_handling"
	fieldFormat        = "format"
	fieldTargetType    = "target_type"
)

// fieldName is the configuration name of an option key: "." and "-" written "_".
func fieldName(key string) string {
	return strings.NewReplacer(".", "_", "-", "_").Replace(strings.TrimSuffix(key, "."))
}

// fields are every configuration field, in the order discovery lists them: the option keys in
// the key table's order, then the transform's own.
var fields = buildFields()

// fieldsByName indexes fields by Name.
var fieldsByName = func() map[string]field {
	m := map[string]field{}
	for _, f := range fields {
		m[f.Name] = f
	}
	return m
}()

func buildFields() []field {
	var out []field
	for _, spec := range cloudtasksio.OptionSpecs() {
		target := ""
		if spec.TargetType != "" {
			target = " (target_type " + spec.TargetType + ")"
		}
		switch {
		case spec.Prefix && spec.Entries == nil: // a header family
			out = append(out, field{Name: fieldName(spec.Key), Key: spec.Key, Kind: kindHeaders,
				Description: fmt.Sprintf("Sets %s%s, one entry per header name (options %s<Name>); %s.", spec.Sets, target, spec.Key, spec.Accepts)})
		case spec.Prefix: // the options of a format
			for _, e := range spec.Entries {
				key := spec.Key + e
				out = append(out, field{Name: fieldName(key), Key: key, Kind: kindText,
					Description: fmt.Sprintf("Option %s of format %s (option %s); %s.", e, strings.TrimSuffix(spec.Key, "."), key, spec.Accepts)})
			}
		default:
			f := field{Name: fieldName(spec.Key), Key: spec.Key, Kind: kindOf(spec.Value), Required: spec.Required}
			sets := "Sets " + spec.Sets
			if spec.Sets == "" {
				sets = "Chooses the target"
			}
			f.Description = fmt.Sprintf("%s%s (option %s); %s.", sets, target, spec.Key, spec.Accepts)
			if f.Name == fieldFormat {
				f.Description = "The body format (option format): json, the default for rows, sends the row as a JSON object; " +
					"raw, the default for bytes, sends the bytes as they are; csv, form-urlencoded and avro encode rows; " + spec.Accepts + "."
			}
			out = append(out, f)
		}
	}
	return append(out,
		field{Name: fieldTaskID, Kind: kindText, Description: "Names the input row's field (a string or an integer) whose value is the task's " +
			"deduplication key: the task is named after its SHA-256, so an element written again creates nothing new. " +
			"A row whose field is null or empty is that element's failure (code TASK_ID). Rows only."},
		field{Name: fieldURL, Kind: kindText, Description: "Names the input row's string field holding the task's URL (relative URI for " +
			"target_type app-engine); a null or empty value uses http_url (app_engine_relative_uri). Rows only."},
		field{Name: fieldScheduleTime, Kind: kindText, Description: "Names the input row's field holding when the task is dispatched: " +
			"a timestamp (Python Timestamp, Java DATETIME), an RFC 3339 string such as 2026-05-01T09:30:00Z, or an integer of seconds since the Unix epoch; null or empty: as soon as the queue allows. Rows only."},
		field{Name: fieldOnFailure, Kind: kindText, Description: "What an element that cannot become a task does (the body cannot be built, " +
			"Cloud Tasks answers INVALID_ARGUMENT, a task id is empty, the task is too large): fail (the default) fails the bundle, " +
			"log_and_drop logs it and drops it, dead_letter sends it to the error_handling output (the default with error_handling)."},
		field{Name: fieldErrorHandling, Kind: kindErrorHandling, Description: "Beam YAML's error handling, {output: NAME}: failed " +
			"elements leave under the output NAME as rows of element (the input row or bytes), msg, stack, code and destination."},
	)
}

// kindOf is the field kind of an option whose value parses into t.
func kindOf(t reflect.Type) fieldKind {
	switch t {
	case reflect.TypeFor[int]():
		return kindInteger
	case reflect.TypeFor[bool]():
		return kindBoolean
	case reflect.TypeFor[float64]():
		return kindDecimal
	}
	return kindText // text, durations, lists, choices
}

// schemaType is the field's type in the configuration schema that discovery lists. Every
// field is nullable: a caller leaves out what it does not set.
func (f field) schemaType() *pipepb.FieldType {
	atomic := func(a pipepb.AtomicType, nullable bool) *pipepb.FieldType {
		return &pipepb.FieldType{Nullable: nullable, TypeInfo: &pipepb.FieldType_AtomicType{AtomicType: a}}
	}
	switch f.Kind {
	case kindInteger:
		return atomic(pipepb.AtomicType_INT64, true)
	case kindBoolean:
		return atomic(pipepb.AtomicType_BOOLEAN, true)
	case kindDecimal:
		return atomic(pipepb.AtomicType_DOUBLE, true)
	case kindHeaders:
		return &pipepb.FieldType{Nullable: true, TypeInfo: &pipepb.FieldType_MapType{MapType: &pipepb.MapType{
			KeyType: atomic(pipepb.AtomicType_STRING, false), ValueType: atomic(pipepb.AtomicType_STRING, false)}}}
	case kindErrorHandling:
		return &pipepb.FieldType{Nullable: true, TypeInfo: &pipepb.FieldType_RowType{RowType: &pipepb.RowType{Schema: &pipepb.Schema{
			Id:     "beam-cloudtasks-error-handling-v1",
			Fields: []*pipepb.Field{{Name: "output", Type: atomic(pipepb.AtomicType_STRING, true)}},
		}}}}
	}
	return atomic(pipepb.AtomicType_STRING, true)
}

// configSchema is the configuration schema discovery lists.
func configSchema() *pipepb.Schema {
	s := &pipepb.Schema{Id: "beam-cloudtasks-cloudtasks-write-config-v1"}
	for _, f := range fields {
		s.Fields = append(s.Fields, &pipepb.Field{Name: f.Name, Description: f.Description, Type: f.schemaType()})
	}
	return s
}
