package cloudtasksio_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// withQueue returns the three required keys plus extra.
func withQueue(extra map[string]string) map[string]string {
	opts := map[string]string{"project": "my-project", "location": "asia-northeast1", "queue": "orders"}
	for k, v := range extra {
		opts[k] = v
	}
	return opts
}

var optionsQueue = cloudtasksio.Queue{Project: "my-project", Location: "asia-northeast1", Name: "orders"}

func TestConfigFromOptionsDefaults(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(nil))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.Config{
		Queue: optionsQueue,
		HTTP:  &cloudtasksio.HTTPTarget{Method: "POST"},
	}, cfg)

	cfg, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"target.type": "app-engine"}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.Config{
		Queue:     optionsQueue,
		AppEngine: &cloudtasksio.AppEngineTarget{Method: "POST"},
	}, cfg)

	cfg, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once"}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.ExactlyOnce, cfg.Delivery)
	assert.Nil(t, cfg.Staged, "no sink.staged.* key keeps the staged defaults (nil)")
}

func TestConfigFromOptionsMapsEveryHTTPKey(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"target.type":                             "HTTP",
		"http.url":                                "https://orders-abc-an.a.run.app/tasks",
		"http.method":                             "put",
		"http.headers.Content-Type":               "application/json",
		"http.headers.X-Trace":                    "",
		"http.oidc.service-account-email":         "dispatcher@my-project.iam.gserviceaccount.com",
		"http.oidc.audience":                      "https://orders-abc-an.a.run.app",
		"http.dispatch-deadline":                  "90s",
		"format":                                  "csv",
		"csv.field-delimiter":                     ";",
		"csv.null-literal":                        "",
		"csv.quote-character":                     "'",
		"service-account-key-file":                "/secrets/key.json",
		"sink.delivery-guarantee":                 "at-least-once",
		"sink.in-flight.max-tasks":                "250",
		"sink.channel-pool-size":                  "4",
		"sink.recovery.initial-backoff":           "50ms",
		"sink.recovery.max-backoff":               "1m30s",
		"sink.recovery.max-attempts":              "12",
		"sink.recovery.not-found.initial-backoff": "1s",
		"sink.recovery.not-found.max-backoff":     "4s",
		"sink.recovery.not-found.max-attempts":    "5",
		"sink.metrics.per-destination":            "TRUE",
	}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.Config{
		Queue: optionsQueue,
		HTTP: &cloudtasksio.HTTPTarget{
			URL:     "https://orders-abc-an.a.run.app/tasks",
			Method:  "PUT",
			Headers: map[string]string{"Content-Type": "application/json", "X-Trace": ""},
			OIDC: &cloudtasksio.OIDCToken{
				ServiceAccountEmail: "dispatcher@my-project.iam.gserviceaccount.com",
				Audience:            "https://orders-abc-an.a.run.app",
			},
			Body:             formats.CSV().With("field-delimiter", ";").With("null-literal", "").With("quote-character", "'"),
			DispatchDeadline: 90 * time.Second,
		},
		Delivery:              cloudtasksio.AtLeastOnce,
		ServiceAccountKeyFile: "/secrets/key.json",
		Writer: cloudtasksio.WriterOptions{
			MaxInFlightTasks:               250,
			ChannelPoolSize:                4,
			RecoveryInitialBackoff:         50 * time.Millisecond,
			RecoveryMaxBackoff:             90 * time.Second,
			RecoveryMaxAttempts:            12,
			NotFoundRecoveryInitialBackoff: time.Second,
			NotFoundRecoveryMaxBackoff:     4 * time.Second,
			NotFoundRecoveryMaxAttempts:    5,
			PerDestinationMetrics:          true,
		},
	}, cfg)
}

func TestConfigFromOptionsMapsOAuthAndEmulator(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"http.oauth.service-account-email": "reader@my-project.iam.gserviceaccount.com",
		"http.oauth.scope":                 "https://www.googleapis.com/auth/pubsub",
		"emulator-endpoint":                "127.0.0.1:8123",
		"format":                           "csv",
		"csv.field-delimiter":              ";",
	}))
	require.NoError(t, err)
	assert.Equal(t, &cloudtasksio.OAuthToken{
		ServiceAccountEmail: "reader@my-project.iam.gserviceaccount.com",
		Scope:               "https://www.googleapis.com/auth/pubsub",
	}, cfg.HTTP.OAuth)
	assert.Nil(t, cfg.HTTP.OIDC)
	assert.Equal(t, "127.0.0.1:8123", cfg.EmulatorEndpoint)
	assert.Equal(t, formats.CSV().With(formats.OptionCSVFieldDelimiter, ";"), cfg.HTTP.Body)
}

func TestConfigFromOptionsMapsEveryAppEngineKey(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"target.type":                     "app-engine",
		"app-engine.relative-uri":         "/tasks/orders?source=beam",
		"app-engine.method":               "Put",
		"app-engine.headers.X-Trace":      "abc",
		"app-engine.headers.Content-Type": "Application/X-WWW-Form-URLEncoded",
		"app-engine.service":              "worker",
		"app-engine.version":              "v2",
		"app-engine.instance":             "7",
		"app-engine.dispatch-deadline":    "2h", // above the HTTP bound, within App Engine's
		"format":                          "form-urlencoded",
	}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.Config{
		Queue: optionsQueue,
		AppEngine: &cloudtasksio.AppEngineTarget{
			RelativeURI:      "/tasks/orders?source=beam",
			Method:           "PUT",
			Headers:          map[string]string{"X-Trace": "abc", "Content-Type": "Application/X-WWW-Form-URLEncoded"},
			Routing:          &cloudtasksio.AppEngineRouting{Service: "worker", Version: "v2", Instance: "7"},
			Body:             formats.FormURLEncoded(),
			DispatchDeadline: 2 * time.Hour,
		},
	}, cfg)

	// An empty relative URI is the root; routing left out stays unset.
	cfg, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"target.type": "app-engine", "app-engine.relative-uri": ""}))
	require.NoError(t, err)
	assert.Equal(t, &cloudtasksio.AppEngineTarget{Method: "POST"}, cfg.AppEngine)
}

func TestConfigFromOptionsMapsEveryStagedKey(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"sink.delivery-guarantee":             "Exactly-Once",
		"sink.staged.name-retention":          "2h",
		"sink.staged.clock-skew-allowance":    "0s",
		"sink.staged.request-timeout":         "30s",
		"sink.staged.verify-queue-retention":  "false",
		"sink.staged.expired-envelope-policy": "create-anyway",
	}))
	require.NoError(t, err)
	assert.Equal(t, cloudtasksio.ExactlyOnce, cfg.Delivery)
	assert.Equal(t, &cloudtasksio.StagedOptions{
		NameRetention:         2 * time.Hour,
		ClockSkewAllowance:    0,
		RequestTimeout:        30 * time.Second,
		VerifyQueueRetention:  false,
		ExpiredEnvelopePolicy: cloudtasksio.ExpiredCreateAnyway,
	}, cfg.Staged)

	for value, want := range map[string]cloudtasksio.ExpiredEnvelopePolicy{
		"fail": cloudtasksio.ExpiredFail, "assume-created": cloudtasksio.ExpiredAssumeCreated,
		"create-anyway": cloudtasksio.ExpiredCreateAnyway, "DROP": cloudtasksio.ExpiredDrop,
	} {
		cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
			"sink.delivery-guarantee": "exactly-once", "sink.staged.expired-envelope-policy": value,
		}))
		require.NoError(t, err, value)
		assert.Equal(t, want, cfg.Staged.ExpiredEnvelopePolicy, value)
		// Keys left out keep their defaults.
		d := cloudtasksio.DefaultStagedOptions()
		d.ExpiredEnvelopePolicy = want
		assert.Equal(t, &d, cfg.Staged, value)
	}
}

// TestConfigFromOptionsErrorsNameTheKey checks every kind of rejection: each error is an
// *OptionError whose Key is the key at fault and whose text says what is accepted.
func TestConfigFromOptionsErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name    string
		opts    map[string]string
		key     string
		message string // a fragment of the reason: what is accepted or why
	}{
		{"missing project", map[string]string{"location": "l", "queue": "q"}, "project", "required"},
		{"missing location", map[string]string{"project": "p", "queue": "q"}, "location", "required"},
		{"missing queue", map[string]string{"project": "p", "location": "l"}, "queue", "required"},
		{"blank project", map[string]string{"project": " ", "location": "l", "queue": "q"}, "project", "blank"},
		{"blank queue", map[string]string{"project": "p", "location": "l", "queue": ""}, "queue", "blank"},
		{"project with slash", map[string]string{"project": "p/x", "location": "l", "queue": "q"}, "project", "must be a project id"},
		{"bad queue id", map[string]string{"project": "p", "location": "l", "queue": "orders_eu"}, "queue", "letters, digits and hyphens"},
		{"unknown key", withQueue(map[string]string{"http.uri": "https://x"}), "http.uri", "http.url"},
		{"unknown top-level key", withQueue(map[string]string{"connector": "cloud-tasks"}), "connector", "known keys include project"},
		{"key in the wrong case", withQueue(map[string]string{"HTTP.URL": "https://x"}), "HTTP.URL", "case-sensitive"},
		{"unknown sink key", withQueue(map[string]string{"sink.recovery.max-attempt": "3"}), "sink.recovery.max-attempt", "sink.recovery.max-attempts"},
		{"unknown format option", withQueue(map[string]string{"format": "csv", "csv.delimiter": ";"}), "csv.delimiter", "csv.field-delimiter"},
		{"option of a format without options", withQueue(map[string]string{"format": "json", "json.pretty": "true"}), "json.pretty", "takes no options"},
		{"format option for another format", withQueue(map[string]string{"format": "json", "csv.field-delimiter": ";"}), "csv.field-delimiter", "format is json"},
		{"format option without format", withQueue(map[string]string{"csv.field-delimiter": ";"}), "csv.field-delimiter", "format is not set"},
		{"bad format", withQueue(map[string]string{"format": "xml"}), "format", "json, form-urlencoded, csv, raw, avro"},
		{"bad format option value", withQueue(map[string]string{"format": "csv", "csv.field-delimiter": ";;"}), "csv.field-delimiter", "one character"},
		{"csv quote equal to the delimiter", withQueue(map[string]string{"format": "csv", "csv.field-delimiter": ";", "csv.quote-character": ";"}), "csv.field-delimiter", "must differ"},
		{"csv delimiter equal to the default quote", withQueue(map[string]string{"format": "csv", "csv.field-delimiter": `"`, "csv.null-literal": "NULL"}), "csv.field-delimiter", "must differ"},
		{"csv quote with quoting disabled", withQueue(map[string]string{"format": "csv", "csv.quote-character": "'", "csv.disable-quote-character": "true"}), "csv.disable-quote-character", "cannot be combined"},
		// This test binary does not import formats/avro (integration's does, and tests the avro
		// keys there): the avro format names the import it needs.
		{"avro without its package", withQueue(map[string]string{"format": "avro", "avro.schema": `"string"`}), "format",
			`add the import _ "github.com/beam-cloudtasks/beam-cloudtasks/formats/avro"`},
		{"bad target type", withQueue(map[string]string{"target.type": "pubsub"}), "target.type", "http, app-engine"},
		{"app-engine key on http", withQueue(map[string]string{"app-engine.relative-uri": "/x"}), "app-engine.relative-uri", "target.type is http"},
		{"http key on app-engine", withQueue(map[string]string{"target.type": "app-engine", "http.headers.X-A": "1"}), "http.headers.X-A", "target.type is app-engine"},
		{"relative url", withQueue(map[string]string{"http.url": "/tasks"}), "http.url", "absolute http or https"},
		{"ftp url", withQueue(map[string]string{"http.url": "ftp://example.com/x"}), "http.url", "absolute http or https"},
		{"blank url", withQueue(map[string]string{"http.url": ""}), "http.url", "blank"},
		{"bad method", withQueue(map[string]string{"http.method": "FETCH"}), "http.method", "POST, GET, HEAD, PUT, DELETE, PATCH, OPTIONS"},
		{"bad app-engine method", withQueue(map[string]string{"target.type": "app-engine", "app-engine.method": "CONNECT"}), "app-engine.method", "POST, GET"},
		{"empty header name", withQueue(map[string]string{"http.headers.": "x"}), "http.headers.", "header name"},
		{"bad header name", withQueue(map[string]string{"http.headers.X Trace": "x"}), "http.headers.X Trace", "not a valid HTTP header name"},
		{"header value with newline", withQueue(map[string]string{"http.headers.X-Trace": "a\r\nb"}), "http.headers.X-Trace", "CR, LF"},
		{"headers equal ignoring case", withQueue(map[string]string{"http.headers.X-Trace": "a", "http.headers.x-trace": "b"}), "http.headers.x-trace", "ignore case"},
		{"reserved app-engine header", withQueue(map[string]string{"target.type": "app-engine", "app-engine.headers.X-AppEngine-Country": "JP"}), "app-engine.headers.X-AppEngine-Country", "cannot be overridden"},
		{"form content type conflict", withQueue(map[string]string{"format": "form-urlencoded", "http.headers.content-type": "application/json"}), "http.headers.content-type", "form-urlencoded"},
		{"form content type with parameters", withQueue(map[string]string{"format": "form-urlencoded", "http.headers.Content-Type": "application/x-www-form-urlencoded; charset=UTF-8"}), "http.headers.Content-Type", "form-urlencoded"},
		{"app-engine form content type conflict", withQueue(map[string]string{"target.type": "app-engine", "format": "form-urlencoded", "app-engine.headers.Content-Type": "text/plain"}), "app-engine.headers.Content-Type", "form-urlencoded"},
		{"app-engine blank service", withQueue(map[string]string{"target.type": "app-engine", "app-engine.service": ""}), "app-engine.service", "blank"},
		{"exactly-once key under the default guarantee", withQueue(map[string]string{"sink.staged.expired-envelope-policy": "fail"}), "sink.staged.expired-envelope-policy", "exactly-once"},
		{"oidc with oauth", withQueue(map[string]string{"http.oidc.service-account-email": "a@p.iam.gserviceaccount.com", "http.oauth.service-account-email": "b@p.iam.gserviceaccount.com"}), "http.oauth.service-account-email", "at most one token"},
		{"audience without email", withQueue(map[string]string{"http.oidc.audience": "https://x.run.app"}), "http.oidc.audience", "http.oidc.service-account-email"},
		{"scope without email", withQueue(map[string]string{"http.oauth.scope": "https://www.googleapis.com/auth/cloud-platform"}), "http.oauth.scope", "http.oauth.service-account-email"},
		{"blank oidc email", withQueue(map[string]string{"http.oidc.service-account-email": "  "}), "http.oidc.service-account-email", "blank"},
		{"dispatch deadline out of range", withQueue(map[string]string{"http.dispatch-deadline": "5s"}), "http.dispatch-deadline", "15s"},
		{"dispatch deadline above the HTTP bound", withQueue(map[string]string{"http.dispatch-deadline": "2h"}), "http.dispatch-deadline", "outside [15s, 30m0s]"},
		{"app-engine dispatch deadline below the bound", withQueue(map[string]string{"target.type": "app-engine", "app-engine.dispatch-deadline": "10s"}), "app-engine.dispatch-deadline", "outside [15s, 24h0m15s]"},
		{"app-engine dispatch deadline above the bound", withQueue(map[string]string{"target.type": "app-engine", "app-engine.dispatch-deadline": "24h1m"}), "app-engine.dispatch-deadline", "outside [15s, 24h0m15s]"},
		{"app-engine dispatch deadline not a duration", withQueue(map[string]string{"target.type": "app-engine", "app-engine.dispatch-deadline": "90"}), "app-engine.dispatch-deadline", "Go duration"},
		{"app-engine dispatch deadline zero", withQueue(map[string]string{"target.type": "app-engine", "app-engine.dispatch-deadline": "0s"}), "app-engine.dispatch-deadline", "positive"},
		{"app-engine dispatch deadline blank", withQueue(map[string]string{"target.type": "app-engine", "app-engine.dispatch-deadline": ""}), "app-engine.dispatch-deadline", "blank"},
		{"app-engine dispatch deadline on http", withQueue(map[string]string{"app-engine.dispatch-deadline": "1m"}), "app-engine.dispatch-deadline", "target.type is http"},
		{"relative uri without slash", withQueue(map[string]string{"target.type": "app-engine", "app-engine.relative-uri": "tasks"}), "app-engine.relative-uri", "start with '/'"},
		{"service with space", withQueue(map[string]string{"target.type": "app-engine", "app-engine.service": "my service"}), "app-engine.service", "whitespace"},
		{"bad emulator endpoint", withQueue(map[string]string{"emulator-endpoint": "localhost"}), "emulator-endpoint", "host:port"},
		{"emulator with key file", withQueue(map[string]string{"emulator-endpoint": "127.0.0.1:8123", "service-account-key-file": "/k.json"}), "emulator-endpoint", "service-account-key-file"},
		{"emulator with channel pool", withQueue(map[string]string{"emulator-endpoint": "127.0.0.1:8123", "sink.channel-pool-size": "4"}), "sink.channel-pool-size", "emulator"},
		{"blank key file", withQueue(map[string]string{"service-account-key-file": ""}), "service-account-key-file", "blank"},
		{"bad delivery guarantee", withQueue(map[string]string{"sink.delivery-guarantee": "exactly_once"}), "sink.delivery-guarantee", "at-least-once, exactly-once"},
		{"staged without exactly-once", withQueue(map[string]string{"sink.staged.name-retention": "1h"}), "sink.staged.name-retention", "exactly-once"},
		{"staged at default under at-least-once", withQueue(map[string]string{"sink.delivery-guarantee": "at-least-once", "sink.staged.verify-queue-retention": "true"}), "sink.staged.verify-queue-retention", "exactly-once"},
		{"bad staged duration", withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once", "sink.staged.request-timeout": "20"}), "sink.staged.request-timeout", "Go duration"},
		{"zero name retention", withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once", "sink.staged.name-retention": "0s"}), "sink.staged.name-retention", "positive"},
		{"negative clock skew", withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once", "sink.staged.clock-skew-allowance": "-1s"}), "sink.staged.clock-skew-allowance", "negative"},
		{"no creation window", withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once", "sink.staged.name-retention": "5m20s"}), "sink.staged.name-retention", "less than 1ms"},
		{"bad staged bool", withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once", "sink.staged.verify-queue-retention": "yes"}), "sink.staged.verify-queue-retention", "true, false"},
		{"bad expired policy", withQueue(map[string]string{"sink.delivery-guarantee": "exactly-once", "sink.staged.expired-envelope-policy": "assume_committed"}), "sink.staged.expired-envelope-policy", "fail, assume-created (or assume-committed), create-anyway, drop"},
		{"bad int", withQueue(map[string]string{"sink.in-flight.max-tasks": "1e3"}), "sink.in-flight.max-tasks", "decimal integer"},
		{"int above the limit", withQueue(map[string]string{"sink.in-flight.max-tasks": "1000000"}), "sink.in-flight.max-tasks", "1..100000"},
		{"pool above the limit", withQueue(map[string]string{"sink.channel-pool-size": "65"}), "sink.channel-pool-size", "1..64"},
		{"zero int", withQueue(map[string]string{"sink.recovery.max-attempts": "0"}), "sink.recovery.max-attempts", "at least 1"},
		{"negative int", withQueue(map[string]string{"sink.channel-pool-size": "-2"}), "sink.channel-pool-size", "at least 1"},
		{"int overflow", withQueue(map[string]string{"sink.recovery.not-found.max-attempts": "99999999999999999999"}), "sink.recovery.not-found.max-attempts", "decimal integer"},
		{"bad duration", withQueue(map[string]string{"sink.recovery.initial-backoff": "100"}), "sink.recovery.initial-backoff", "Go duration"},
		{"negative duration", withQueue(map[string]string{"sink.recovery.not-found.max-backoff": "-2s"}), "sink.recovery.not-found.max-backoff", "negative"},
		{"max below initial", withQueue(map[string]string{"sink.recovery.initial-backoff": "2s", "sink.recovery.max-backoff": "1s"}), "sink.recovery.max-backoff", "below initial"},
		{"initial above default max", withQueue(map[string]string{"sink.recovery.not-found.initial-backoff": "3s"}), "sink.recovery.not-found.initial-backoff", "below initial"},
		{"bad bool", withQueue(map[string]string{"sink.metrics.per-destination": "1"}), "sink.metrics.per-destination", "true, false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := cloudtasksio.ConfigFromOptions(tc.opts)
			require.Error(t, err)
			assert.Equal(t, cloudtasksio.Config{}, cfg)
			var oe *cloudtasksio.OptionError
			require.True(t, errors.As(err, &oe), "error %v is not an *OptionError", err)
			assert.Equal(t, tc.key, oe.Key, "error: %v", err)
			assert.Contains(t, err.Error(), `option "`+tc.key+`"`)
			assert.Contains(t, oe.Reason, tc.message)
		})
	}
}

func TestConfigFromOptionsErrorsDoNotRepeatSecrets(t *testing.T) {
	for _, opts := range []map[string]string{
		withQueue(map[string]string{"http.headers.Authorization": "Bearer s3cr3t\n"}),
		withQueue(map[string]string{"http.url": "https://example.com/x?token=s3cr3t#frag ment"}),
		withQueue(map[string]string{"emulator-endpoint": "127.0.0.1:8123", "service-account-key-file": "/s3cr3t/key.json"}),
	} {
		_, err := cloudtasksio.ConfigFromOptions(opts)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "s3cr3t")
	}
}

func TestConfigFromOptionsErrorsAreDeterministic(t *testing.T) {
	opts := withQueue(map[string]string{
		"sink.recovery.max-attempts": "x", "sink.in-flight.max-tasks": "y", "sink.metrics.per-destination": "z",
		"http.method": "FETCH", "bogus.a": "1", "bogus.b": "2",
	})
	_, first := cloudtasksio.ConfigFromOptions(opts)
	require.Error(t, first)
	for range 20 {
		_, err := cloudtasksio.ConfigFromOptions(opts)
		assert.Equal(t, first.Error(), err.Error())
	}
	assert.Contains(t, first.Error(), `"bogus.a"`, "unknown keys are reported first, in key order")
}

// optionsElement is an element type for the construction check below.
type optionsElement struct {
	ID  string `json:"id"`
	URL string `cloudtasks:"url"`
}

// appEngineOptionsElement is optionsElement for App Engine targets, which reject a url field.
type appEngineOptionsElement struct {
	ID string `json:"id"`
}

func formatIs(cfg cloudtasksio.Config, name string) bool {
	if cfg.HTTP != nil {
		return cfg.HTTP.Body.Name == name
	}
	return cfg.AppEngine.Body.Name == name
}

// TestConfigFromOptionsResultPassesTryWrite checks that a Config built from options is one
// TryWrite accepts, and that TryWrite still checks what only the element type can tell.
func TestConfigFromOptionsResultPassesTryWrite(t *testing.T) {
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"format": "json", "http.headers.Content-Type": "application/json",
		"emulator-endpoint": "127.0.0.1:8123", "sink.recovery.max-attempts": "3",
	}))
	require.NoError(t, err)
	p, s := beam.NewPipelineWithRoot()
	_, err = cloudtasksio.TryWrite(s, cfg, beam.Create(s, optionsElement{ID: "a"}))
	require.NoError(t, err)
	require.NotNil(t, p)

	// Without http.url the element type must carry a url field.
	_, s = beam.NewPipelineWithRoot()
	_, err = cloudtasksio.TryWrite(s, cfg, beam.Create(s, "plain"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTPTarget.URL")
}

// parseOptionLines turns "key=value" lines into options (the fuzz input form). A line without
// '=' is a key with an empty value.
func parseOptionLines(text string) map[string]string {
	opts := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		opts[k] = v
	}
	return opts
}

func FuzzConfigFromOptions(f *testing.F) {
	for _, seed := range []string{
		"project=p\nlocation=l\nqueue=q",
		"project=p\nlocation=l\nqueue=q\nhttp.url=https://example.com/x\nformat=csv\ncsv.field-delimiter=;",
		"project=p\nlocation=l\nqueue=q\ntarget.type=app-engine\napp-engine.relative-uri=/x\napp-engine.headers.X-A=1",
		"project=p\nlocation=l\nqueue=q\nsink.delivery-guarantee=exactly-once\nsink.staged.name-retention=5m\nsink.staged.clock-skew-allowance=0s",
		"project=p\nlocation=l\nqueue=q\nsink.recovery.initial-backoff=9223372036854775807ns\nsink.recovery.max-backoff=1ns",
		"project=p\nlocation=l\nqueue=q\nformat=avro\navro.schema={\"type\":\"string\"}",
		"project=p\nlocation=l\nqueue=q\nemulator-endpoint=[::1]:80\nhttp.oidc.audience=x",
		"queue=q\nhttp.headers.=x",
		"",
	} {
		f.Add(seed)
	}
	required := []string{"project", "location", "queue"}
	f.Fuzz(func(t *testing.T, text string) {
		opts := parseOptionLines(text)
		cfg, err := cloudtasksio.ConfigFromOptions(opts)
		if err != nil {
			var oe *cloudtasksio.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an *OptionError", err)
			}
			if _, given := opts[oe.Key]; !given && !slices.Contains(required, oe.Key) {
				t.Fatalf("error names key %q, which is neither in the input nor required: %v", oe.Key, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(oe.Key)) {
				t.Fatalf("error text does not contain its key %q: %v", oe.Key, err)
			}
			return
		}
		// A Config returned without error carries the queue and exactly one target.
		if _, err := cloudtasksio.NewQueue(cfg.Queue.Project, cfg.Queue.Location, cfg.Queue.Name); err != nil {
			t.Fatalf("accepted options gave an invalid queue: %v", err)
		}
		if (cfg.HTTP == nil) == (cfg.AppEngine == nil) {
			t.Fatalf("accepted options gave HTTP=%v AppEngine=%v; want exactly one", cfg.HTTP, cfg.AppEngine)
		}
		if cfg.Staged != nil && cfg.Delivery != cloudtasksio.ExactlyOnce {
			t.Fatal("accepted options set Staged without ExactlyOnce")
		}
		if cfg.EmulatorEndpoint != "" && (cfg.ServiceAccountKeyFile != "" || cfg.Writer.ChannelPoolSize != 0) {
			t.Fatal("accepted options combine an emulator with credentials or a channel pool")
		}
		// Everything the options could say is checked: a format other than avro (whose schema
		// depends on the element type) encodes these element types, so TryWrite accepts it.
		if cfg.Delivery == cloudtasksio.AtLeastOnce && !formatIs(cfg, formats.NameAvro) {
			_, s := beam.NewPipelineWithRoot()
			col := beam.Create(s, optionsElement{ID: "a"})
			if cfg.AppEngine != nil {
				col = beam.Create(s, appEngineOptionsElement{ID: "a"})
			}
			if _, err := cloudtasksio.TryWrite(s, cfg, col); err != nil {
				t.Fatalf("accepted options gave a Config that TryWrite rejects: %v", err)
			}
		}
		if w := cfg.Writer; w.MaxInFlightTasks < 0 || w.ChannelPoolSize < 0 || w.RecoveryMaxAttempts < 0 ||
			w.NotFoundRecoveryMaxAttempts < 0 || w.RecoveryInitialBackoff < 0 || w.RecoveryMaxBackoff < 0 ||
			w.NotFoundRecoveryInitialBackoff < 0 || w.NotFoundRecoveryMaxBackoff < 0 {
			t.Fatalf("accepted options gave negative writer options %+v", w)
		}
	})
}

func TestTheReferenceSpellingAssumeCommittedIsAccepted(t *testing.T) {
	for _, value := range []string{"assume-committed", "ASSUME-COMMITTED"} {
		cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
			"sink.delivery-guarantee": "exactly-once", "sink.staged.expired-envelope-policy": value,
		}))
		require.NoError(t, err, value)
		assert.Equal(t, cloudtasksio.ExpiredAssumeCreated, cfg.Staged.ExpiredEnvelopePolicy, value)
	}
}

func TestSinkStagedMaxTasksIsRefusedWithItsReason(t *testing.T) {
	_, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"sink.delivery-guarantee": "exactly-once", "sink.staged.max-tasks": "1000",
	}))
	var oe *cloudtasksio.OptionError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "sink.staged.max-tasks", oe.Key)
	assert.Contains(t, oe.Reason, "no counterpart")
	assert.Contains(t, oe.Reason, "Reshuffle")
}

func TestDurationsTakeTheFlinkConnectorsFormToo(t *testing.T) {
	// The reference writes its durations as "100 ms", "10 s", "1 h": a table's options carry
	// over as they are. Go's form still works, and a number without a unit is refused.
	for value, want := range map[string]time.Duration{
		"100 ms": 100 * time.Millisecond, "100ms": 100 * time.Millisecond, "250 millis": 250 * time.Millisecond,
		"10 s": 10 * time.Second, "10 Seconds": 10 * time.Second, "2 min": 2 * time.Minute, "2 m": 2 * time.Minute,
		"3minutes": 3 * time.Minute, "1 h": time.Hour, "1 hour": time.Hour, "1 d": 24 * time.Hour, "2 days": 48 * time.Hour,
		"1m30s": 90 * time.Second, "1500 µs": 1500 * time.Microsecond, "1500 us": 1500 * time.Microsecond,
		"10 MS": 10 * time.Millisecond, "1500 µS": 1500 * time.Microsecond, "007 s": 7 * time.Second,
	} {
		cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
			"sink.recovery.initial-backoff": value, "sink.recovery.max-backoff": "3 d",
		}))
		require.NoError(t, err, value)
		assert.Equal(t, want, cfg.Writer.RecoveryInitialBackoff, value)
		assert.Equal(t, 72*time.Hour, cfg.Writer.RecoveryMaxBackoff)
	}
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"sink.delivery-guarantee": "exactly-once", "sink.staged.name-retention": "1 h",
		"sink.staged.clock-skew-allowance": "0 s", "sink.staged.request-timeout": "20 s",
	}))
	require.NoError(t, err)
	assert.Equal(t, time.Hour, cfg.Staged.NameRetention)
	assert.Zero(t, cfg.Staged.ClockSkewAllowance)
	assert.Equal(t, 20*time.Second, cfg.Staged.RequestTimeout)

	for _, value := range []string{
		"100", "100 parsecs", " 10 s", "10 s ", "10\ts", "-10 s", "1.5 s", "1 h 30 min", "s", "10 s s",
		// Only ASCII letters fold: ſ is not s, İ is not i, Greek capital Μ is not µ.
		"1 ſ", "1 MİN", "1 ΜS",
	} {
		_, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"sink.recovery.initial-backoff": value}))
		var oe *cloudtasksio.OptionError
		require.ErrorAs(t, err, &oe, "%q", value)
		assert.Equal(t, "sink.recovery.initial-backoff", oe.Key, "%q", value)
		assert.Contains(t, oe.Reason, "10 s", "%q: the error shows both forms", value)
	}
	for _, value := range []string{"106752 d", "9223372036854775807 d", "99999999999999999999 ns", "2562048h"} {
		_, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"sink.recovery.initial-backoff": value}))
		assert.ErrorContains(t, err, "too long for a duration", "%q", value)
	}
	_, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"sink.recovery.initial-backoff": "0 ms"}))
	assert.ErrorContains(t, err, "zero", "a zero Flink duration is zero")
	// Go's zero needs no unit.
	cfg, err = cloudtasksio.ConfigFromOptions(withQueue(map[string]string{
		"sink.delivery-guarantee": "exactly-once", "sink.staged.clock-skew-allowance": "0",
	}))
	require.NoError(t, err)
	assert.Zero(t, cfg.Staged.ClockSkewAllowance)
}

// A recovery backoff over 30 days is refused when the pipeline is built: a typo such as
// 2562047h would park a retry, and its bundle, for centuries (and past the largest Duration
// its jitter wrapped to a 1ms retry storm).
func TestARecoveryBackoffOverThirtyDaysIsRefusedAtConstruction(t *testing.T) {
	for _, key := range []string{"sink.recovery.initial-backoff", "sink.recovery.max-backoff",
		"sink.recovery.not-found.initial-backoff", "sink.recovery.not-found.max-backoff"} {
		opts := withQueue(map[string]string{"format": "json", "http.url": "https://example.com/t",
			"sink.recovery.initial-backoff": "1s", "sink.recovery.max-backoff": "2562047h",
			"sink.recovery.not-found.initial-backoff": "1s", "sink.recovery.not-found.max-backoff": "2562047h"})
		for k := range opts {
			if strings.HasPrefix(k, "sink.recovery.") && k != key {
				delete(opts, k)
			}
		}
		opts[key] = "2562047h"
		cfg, err := cloudtasksio.ConfigFromOptions(opts)
		if err == nil {
			_, s := beam.NewPipelineWithRoot()
			_, err = cloudtasksio.TryWrite(s, cfg, beam.Create(s, optionsElement{ID: "a"}))
		}
		require.Error(t, err, key)
		assert.Contains(t, err.Error(), "must be at most 720h0m0s", key)
	}
	cfg, err := cloudtasksio.ConfigFromOptions(withQueue(map[string]string{"format": "json", "http.url": "https://example.com/t",
		"sink.recovery.max-backoff": "30 d"}))
	require.NoError(t, err)
	_, s := beam.NewPipelineWithRoot()
	_, err = cloudtasksio.TryWrite(s, cfg, beam.Create(s, optionsElement{ID: "a"}))
	require.NoError(t, err, "30 days are allowed")
}
