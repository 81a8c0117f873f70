package cloudtasksio_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

func TestOptionSpecsCoverEveryKeyAndFamily(t *testing.T) {
	specs := map[string]cloudtasksio.OptionSpec{}
	for _, s := range cloudtasksio.OptionSpecs() {
		_, dup := specs[s.Key]
		require.False(t, dup, "key %q listed twice", s.Key)
		specs[s.Key] = s
		assert.NotEmpty(t, s.Accepts, "key %q says nothing about its value", s.Key)
		assert.NotNil(t, s.Value, "key %q", s.Key)
	}
	for _, k := range cloudtasksio.OptionKeys() {
		s, ok := specs[k]
		if assert.True(t, ok, "key %q of OptionKeys is missing", k) {
			assert.False(t, s.Prefix, k)
		}
	}
	for _, p := range cloudtasksio.OptionHeaderPrefixes() {
		s, ok := specs[p]
		if assert.True(t, ok, "header family %q is missing", p) {
			assert.True(t, s.Prefix)
			assert.Nil(t, s.Entries, "header names are free")
		}
	}
	assert.Equal(t, []string{"field-delimiter", "null-literal", "quote-character", "disable-quote-character"}, specs["csv."].Entries)
}

func TestOptionSpecsSayWhatEachValueParsesInto(t *testing.T) {
	specs := map[string]cloudtasksio.OptionSpec{}
	for _, s := range cloudtasksio.OptionSpecs() {
		specs[s.Key] = s
	}
	for key, want := range map[string]reflect.Type{
		"project":                            reflect.TypeFor[string](),
		"target.type":                        reflect.TypeFor[string](),
		"http.headers.":                      reflect.TypeFor[string](),
		"sink.in-flight.max-tasks":           reflect.TypeFor[int](),
		"sink.metrics.per-destination":       reflect.TypeFor[bool](),
		"sink.recovery.max-backoff":          reflect.TypeFor[time.Duration](),
		"sink.in-flight.adaptive-start-rate": reflect.TypeFor[float64](),
		"sink.delivery-guarantee":            reflect.TypeFor[cloudtasksio.DeliveryGuarantee](),
		"client.impersonate-delegates":       reflect.TypeFor[[]string](),
	} {
		assert.Equal(t, want, specs[key].Value, key)
	}
	assert.True(t, specs["project"].Required)
	assert.Equal(t, "http", specs["http.url"].TargetType)
	assert.Equal(t, "app-engine", specs["app-engine.service"].TargetType)
	assert.Equal(t, "", specs["format"].TargetType)
	assert.Equal(t, "WriterOptions.MaxInFlightTasks", specs["sink.in-flight.max-tasks"].Sets)
	assert.Equal(t, "accepted: a decimal integer of at least 1", specs["sink.in-flight.max-tasks"].Accepts)
}
