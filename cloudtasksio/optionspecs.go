package cloudtasksio

import (
	"reflect"
	"slices"
	"strings"
)

// OptionSpec describes one option key of ConfigFromOptions, or one family of keys, as the key
// table holds it. Programs that offer the keys in another form read it instead of keeping
// their own list: the cross-language configuration of package cloudtasksio/xlang derives its
// fields and their descriptions from it.
type OptionSpec struct {
	// Key is the option key ("sink.in-flight.max-tasks"), or for a family the start its keys
	// share ("http.headers.", "csv.").
	Key string
	// Prefix says that Key is the start of a family: the rest of a given key is an entry, a
	// header name or a format option.
	Prefix bool
	// Entries are the entries a family accepts ("field-delimiter", ...); nil accepts any
	// (header names).
	Entries []string
	// TargetType is "http" or "app-engine" when only targets of that type take the key, and
	// "" when every target does.
	TargetType string
	// Required keys must be given.
	Required bool
	// Value is the Go type the value is parsed into: string, bool, int, float64,
	// time.Duration, []string or a named type of choices such as DeliveryGuarantee. It is
	// string for values kept as text: target.type, the format name, header values and
	// format options.
	Value reflect.Type
	// Sets names the Config fields the key sets, as Go writes them
	// ("WriterOptions.MaxInFlightTasks"); empty for target.type, which chooses the target.
	Sets string
	// Accepts says what the value may be ("accepted: a decimal integer of at least 1").
	Accepts string
}

// OptionSpecs returns every row of ConfigFromOptions' key table, in the order of
// https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md: the keys of
// OptionKeys, the header families of OptionHeaderPrefixes and one family per format with
// options.
func OptionSpecs() []OptionSpec {
	out := make([]OptionSpec, 0, len(optionTable))
	for _, r := range optionTable {
		spec := OptionSpec{Key: r.key, Prefix: r.prefix, Entries: slices.Clone(r.entries), TargetType: r.family,
			Required: r.required, Value: r.value, Accepts: r.help}
		if spec.Value == nil {
			spec.Value = reflect.TypeFor[string]()
		}
		spec.TargetType = r.family
		var sets []string
		for _, f := range r.fields {
			sets = append(sets, goFieldName(f))
		}
		spec.Sets = strings.Join(sets, ", ")
		out = append(out, spec)
	}
	return out
}
