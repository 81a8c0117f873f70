package xlang

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
)

// This file gives Beam's Go SDK the two logical types of an instant that other SDKs' rows
// carry, which it does not know: a Python Timestamp field is a micros_instant, a Java DATETIME
// a millis_instant. Registered, a row holding one can be read by the Go workers, its instant
// is an RFC 3339 string in a JSON body, it can be a schedule_time_field, and it goes back to
// the caller unchanged in an error row.

// The URNs of the instants' logical types.
const (
	urnMicrosInstant = "beam:logical_type:micros_instant:v1"
	urnMillisInstant = "beam:logical_type:millis_instant:v1"
)

// microsInstant is a micros_instant: seconds since the Unix epoch and the microseconds after
// them, a row of two INT64 fields in Beam's encoding (Python's MicrosInstant).
type microsInstant struct {
	Seconds int64 `beam:"seconds"`
	Micros  int64 `beam:"micros"`
}

// microsInstantStorage is its representation in a schema: the same fields, as a row.
type microsInstantStorage = struct {
	Seconds int64 `beam:"seconds"`
	Micros  int64 `beam:"micros"`
}

// Time is the instant.
func (m microsInstant) Time() time.Time { return time.Unix(m.Seconds, m.Micros*1000).UTC() }

// MarshalJSON writes the instant as an RFC 3339 string.
func (m microsInstant) MarshalJSON() ([]byte, error) {
	return json.Marshal(m.Time().Format(time.RFC3339Nano))
}

// millisInstant is a millis_instant: milliseconds since the Unix epoch, an INT64 (Java's
// DATETIME).
type millisInstant int64

// Time is the instant.
func (m millisInstant) Time() time.Time { return time.UnixMilli(int64(m)).UTC() }

// MarshalJSON writes the instant as an RFC 3339 string.
func (m millisInstant) MarshalJSON() ([]byte, error) {
	return json.Marshal(m.Time().Format(time.RFC3339Nano))
}

func init() {
	beam.RegisterType(reflect.TypeFor[microsInstant]())
	beam.RegisterType(reflect.TypeFor[millisInstant]())
	schema.RegisterLogicalType(schema.ToLogicalType(urnMicrosInstant, reflect.TypeFor[microsInstant](), reflect.TypeFor[microsInstantStorage]()))
	schema.RegisterLogicalType(schema.ToLogicalType(urnMillisInstant, reflect.TypeFor[millisInstant](), reflect.TypeFor[int64]()))
}

// instantOf returns the time a field of an instant type holds.
func instantOf(v reflect.Value) (time.Time, bool) {
	switch x := v.Interface().(type) {
	case microsInstant:
		return x.Time(), true
	case millisInstant:
		return x.Time(), true
	}
	return time.Time{}, false
}
