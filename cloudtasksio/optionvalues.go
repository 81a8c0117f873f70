package cloudtasksio

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file holds the kinds of value an option key takes (text, durations, integers,
// booleans, enumerations): how ConfigFromOptions parses each and what its errors say is
// accepted. The key table (optiontable.go) gives each key one of them.

// valueKind parses one kind of option value: help says what it accepts; parse returns the
// value, or why it is rejected.
type valueKind[T any] struct {
	help  string
	parse func(v string) (T, string)
}

// The value kinds of the option table.
var (
	textValue = valueKind[string]{help: "accepted: a non-blank value", parse: func(v string) (string, string) { return v, "" }}
	// tokenValue is a name without whitespace (App Engine routing).
	tokenValue = valueKind[string]{help: "accepted: a name without whitespace", parse: func(v string) (string, string) {
		if strings.IndexFunc(v, isSpace) >= 0 {
			return "", "must contain no whitespace"
		}
		return v, ""
	}}
	// methodValue is upper-cased; the target's validation checks it.
	methodValue = valueKind[string]{help: "accepted: " + methodList, parse: func(v string) (string, string) { return strings.ToUpper(v), "" }}
	// listValue is comma-separated, blanks around an entry are not part of it.
	listValue = valueKind[[]string]{help: "accepted: a comma-separated list", parse: func(v string) ([]string, string) {
		var out []string
		for d := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(d))
		}
		return out, ""
	}}
	durationValue       = durationKind(false)
	durationOrZeroValue = durationKind(true)
	positiveIntValue    = valueKind[int]{help: "accepted: a decimal integer of at least 1", parse: func(v string) (int, string) {
		n, err := strconv.ParseInt(v, 10, 0)
		if err != nil {
			return 0, fmt.Sprintf("value %s is not a decimal integer; accepted: an integer of at least 1", quoteValue(v))
		}
		if n < 1 {
			return 0, fmt.Sprintf("value %s is below 1; accepted: an integer of at least 1", quoteValue(v))
		}
		return int(n), ""
	}}
	boolValue = valueKind[bool]{help: "accepted: true, false", parse: func(v string) (bool, string) {
		switch {
		case strings.EqualFold(v, "true"):
			return true, ""
		case strings.EqualFold(v, "false"):
			return false, ""
		}
		return false, fmt.Sprintf("value %s is not accepted; accepted: true, false", quoteValue(v))
	}}
)

// durationKind is a Go duration: positive, or not negative with allowZero.
func durationKind(allowZero bool) valueKind[time.Duration] {
	return valueKind[time.Duration]{help: "accepted: a Go duration such as 500ms, 10s or 1h", parse: func(v string) (time.Duration, string) {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return 0, fmt.Sprintf("value %s is not a duration; accepted: a Go duration such as 500ms, 10s, 1m30s or 2h", quoteValue(v))
		case d < 0:
			return 0, fmt.Sprintf("value %s is negative; accepted: a positive duration", quoteValue(v))
		case d == 0 && !allowZero:
			return 0, fmt.Sprintf("value %s is zero; accepted: a positive duration", quoteValue(v))
		}
		return d, ""
	}}
}

// enumValue matches one of the names, in any letter case; accepted lists them for errors.
func enumValue[T any](accepted string, byName map[string]T) valueKind[T] {
	return valueKind[T]{help: "accepted: " + accepted, parse: func(v string) (T, string) {
		x, ok := byName[strings.ToLower(v)]
		if !ok {
			return x, fmt.Sprintf("value %s is not accepted; accepted: %s", quoteValue(v), accepted)
		}
		return x, ""
	}}
}

// quoteValue quotes a rejected value for an error, cut to a length that identifies it without
// flooding the message. It is only used for values of typed keys (numbers, durations,
// booleans, enumerations), never for header values, URLs or paths.
func quoteValue(v string) string {
	const shown = 40 // bytes of a long value kept before the marker
	return strconv.Quote(boundedtext.Cut(v, shown+len(boundedtext.Marker)))
}
