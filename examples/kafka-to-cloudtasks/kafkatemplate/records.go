package kafkatemplate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// recordSpec says how record values are read. It is plain data, shipped inside the DoFns.
type recordSpec struct {
	JSON              bool
	TaskIDField       string
	TaskIDFromKey     bool
	URLField          string
	ScheduleTimeField string
	OnFailure         cloudtasksio.FailurePolicy
	Destination       string // the queue path, for dead letters
}

// record is what a value yields, before it becomes the element type of its target family.
type record struct {
	value        []byte
	key          string
	url          string
	scheduleTime time.Time
}

// read checks a record and picks the configured fields out of its value. The error text
// names the field and what was wrong with it, never the value or the key.
func (spec *recordSpec) read(r Record) (record, error) {
	value := r.Value
	rec := record{value: value}
	if spec.TaskIDFromKey {
		if len(r.Key) == 0 {
			return rec, fmt.Errorf("the Kafka record has no key to name its task (--task_id_from_key)")
		}
		rec.key = string(r.Key)
	}
	if !spec.JSON {
		return rec, nil
	}
	if spec.TaskIDField == "" && spec.URLField == "" && spec.ScheduleTimeField == "" {
		if !json.Valid(value) {
			return rec, fmt.Errorf("the value is not valid JSON")
		}
		return rec, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(value, &fields); err != nil {
		if json.Valid(value) {
			return rec, fmt.Errorf("the value is not a JSON object")
		}
		return rec, fmt.Errorf("the value is not valid JSON")
	}
	if name := spec.TaskIDField; name != "" {
		raw, ok := fields[name]
		if !ok || isNull(raw) {
			return rec, fmt.Errorf("task id field %s is missing", quote(name))
		}
		var s string
		switch {
		case json.Unmarshal(raw, &s) == nil:
			if !losslessJSONString(raw) {
				// Decoding would turn the invalid sequence into U+FFFD, and records whose ids
				// differ only there would share a task name: all but the first would count as
				// deduplicated and create nothing.
				return rec, fmt.Errorf("task id field %s is not valid UTF-8 text (an invalid byte sequence, or an unpaired \\u surrogate escape)", quote(name))
			}
		case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
			s = string(raw) // a number: its JSON text
		default:
			return rec, fmt.Errorf("task id field %s is not a string or a number", quote(name))
		}
		if s == "" {
			return rec, fmt.Errorf("task id field %s is empty", quote(name))
		}
		rec.key = s
	}
	if name := spec.URLField; name != "" {
		if raw, ok := fields[name]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &rec.url); err != nil {
				return rec, fmt.Errorf("url field %s is not a string", quote(name))
			}
		}
	}
	if name := spec.ScheduleTimeField; name != "" {
		if raw, ok := fields[name]; ok && !isNull(raw) {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return rec, fmt.Errorf("schedule time field %s is not a string", quote(name))
			}
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return rec, fmt.Errorf("schedule time field %s is not an RFC 3339 time such as 2026-05-01T09:30:00Z", quote(name))
			}
			rec.scheduleTime = t
		}
	}
	return rec, nil
}

// losslessJSONString reports whether the JSON string raw (quotes included) decodes without
// anything replaced by U+FFFD: it is valid UTF-8, and every \u escape of a UTF-16 surrogate is
// one of a high-low pair.
func losslessJSONString(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	hex := func(b []byte) (rune, bool) {
		n, err := strconv.ParseUint(string(b), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		if i+4 >= len(raw) {
			return false
		}
		r, ok := hex(raw[i+1 : i+5])
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			lo, ok := hex(raw[i+3 : i+7])
			if !ok || lo < 0xDC00 || lo >= 0xE000 {
				return false
			}
			i += 6
		case r >= 0xDC00 && r < 0xE000:
			return false
		}
	}
	return true
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// reject applies the failure policy to a record that could not be read: the error fails the
// bundle, a warning is logged, or a dead letter carrying the record (Record as JSON in the
// payload, and Beam-coded as its element) is emitted.
func (spec *recordSpec) reject(ctx context.Context, rejected beam.Counter, r Record, why error, dead func(deadletter.FailedElement)) error {
	rejected.Inc(ctx, 1)
	switch spec.OnFailure {
	case cloudtasksio.LogAndDrop:
		log.Warnf(ctx, "kafka-to-cloudtasks: dropping a record: %v", why)
		return nil
	case cloudtasksio.DeadLetter:
		payload, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("kafka-to-cloudtasks: encoding a dead letter: %w", err)
		}
		fe := deadletter.FailedElement{
			Connector:   cloudtasksio.Connector,
			Destination: spec.Destination,
			Payload:     payload,
			Code:        cloudtasksio.CodeSerialization,
			Error:       "kafka-to-cloudtasks: " + why.Error() + "; the payload is the record as JSON",
		}
		// The element too, as every dead letter carries it: deadletter.DecodeElement[Record].
		if fe.Element, fe.ElementType, err = deadletter.EncodeElement(r); err != nil {
			fe.Error += "; the dead letter carries no element: " + err.Error()
		}
		dead(fe)
		return nil
	}
	return fmt.Errorf("kafka-to-cloudtasks: a record cannot become a task: %w (see --on_failure)", why)
}

// httpRecordFn reads values into HTTPRecords; values it cannot read go to the failure policy.
type httpRecordFn struct {
	Spec     recordSpec
	rejected beam.Counter
}

func (f *httpRecordFn) Setup() { f.rejected = beam.NewCounter(MetricsNamespace, "recordsRejected") }

func (f *httpRecordFn) ProcessElement(ctx context.Context, value Record, emit func(HTTPRecord), dead func(deadletter.FailedElement)) error {
	rec, err := f.Spec.read(value)
	if err != nil {
		return f.Spec.reject(ctx, f.rejected, value, err, dead)
	}
	emit(HTTPRecord{Value: rec.value, Key: rec.key, URL: rec.url, ScheduleTime: rec.scheduleTime})
	return nil
}

// appEngineRecordFn is httpRecordFn for App Engine targets; the URL field is the relative URI.
type appEngineRecordFn struct {
	Spec     recordSpec
	rejected beam.Counter
}

func (f *appEngineRecordFn) Setup() {
	f.rejected = beam.NewCounter(MetricsNamespace, "recordsRejected")
}

func (f *appEngineRecordFn) ProcessElement(ctx context.Context, value Record, emit func(AppEngineRecord), dead func(deadletter.FailedElement)) error {
	rec, err := f.Spec.read(value)
	if err != nil {
		return f.Spec.reject(ctx, f.rejected, value, err, dead)
	}
	emit(AppEngineRecord{Value: rec.value, Key: rec.key, RelativeURI: rec.url, ScheduleTime: rec.scheduleTime})
	return nil
}
