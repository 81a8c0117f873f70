package cloudtasksio

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"
	"time"

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

// fullWriter sets every WriterOptions field to a valid value other than its default; with
// emulator it leaves out ChannelPoolSize, which an emulator refuses.
func fullWriter(emulator bool) WriterOptions {
	w := WriterOptions{MaxInFlightTasks: 7, ChannelPoolSize: 3, RecoveryInitialBackoff: time.Millisecond, RecoveryMaxBackoff: time.Second,
		RecoveryMaxAttempts: 4, NotFoundRecoveryInitialBackoff: 2 * time.Millisecond, NotFoundRecoveryMaxBackoff: 3 * time.Second,
		NotFoundRecoveryMaxAttempts: 5, AttemptTimeout: 9 * time.Second, PerDestinationMetrics: true, QueuePreflight: PreflightFail,
		AdaptiveConcurrency: AdaptiveConcurrencyOn, AdaptiveStartRate: 12.5, QueueHealthInterval: time.Minute}
	if emulator {
		w.ChannelPoolSize = 0
	}
	return w
}

// specCase is a Config and an element type it compiles for.
type specCase struct {
	cfg  Config
	elem any
}

// specMappingConfigs are valid Configs that together set every field below Config, each to a
// value no default replaces: the rules make some fields exclusive (one destination, one way to
// build the task, OIDC or OAuth, an emulator or client settings), so no single Config can. The
// user functions are ones other tests register.
func specMappingConfigs() map[string]specCase {
	queue := Queue{Project: "p", Location: "l", Name: "q"}
	return map[string]specCase{
		"HTTP, queue function, task ids, isolation, client settings": {elem: urlOrder{}, cfg: Config{
			QueueFn: queueWithASlash, TaskIDFn: longKeyError,
			HTTP: &HTTPTarget{URL: "https://example.com/orders", Method: "PUT", Headers: map[string]string{"X-Trace": "1"},
				OIDC: &OIDCToken{ServiceAccountEmail: "sa@p.iam.gserviceaccount.com", Audience: "https://example.com"},
				Body: formats.CSV().With(formats.OptionCSVNullLiteral, "-"), DispatchDeadline: time.Minute},
			OnFailure: DeadLetter, OnDestinationFailure: DestinationIsolate, Writer: fullWriter(false),
			ServiceAccountKeyFile: "/keys/sa.json",
			Client: ClientOptions{Endpoint: "tasks.example.com:443", QuotaProject: "quota", ImpersonateServiceAccount: "i@p.iam.gserviceaccount.com",
				ImpersonateDelegates: []string{"d@p.iam.gserviceaccount.com"}, UniverseDomain: "example.com", Telemetry: TelemetryOn},
		}},
		"App Engine, exactly once, emulator": {elem: eoPlainOrder{}, cfg: Config{
			Queue: queue, Delivery: ExactlyOnce,
			AppEngine: &AppEngineTarget{RelativeURI: "/orders", Method: "PUT", Headers: map[string]string{"X-Trace": "1"},
				Routing: &AppEngineRouting{Service: "s", Version: "v", Instance: "i"}, Body: formats.CSV().With(formats.OptionCSVFieldDelimiter, ";"), DispatchDeadline: time.Hour},
			Staged: &StagedOptions{NameRetention: 2 * time.Hour, ClockSkewAllowance: time.Minute, RequestTimeout: 5 * time.Second,
				VerifyQueueRetention: true, ExpiredEnvelopePolicy: ExpiredDrop},
			Writer: func() WriterOptions { w := fullWriter(true); w.AttemptTimeout = 0; return w }(), EmulatorEndpoint: "127.0.0.1:1",
			Client: ClientOptions{Telemetry: TelemetryOff},
		}},
		"serializer": {elem: eoPlainOrder{}, cfg: Config{Queue: queue, Serializer: serializeOrSkip, OnFailure: LogAndDrop}},
		"HTTP with OAuth": {elem: eoPlainOrder{}, cfg: Config{Queue: queue, HTTP: &HTTPTarget{URL: "https://tasks.googleapis.com/",
			OAuth: &OAuthToken{ServiceAccountEmail: "sa@p.iam.gserviceaccount.com", Scope: "https://www.googleapis.com/auth/cloud-platform"}}}},
	}
}

// TestSpecCarriesEveryConfigField compiles Configs that together set every field below Config,
// ships each spec as Beam ships a DoFn (JSON), and checks that the worker's Config is the one
// compiled: a field the spec loses fails here, not on a worker. A Config field the cases leave
// unset fails too, so a new field needs a value here before it is checked.
func TestSpecCarriesEveryConfigField(t *testing.T) {
	cases := specMappingConfigs()
	var all []reflect.Value
	for _, c := range cases {
		all = append(all, reflect.ValueOf(c.cfg))
	}
	for _, path := range unsetFields(reflect.TypeFor[Config](), all, "Config") {
		t.Errorf("no case of specMappingConfigs sets %s: give it a value there, so that the spec is checked to carry it", path)
	}

	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := c.cfg
			spec, err := compile(cfg, reflect.TypeOf(c.elem))
			require.NoError(t, err)
			shipped, err := json.Marshal(spec)
			require.NoError(t, err)
			var worker sinkSpec
			require.NoError(t, json.Unmarshal(shipped, &worker))
			require.NoError(t, worker.checkOnWorker(cfg.Delivery))
			// The worker's writer options have their defaults filled in.
			resolved := cfg
			resolved.Writer, err = cfg.Writer.resolve()
			require.NoError(t, err)
			got, want := reflect.ValueOf(worker.config()), reflect.ValueOf(resolved)
			for i := range want.NumField() {
				field := want.Type().Field(i).Name
				w, g := want.Field(i).Interface(), got.Field(i).Interface()
				if want.Field(i).Kind() == reflect.Interface && w != nil {
					// A user function comes back encoded.
					enc, ok := g.(*beam.EncodedFunc)
					if assert.True(t, ok, "Config.%s comes back as %T", field, g) {
						assert.Equal(t, runtime.FuncForPC(reflect.ValueOf(w).Pointer()).Name(), enc.Fn.Name(), "Config.%s", field)
					}
					continue
				}
				assert.Equal(t, w, g, "Config.%s does not reach the worker as it was set", field)
			}
		})
	}
}

// unsetFields returns the paths of the fields of struct type t, and of the structs below them,
// that are zero in every one of values.
func unsetFields(t reflect.Type, values []reflect.Value, path string) []string {
	var unset []string
	for i := range t.NumField() {
		f := t.Field(i)
		var below []reflect.Value
		set := false
		for _, v := range values {
			fv := v.Field(i)
			set = set || !fv.IsZero()
			if fv.Kind() == reflect.Pointer && !fv.IsNil() {
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				below = append(below, fv)
			}
		}
		p := path + "." + f.Name
		if !set {
			unset = append(unset, p)
			continue
		}
		if len(below) > 0 {
			unset = append(unset, unsetFields(below[0].Type(), below, p)...)
		}
	}
	return unset
}
