package xlang

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// TestEveryOptionKeyIsAFieldOfItsOwn keeps the fields derived from ConfigFromOptions' key
// table: a key added there is a field here, under a name no other field has.
func TestEveryOptionKeyIsAFieldOfItsOwn(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range fields {
		assert.False(t, seen[f.Name], "two fields are named %s", f.Name)
		seen[f.Name] = true
		assert.NotEmpty(t, f.Description, f.Name)
	}
	for _, key := range cloudtasksio.OptionKeys() {
		f, ok := fieldsByName[fieldName(key)]
		if assert.True(t, ok, "option key %s has no field", key) {
			assert.Equal(t, key, f.Key)
		}
	}
	for _, prefix := range cloudtasksio.OptionHeaderPrefixes() {
		f, ok := fieldsByName[fieldName(prefix)]
		if assert.True(t, ok, "header family %s has no field", prefix) {
			assert.Equal(t, kindHeaders, f.Kind)
		}
	}
	for name, key := range map[string]string{"http_url": "http.url", "sink_in_flight_max_tasks": "sink.in-flight.max-tasks",
		"emulator_endpoint": "emulator-endpoint", "csv_null_literal": "csv.null-literal", "http_headers": "http.headers."} {
		assert.Equal(t, key, fieldsByName[name].Key, name)
	}
	assert.True(t, fieldsByName["project"].Required)
}
