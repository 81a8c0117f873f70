package cloudtasksio

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
)

// specOrder is the element type of the spec mapping test.
type specOrder struct {
	ID string `json:"id"`
}

func specQueue(specOrder) (Queue, error)             { return Queue{Project: "p", Location: "l", Name: "q"}, nil }
func specTask(specOrder) (*cloudtaskspb.Task, error) { return nil, nil }
func specKey(o specOrder) (string, error)            { return o.ID, nil }

func init() {
	register.Function1x2(specQueue)
	register.Function1x2(specTask)
	register.Function1x2(specKey)
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

// specMappingConfigs are valid Configs that together set every field below Config, each to a
// value no default replaces: the rules make some fields exclusive (one destination, one way to
// build the task, OIDC or OAuth, an emulator or client settings), so no single Config can.
func specMappingConfigs() map[string]Config {
	queue := Queue{Project: "p", Location: "l", Name: "q"}
	return map[string]Config{
		"HTTP, queue function, task ids, isolation, client settings": {
			QueueFn: specQueue, TaskIDFn: specKey,
			HTTP: &HTTPTarget{URL: "https://example.com/orders", Method: "PUT", Headers: map[string]string{"X-Trace": "1"},
				OIDC: &OIDCToken{ServiceAccountEmail: "sa@p.iam.gserviceaccount.com", Audience: "https://example.com"},
				Body: formats.CSV().With(formats.OptionCSVNullLiteral, "-"), DispatchDeadline: time.Minute},
			OnFailure: DeadLetter, OnDestinationFailure: DestinationIsolate, Writer: fullWriter(false),
			ServiceAccountKeyFile: "/keys/sa.json",
			Client: ClientOptions{Endpoint: "tasks.example.com:443", QuotaProject: "quota", ImpersonateServiceAccount: "i@p.iam.gserviceaccount.com",
				ImpersonateDelegates: []string{"d@p.iam.gserviceaccount.com"}, UniverseDomain: "example.com", Telemetry: TelemetryOn},
		},
		"App Engine, exactly once, emulator": {
			Queue: queue, Delivery: ExactlyOnce,
			AppEngine: &AppEngineTarget{RelativeURI: "/orders", Method: "PUT", Headers: map[string]string{"X-Trace": "1"},
				Routing: &AppEngineRouting{Service: "s", Version: "v", Instance: "i"}, Body: formats.CSV().With(formats.OptionCSVFieldDelimiter, ";"), DispatchDeadline: time.Hour},
			Staged: &StagedOptions{NameRetention: 2 * time.Hour, ClockSkewAllowance: time.Minute, RequestTimeout: 5 * time.Second,
				VerifyQueueRetention: true, ExpiredEnvelopePolicy: ExpiredDrop},
			Writer: func() WriterOptions { w := fullWriter(true); w.AttemptTimeout = 0; return w }(), EmulatorEndpoint: "127.0.0.1:1",
			Client: ClientOptions{Telemetry: TelemetryOff},
		},
		"serializer": {Queue: queue, Serializer: specTask, OnFailure: LogAndDrop},
		"HTTP with OAuth": {Queue: queue, HTTP: &HTTPTarget{URL: "https://tasks.googleapis.com/",
			OAuth: &OAuthToken{ServiceAccountEmail: "sa@p.iam.gserviceaccount.com", Scope: "https://www.googleapis.com/auth/cloud-platform"}}},
	}
}

// TestSpecCarriesEveryConfigField compiles Configs that together set every field below Config,
// ships each spec as Beam ships a DoFn (JSON), and checks that the worker's Config is the one
// compiled: a field the spec loses fails here, not on a worker. A Config field the cases leave
// unset fails too, so a new field needs a value here before it is checked.
func TestSpecCarriesEveryConfigField(t *testing.T) {
	cases := specMappingConfigs()
	var all []reflect.Value
	for _, cfg := range cases {
		all = append(all, reflect.ValueOf(cfg))
	}
	for _, path := range unsetFields(reflect.TypeFor[Config](), all, "Config") {
		t.Errorf("no case of specMappingConfigs sets %s: give it a value there, so that the spec is checked to carry it", path)
	}

	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			spec, err := compile(cfg, reflect.TypeFor[specOrder]())
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
						assert.Equal(t, reflectx.FunctionName(w), enc.Fn.Name(), "Config.%s", field)
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
		if ft := reflectx.SkipPtr(f.Type); ft.Kind() == reflect.Struct && len(below) > 0 {
			unset = append(unset, unsetFields(ft, below, p)...)
		}
	}
	return unset
}
