package cloudtasksio

import (
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// uncheckedSpec is the spec compile would make of cfg, without its checks: what a worker
// decodes from a pipeline whose spec was changed after TryWrite checked it.
func uncheckedSpec(cfg Config) *sinkSpec {
	return &sinkSpec{Config: cfg, Elem: &beam.EncodedType{T: typeOf(eoOrder{})}}
}

// workerConfig is a valid sink of the given delivery mode.
func workerConfig(d DeliveryGuarantee) Config {
	return Config{Queue: Queue{Project: "p", Location: "l", Name: "q"}, Delivery: d,
		HTTP: &HTTPTarget{URL: "https://example.com/orders", Body: formats.JSON()}, EmulatorEndpoint: "127.0.0.1:1"}
}

// setUps returns the Setup of every DoFn that runs spec in its delivery mode.
func setUps(spec *sinkSpec, d DeliveryGuarantee) map[string]func() error {
	if d == AtLeastOnce {
		return map[string]func() error{"writeFn": (&writeFn{Spec: spec}).Setup}
	}
	return map[string]func() error{"stageFn": (&stageFn{Spec: spec}).Setup, "stagedCreateFn": (&stagedCreateFn{Spec: spec}).Setup}
}

// TestEveryDoFnRefusesACorruptSpecWithTheConstructionError changes, in the spec a worker
// decodes, what TryWrite would have refused: every DoFn of both delivery modes refuses it in
// Setup, with the very error TryWrite gives for the same Config.
func TestEveryDoFnRefusesACorruptSpecWithTheConstructionError(t *testing.T) {
	for _, c := range []struct {
		name  string
		field string
		bad   func(*Config)
	}{
		{"a queue name with a slash", "Queue.Name", func(c *Config) { c.Queue.Name = "bad/name" }},
		{"no destination", "no destination", func(c *Config) { c.Queue = Queue{} }},
		{"an HTTP method Cloud Tasks lacks", "HTTPTarget.Method", func(c *Config) { c.HTTP = &HTTPTarget{URL: "https://example.com/", Method: "FETCH"} }},
		{"a relative HTTP URL", "HTTPTarget.URL", func(c *Config) { c.HTTP = &HTTPTarget{URL: "/orders"} }},
		{"two targets", "ways to build the task", func(c *Config) { c.AppEngine = &AppEngineTarget{RelativeURI: "/orders"} }},
		{"no target", "ways to build the task", func(c *Config) { c.HTTP = nil }},
		{"a negative in-flight cap", "WriterOptions.MaxInFlightTasks", func(c *Config) { c.Writer.MaxInFlightTasks = -1 }},
		{"a negative backoff", "WriterOptions.RecoveryMaxBackoff", func(c *Config) { c.Writer.RecoveryMaxBackoff = -1 }},
		{"an unknown queue preflight", "WriterOptions.QueuePreflight", func(c *Config) { c.Writer.QueuePreflight = QueuePreflight(9) }},
		{"an unknown failure policy", "Config.OnFailure", func(c *Config) { c.OnFailure = FailurePolicy(9) }},
		{"an emulator address without a port", "Config.EmulatorEndpoint", func(c *Config) { c.EmulatorEndpoint = "localhost" }},
		{"a key file with an emulator", "Config.ServiceAccountKeyFile", func(c *Config) { c.ServiceAccountKeyFile = "/etc/key.json" }},
		{"a client endpoint with an emulator", "Config.Client.Endpoint", func(c *Config) { c.Client.Endpoint = "tasks.example.com:443" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var texts []string
			for _, d := range []DeliveryGuarantee{AtLeastOnce, ExactlyOnce} {
				cfg := workerConfig(d)
				c.bad(&cfg)
				_, err := compile(cfg, typeOf(eoOrder{}))
				require.Error(t, err, "TryWrite must refuse it too")
				want := withPrefix(err).Error()
				for name, setup := range setUps(uncheckedSpec(cfg), d) {
					err := setup()
					require.Error(t, err, "%s accepted a spec with %s", name, c.name)
					assert.Equal(t, want, err.Error(), name)
					assert.Contains(t, err.Error(), c.field, name)
					texts = append(texts, err.Error())
				}
			}
			for _, text := range texts[1:] {
				assert.Equal(t, texts[0], text, "every DoFn, in both modes, refuses it alike")
			}
		})
	}
}

// TestEveryDoFnRefusesASpecOfTheOtherModeOrWithoutItsParts covers what only a worker can meet:
// no spec at all, a spec of the other delivery mode, a user function without its function.
func TestEveryDoFnRefusesASpecOfTheOtherModeOrWithoutItsParts(t *testing.T) {
	all := func(spec *sinkSpec) map[string]func() error {
		return map[string]func() error{"writeFn": (&writeFn{Spec: spec}).Setup, "stageFn": (&stageFn{Spec: spec}).Setup,
			"stagedCreateFn": (&stagedCreateFn{Spec: spec}).Setup}
	}
	for name, setup := range all(nil) {
		err := setup()
		require.Error(t, err, name)
		assert.Equal(t, "cloudtasksio: the DoFn carries no sink spec: its serialized form lost it", err.Error(), name)
	}

	withoutFn := uncheckedSpec(workerConfig(AtLeastOnce))
	withoutFn.TaskIDFn = &beam.EncodedFunc{}
	for name, setup := range all(withoutFn) {
		err := setup()
		require.Error(t, err, name)
		assert.Equal(t, "cloudtasksio: the sink spec has Config.TaskIDFn without its function", err.Error(), name)
	}

	for name, setup := range setUps(uncheckedSpec(workerConfig(ExactlyOnce)), AtLeastOnce) {
		err := setup()
		require.Error(t, err, name)
		assert.Equal(t, "cloudtasksio: the sink spec says Config.Delivery ExactlyOnce, but this DoFn is a step of AtLeastOnce delivery", err.Error(), name)
	}
	for name, setup := range setUps(uncheckedSpec(workerConfig(AtLeastOnce)), ExactlyOnce) {
		err := setup()
		require.Error(t, err, name)
		assert.Equal(t, "cloudtasksio: the sink spec says Config.Delivery AtLeastOnce, but this DoFn is a step of ExactlyOnce delivery", err.Error(), name)
	}

	staged := uncheckedSpec(workerConfig(AtLeastOnce))
	defaults := DefaultStagedOptions()
	staged.Staged = &defaults
	err := (&writeFn{Spec: staged}).Setup()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Config.Staged is set but Config.Delivery is not ExactlyOnce")
}

// TestAWorkerSpecFromCompileIsAcceptedAndNotRewritten: the check passes every spec compile
// makes, and leaves it as it is (DoFns sharing one spec may set up at once).
func TestAWorkerSpecFromCompileIsAcceptedAndNotRewritten(t *testing.T) {
	for _, d := range []DeliveryGuarantee{AtLeastOnce, ExactlyOnce} {
		cfg := workerConfig(d)
		cfg.Client.Telemetry = TelemetryOn
		spec, err := compile(cfg, typeOf(eoOrder{}))
		require.NoError(t, err)
		before := *spec
		for name, setup := range setUps(spec, d) {
			require.NoError(t, setup(), name)
		}
		assert.Equal(t, before, *spec, "%v", d)
	}
	// An unresolved writer option (0: the default) is resolved for the engine.
	spec := uncheckedSpec(workerConfig(AtLeastOnce))
	require.Zero(t, spec.Writer.MaxInFlightTasks)
	require.NoError(t, (&writeFn{Spec: spec}).Setup())
	assert.Equal(t, DefaultWriterOptions().MaxInFlightTasks, spec.Writer.MaxInFlightTasks)
}
