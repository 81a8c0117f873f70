package cloudtasksio

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/internal/engine"
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
	// startRateValue is a rate in creates per second: digits with an optional decimal fraction
	// (125, 62.5), nothing else ParseFloat takes (no sign, exponent, underscore or hex).
	startRateValue = valueKind[float64]{help: "accepted: " + startRateAccepted, parse: func(v string) (float64, string) {
		if !decimalNumber.MatchString(v) {
			return 0, fmt.Sprintf("value %s is not a decimal number; accepted: %s", quoteValue(v), startRateAccepted)
		}
		r, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || r > maxAdaptiveStartRate: // the only error left is a range error: too many digits
			return 0, fmt.Sprintf("value %s is above %d; accepted: %s", quoteValue(v), maxAdaptiveStartRate, startRateAccepted)
		case r < engine.MinStartRate:
			return 0, fmt.Sprintf("value %s is below %v; accepted: %s", quoteValue(v), engine.MinStartRate, startRateAccepted)
		}
		return r, ""
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

// durationAccepted says what a duration option accepts.
const durationAccepted = "a Go duration such as 500ms, 10s, 1m30s or 2h, or the Flink connector's form such as 500 ms, 10 s, 5 min or 1 d"

// goDurationSyntax is the grammar of time.ParseDuration: an optional sign, then 0 or numbers
// each with a unit.
var goDurationSyntax = regexp.MustCompile(`^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`)

// durationKind is a duration in Go's syntax or the Flink connector's (flinkDuration): positive,
// or not negative with allowZero.
func durationKind(allowZero bool) valueKind[time.Duration] {
	return valueKind[time.Duration]{help: "accepted: " + durationAccepted, parse: func(v string) (time.Duration, string) {
		d, err := time.ParseDuration(v)
		if err != nil {
			fd, form, fits := flinkDuration(v)
			switch {
			case form && fits:
				d = fd
			case form || goDurationSyntax.MatchString(v):
				return 0, fmt.Sprintf("value %s is too long for a duration; accepted: at most 2562047h (about 292 years)", quoteValue(v))
			default:
				return 0, fmt.Sprintf("value %s is not a duration; accepted: %s", quoteValue(v), durationAccepted)
			}
		}
		switch {
		case d < 0:
			return 0, fmt.Sprintf("value %s is negative; accepted: a positive duration", quoteValue(v))
		case d == 0 && !allowZero:
			return 0, fmt.Sprintf("value %s is zero; accepted: a positive duration", quoteValue(v))
		}
		return d, ""
	}}
}

// flinkUnits are the units of the Flink connector's durations, singular and plural, in lower
// case (flinkDuration folds ASCII letters only, as Flink's Locale.US lower-casing does for
// these words).
var flinkUnits = map[string]time.Duration{
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"µs": time.Microsecond, "μs": time.Microsecond, "us": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond, "microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond, "nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
}

// flinkDuration parses a duration as the Flink connector writes it ("100 ms", "5 min", "1 h",
// "2days"): whole digits, optional spaces, then one unit of flinkUnits in any ASCII letter
// case. form reports whether v has that shape, fits whether its value fits a time.Duration.
// Unlike Flink, a number without a unit (other than Go's "0") is refused rather than read as
// milliseconds (a Go user's "10" likely means something else), and so are spaces around the
// value, as for every option value.
func flinkDuration(v string) (d time.Duration, form, fits bool) {
	digits := len(v) - len(strings.TrimLeft(v, "0123456789"))
	unit, ok := flinkUnits[asciiLower(strings.TrimLeft(v[digits:], " "))]
	if digits == 0 || !ok {
		return 0, false, false
	}
	n, err := strconv.ParseInt(v[:digits], 10, 64)
	if err != nil || n > math.MaxInt64/int64(unit) {
		return 0, true, false
	}
	return time.Duration(n) * unit, true, true
}

// asciiLower lower-cases the ASCII letters of s and leaves every other byte as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
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

// startRateAccepted says what sink.in-flight.adaptive-start-rate takes.
var startRateAccepted = fmt.Sprintf("creates per second per worker process, a decimal number from %v to %d", engine.MinStartRate, maxAdaptiveStartRate)

// decimalNumber is the shape of a start rate: digits, then optionally a point and digits. The
// template's flag checks the same shape (kafkatemplate's reRate).
var decimalNumber = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// quoteValue quotes a rejected value for an error, cut to a length that identifies it without
// flooding the message. It is only used for values of typed keys (numbers, durations,
// booleans, enumerations), never for header values, URLs or paths.
func quoteValue(v string) string {
	const shown = 40 // bytes of a long value kept before the marker
	return strconv.Quote(boundedtext.Cut(v, shown+len(boundedtext.Marker)))
}
