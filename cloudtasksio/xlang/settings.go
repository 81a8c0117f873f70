package xlang

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file reads a decoded configuration into settings: the option keys for
// cloudtasksio.ConfigFromOptions and the transform's own fields. Every error names the field
// at fault and never repeats a value a caller may have put a secret in.

// The values of on_failure.
const (
	onFailureFail       = "fail"
	onFailureLogAndDrop = "log_and_drop"
	onFailureDeadLetter = "dead_letter"
)

// defaultErrorOutput names the transform's output when the configuration has no
// error_handling: Java's External refuses a transform without outputs, so there is always one.
const defaultErrorOutput = "errors"

// settings is a checked configuration.
type settings struct {
	// options are the option keys of cloudtasksio.ConfigFromOptions, format included.
	options map[string]string
	// The input row fields of the metadata; empty when not set.
	taskIDField, urlField, scheduleTimeField string
	// onFailure is fail, log_and_drop or dead_letter.
	onFailure string
	// errorOutput names the error output: error_handling's output, else defaultErrorOutput.
	errorOutput string
	// errorHandling says error_handling was given.
	errorHandling bool
}

// configError is an error about the configuration; Error says which field.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErr(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// quoteName quotes a name a caller sent, cut short when it is long.
func quoteName(s string) string { return boundedtext.Quote(s) }

// readSettings checks the decoded configuration against the fields and returns its settings.
// Fields are checked in name order, so the same configuration always gives the same error.
func readSettings(row map[string]value) (settings, error) {
	st := settings{options: map[string]string{}, onFailure: onFailureFail, errorOutput: defaultErrorOutput}
	names := slices.Sorted(maps.Keys(row))
	for _, name := range names {
		if _, ok := fieldsByName[name]; !ok {
			return settings{}, unknownField(name)
		}
	}
	onFailureGiven := false
	for _, name := range names {
		f, v := fieldsByName[name], row[name]
		if v.V == nil {
			continue // null: not set, as Python sends the fields it leaves out
		}
		text, err := f.read(v)
		if err != nil {
			return settings{}, err
		}
		switch f.Name {
		case fieldTaskID:
			st.taskIDField = text
		case fieldURL:
			st.urlField = text
		case fieldScheduleTime:
			st.scheduleTimeField = text
		case fieldOnFailure:
			st.onFailure, onFailureGiven = strings.ReplaceAll(strings.ToLower(text), "-", "_"), true
			if !slices.Contains([]string{onFailureFail, onFailureLogAndDrop, onFailureDeadLetter}, st.onFailure) {
				return settings{}, configErr("field %s: value %s is not accepted; accepted: %s, %s, %s", fieldOnFailure,
					boundedtext.Quote(text), onFailureFail, onFailureLogAndDrop, onFailureDeadLetter)
			}
		case fieldErrorHandling:
			st.errorOutput, st.errorHandling = text, true
		default:
			if f.Kind == kindHeaders {
				for _, e := range v.V.([]entry) {
					st.options[f.Key+e.Key.V.(string)] = e.Value.V.(string)
				}
				continue
			}
			st.options[f.Key] = text
		}
	}
	for _, name := range []string{fieldTaskID, fieldURL, fieldScheduleTime} {
		if v, ok := row[name]; ok && v.V != nil && v.V.(string) == "" {
			return settings{}, configErr("field %s is empty: it names a field of the input rows; leave it out to set no such field", name)
		}
	}
	switch {
	case st.errorHandling && !onFailureGiven:
		st.onFailure = onFailureDeadLetter
	case st.errorHandling && st.onFailure != onFailureDeadLetter:
		return settings{}, configErr("field %s is %s, but %s sends failed elements to the output %s: leave %s out or set it to %s",
			fieldOnFailure, st.onFailure, fieldErrorHandling, boundedtext.Quote(st.errorOutput), fieldOnFailure, onFailureDeadLetter)
	case !st.errorHandling && st.onFailure == onFailureDeadLetter:
		return settings{}, configErr("field %s is %s, which needs %s {output: NAME}: the output that receives the failed elements",
			fieldOnFailure, onFailureDeadLetter, fieldErrorHandling)
	}
	return st, nil
}

// read checks a non-null value against the field's kind and returns it as option text (for
// error_handling, the output's name). Header maps are checked here and read by the caller.
func (f field) read(v value) (string, error) {
	wrong := func() (string, error) {
		return "", configErr("field %s must be %s; it was sent as %s", f.Name, f.Kind.typeName(), typeName(v.Type))
	}
	switch x := v.V.(type) {
	case string:
		if f.Kind == kindText {
			return x, nil
		}
	case bool:
		if f.Kind == kindBoolean {
			return strconv.FormatBool(x), nil
		}
	case int64:
		switch f.Kind {
		case kindInteger, kindDecimal:
			return strconv.FormatInt(x, 10), nil
		}
	case float64:
		if f.Kind == kindDecimal {
			return strconv.FormatFloat(x, 'f', -1, 64), nil
		}
	case []entry:
		if f.Kind == kindHeaders {
			for _, e := range x {
				if _, ok := e.Key.V.(string); !ok {
					return wrong()
				}
				if _, ok := e.Value.V.(string); !ok {
					if e.Value.V == nil {
						return "", configErr("field %s: the entry %s has no value", f.Name, boundedtext.Quote(fmt.Sprint(e.Key.V)))
					}
					return wrong()
				}
			}
			return "", nil
		}
		if f.Kind == kindErrorHandling {
			m := map[string]value{}
			for _, e := range x {
				k, ok := e.Key.V.(string)
				if !ok {
					return wrong()
				}
				m[k] = e.Value
			}
			return f.errorOutput(m)
		}
	case map[string]value:
		if f.Kind == kindErrorHandling {
			return f.errorOutput(x)
		}
	}
	return wrong()
}

// errorOutput reads error_handling's one field, output, a non-empty string.
func (f field) errorOutput(m map[string]value) (string, error) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "output" {
			return "", configErr("field %s: unknown entry %s; it takes output only ({output: NAME})", f.Name, quoteName(k))
		}
	}
	out, ok := m["output"].V.(string)
	if !ok || strings.TrimSpace(out) == "" {
		return "", configErr("field %s needs output, the name of the output that receives the failed elements ({output: NAME})", f.Name)
	}
	return out, nil
}

// unknownField is the error of a field no option key or setting has, naming the closest
// known field.
func unknownField(name string) error {
	closest, best := "", -1
	for _, f := range fields {
		if d := editDistance(fieldName(strings.ToLower(name)), f.Name); best < 0 || d < best {
			closest, best = f.Name, d
		}
	}
	return configErr("unknown configuration field %s; the closest known field is %s (option keys are written with _ for . and -, such as http_url for http.url)",
		quoteName(name), closest)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fieldOfKey names the configuration field behind an option key, for ConfigFromOptions'
// errors: the header map of a header key, else the key with _ for . and -.
func fieldOfKey(key string) string {
	for _, p := range cloudtasksio.OptionHeaderPrefixes() {
		if strings.HasPrefix(key, p) {
			return fmt.Sprintf("%s (entry %s)", fieldName(p), boundedtext.Quote(strings.TrimPrefix(key, p)))
		}
	}
	return fieldName(key)
}

// optionsError rewrites an error of cloudtasksio.ConfigFromOptions or TryWrite about an option
// key so that it names the configuration field first.
func optionsError(err error) error {
	var oe *cloudtasksio.OptionError
	if errors.As(err, &oe) {
		return configErr("field %s (option %s): %s", fieldOfKey(oe.Key), boundedtext.Quote(oe.Key), boundedtext.Cut(oe.Reason, 1024))
	}
	return err
}

// configOf decodes a configuration payload: a schema and the row it encodes.
func configOf(schema *pipepb.Schema, row []byte) (map[string]value, error) {
	if schema == nil {
		return nil, configErr("the configuration has no schema")
	}
	m, err := decodeRow(schema, row)
	if err != nil {
		return nil, configErr("the configuration row cannot be read: %v", err)
	}
	return m, nil
}
