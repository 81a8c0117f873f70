package cloudtasksio

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configFieldType returns the type of the Config field at path ("HTTP.OIDC.Audience"),
// following pointers, or nil when there is no such field.
func configFieldType(path string) reflect.Type {
	t := reflect.TypeFor[Config]()
	for part := range strings.SplitSeq(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		f, ok := t.FieldByName(part)
		if !ok {
			return nil
		}
		t = f.Type
	}
	return t
}

// TestEveryOptionRowSetsARealConfigField keeps the table's field paths, through which a field
// error finds its key, in step with the Config struct.
func TestEveryOptionRowSetsARealConfigField(t *testing.T) {
	for _, r := range optionTable {
		if r.key == optTargetType {
			assert.Nil(t, r.fields, "target.type chooses the target; it sets no field")
			continue
		}
		require.NotEmpty(t, r.fields, "row %q", r.key)
		for _, f := range r.fields {
			assert.NotNil(t, configFieldType(f), "row %q sets %q, which is not a Config field", r.key, f)
		}
	}
}

func TestFieldsAreNamedForTheFormThatReportsThem(t *testing.T) {
	for field, want := range map[string]string{
		"HTTP.URL": "HTTPTarget.URL", "AppEngine.Routing.Service": "AppEngineTarget.Routing.Service",
		"Writer.ChannelPoolSize": "WriterOptions.ChannelPoolSize", "Staged.NameRetention": "StagedOptions.NameRetention",
		"Staged": "Config.Staged", "Client.Endpoint": "Config.Client.Endpoint", "EmulatorEndpoint": "Config.EmulatorEndpoint",
	} {
		assert.Equal(t, want, goFieldName(field), field)
	}
	for field, want := range map[string]string{
		"HTTP.URL": "http.url", "Writer.ChannelPoolSize": "sink.channel-pool-size", "HTTP.OIDC": "http.oidc.*",
		"Staged": "sink.staged.*", "HTTP.Headers": "http.headers", "AppEngine.Body": "format", "QueueFn": "Config.QueueFn",
	} {
		assert.Equal(t, want, optionKeyName(field), field)
	}
}

// TestConstructionErrorsCarryThePackagePrefixOnce checks that a rule's error is prefixed by
// the entry point that reports it, once, whichever form reported it.
func TestConstructionErrorsCarryThePackagePrefixOnce(t *testing.T) {
	for _, cfg := range []Config{
		{Queue: Queue{Project: "p", Location: "l", Name: "bad/name"}, HTTP: &HTTPTarget{URL: "https://example.com/"}},
		{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/", Method: "FETCH"}},
		{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/"}, EmulatorEndpoint: "localhost"},
		{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/"}, Delivery: ExactlyOnce,
			Staged: &StagedOptions{NameRetention: time.Minute, RequestTimeout: time.Minute}},
		{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/"},
			Writer: WriterOptions{AdaptiveConcurrency: AdaptiveConcurrency(7)}},
		{Queue: Queue{Project: "p", Location: "l", Name: "q"}, HTTP: &HTTPTarget{URL: "https://example.com/"},
			Writer: WriterOptions{QueuePreflight: QueuePreflight(9)}},
	} {
		_, err := compile(cfg, typeOf(eoPlainOrder{}))
		require.Error(t, err)
		err = withPrefix(err)
		assert.Equal(t, 1, strings.Count(err.Error(), "cloudtasksio:"), "%v", err)
	}
	_, err := ConfigFromOptions(map[string]string{"project": "p", "location": "l", "queue": "q", "emulator-endpoint": "localhost"})
	require.Error(t, err)
	assert.Equal(t, 1, strings.Count(err.Error(), "cloudtasksio:"), "%v", err)
}

// TestHeadersTooLargeTogetherNameAGivenHeaderKey: no one header is at fault, so the error
// names the first of the keys given.
func TestHeadersTooLargeTogetherNameAGivenHeaderKey(t *testing.T) {
	_, err := ConfigFromOptions(map[string]string{"project": "p", "location": "l", "queue": "q",
		"http.headers.X-B": strings.Repeat("b", maxHeaderBytes/2), "http.headers.X-A": strings.Repeat("a", maxHeaderBytes/2)})
	var oe *OptionError
	require.True(t, errors.As(err, &oe), "%v", err)
	assert.Equal(t, "http.headers.X-A", oe.Key)
	assert.Contains(t, oe.Reason, "the limit is under")
}
