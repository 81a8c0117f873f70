package xlang

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// testPool is the worker pool address the tests' EXTERNAL environment names; nothing listens
// there, the tests only expand.
const testPool = "127.0.0.1:9"

var (
	serviceOnce sync.Once
	service     *Service
	serviceErr  error
)

// testService is a Service whose worker binary is this test binary (hashed once).
func testService(t *testing.T) *Service {
	t.Helper()
	serviceOnce.Do(func() {
		bin, err := os.Executable()
		if err != nil {
			serviceErr = err
			return
		}
		service, serviceErr = NewService(Options{EnvironmentConfig: testPool, WorkerBinary: bin})
	})
	require.NoError(t, serviceErr)
	return service
}

// expand expands req and requires success.
func expand(t *testing.T, r *request) *jobpb.ExpansionResponse {
	t.Helper()
	resp, err := testService(t).Expand(context.Background(), r.req)
	require.NoError(t, err)
	require.Empty(t, resp.GetError())
	return resp
}

// expandError expands req and returns the error the response carries.
func expandError(t *testing.T, r *request) string {
	t.Helper()
	resp, err := testService(t).Expand(context.Background(), r.req)
	require.NoError(t, err, "a bad request is answered in the response's error")
	require.NotEmpty(t, resp.GetError(), "the request was expected to be refused")
	assert.True(t, strings.HasPrefix(resp.GetError(), "cloudtasksio/xlang: "+Identifier+": "), "the error says who refuses what: %s", resp.GetError())
	return resp.GetError()
}

func TestTheExpansionReadsTheCallersInputAndKeepsToItsNamespace(t *testing.T) {
	r := newRequest(t, rowCoder(t, orderSchema()), with(baseConfig(), "task_id_field", "id"))
	resp := expand(t, r)
	c, tr := resp.GetComponents(), resp.GetTransform()
	input := "ref_PCollection_PCollection_1"

	assert.Equal(t, "WriteToCloudTasks", tr.GetUniqueName())
	assert.Equal(t, map[string]string{"input": input}, tr.GetInputs())
	require.Len(t, tr.GetOutputs(), 1)
	errorsID := tr.GetOutputs()[defaultErrorOutput]
	require.NotNil(t, c.GetPcollections()[errorsID], "the errors output is among the components")
	assert.Equal(t, urnSchemaTransform, tr.GetSpec().GetUrn(), "the composite keeps the request's spec")

	produced := map[string]bool{}
	for id, t2 := range c.GetTransforms() {
		assert.True(t, strings.HasPrefix(id, "external_1"), "transform id %s is in the namespace", id)
		assert.True(t, strings.HasPrefix(t2.GetUniqueName(), "WriteToCloudTasks/"), "unique name %q is under the caller's name", t2.GetUniqueName())
		assert.NotEqual(t, "beam:transform:impulse:v1", t2.GetSpec().GetUrn(), "the placeholder's Impulse is cut off")
		for _, out := range t2.GetOutputs() {
			produced[out] = true
		}
		for _, in := range t2.GetInputs() {
			assert.True(t, in == input || c.GetPcollections()[in] != nil, "transform %s reads %s, which is neither the input nor a component", id, in)
		}
	}
	for id, pc := range c.GetPcollections() {
		assert.True(t, strings.HasPrefix(id, "external_1"), "PCollection id %s is in the namespace", id)
		assert.True(t, produced[id], "PCollection %s has a producer among the components", id)
		assert.NotNil(t, c.GetCoders()[pc.GetCoderId()], "the coder of %s", id)
		assert.NotNil(t, c.GetWindowingStrategies()[pc.GetWindowingStrategyId()], "the windowing of %s", id)
	}
	for id := range c.GetCoders() {
		assert.True(t, strings.HasPrefix(id, "external_1"), "coder id %s", id)
	}
	for id := range c.GetWindowingStrategies() {
		assert.True(t, strings.HasPrefix(id, "external_1"), "windowing strategy id %s", id)
	}
	for _, sub := range tr.GetSubtransforms() {
		assert.NotNil(t, c.GetTransforms()[sub], "subtransform %s", sub)
	}
	reads := false
	for _, t2 := range c.GetTransforms() {
		for _, in := range t2.GetInputs() {
			reads = reads || in == input
		}
	}
	assert.True(t, reads, "a step reads the caller's input:\n%s", describe(c.GetTransforms()))
}

func TestTheGoStepsRunInAnExternalEnvironmentThatStagesTheWorkerBinary(t *testing.T) {
	resp := expand(t, newRequest(t, rowCoder(t, orderSchema()), baseConfig()))
	envs := resp.GetComponents().GetEnvironments()
	require.Len(t, envs, 1)
	for id, env := range envs {
		assert.True(t, strings.HasPrefix(id, "external_1"))
		assert.Equal(t, graphx.URNEnvExternal, env.GetUrn())
		var payload pipepb.ExternalPayload
		require.NoError(t, proto.Unmarshal(env.GetPayload(), &payload))
		assert.Equal(t, testPool, payload.GetEndpoint().GetUrl())
		require.Len(t, env.GetDependencies(), 1)
		dep := env.GetDependencies()[0]
		assert.Equal(t, graphx.URNArtifactGoWorkerRole, dep.GetRoleUrn())
		var file pipepb.ArtifactFilePayload
		require.NoError(t, proto.Unmarshal(dep.GetTypePayload(), &file))
		assert.Equal(t, testService(t).worker.Path, file.GetPath())
		assert.Len(t, file.GetSha256(), 64)
		assert.Contains(t, env.GetCapabilities(), graphx.URNBaseVersionGo)
		var parDos int
		for _, tr := range resp.GetComponents().GetTransforms() {
			if tr.GetSpec().GetUrn() == "beam:transform:pardo:v1" {
				assert.Equal(t, id, tr.GetEnvironmentId(), "%s runs in the Go environment", tr.GetUniqueName())
				parDos++
			}
		}
		assert.GreaterOrEqual(t, parDos, 3, "the task step, the sink's DoFn and the error rows")
	}
}

func TestTheErrorOutputIsNamedByErrorHandling(t *testing.T) {
	for name, config := range map[string]map[string]any{
		"a map, as Python's implicit schema sends a dict": with(baseConfig(), "error_handling", map[string]string{"output": "bad"}),
	} {
		t.Run(name, func(t *testing.T) {
			resp := expand(t, newRequest(t, rowCoder(t, orderSchema()), config))
			out := resp.GetTransform().GetOutputs()
			require.Contains(t, out, "bad")
			assert.Len(t, out, 1)
		})
	}
}

func TestBytesAndWindowedAndUnboundedInputsAreRead(t *testing.T) {
	r := newRequest(t, bytesCoder(), baseConfig())
	r.req.Components.WindowingStrategies["ref_Windowing_Windowing_1"].WindowFn = &pipepb.FunctionSpec{Urn: "beam:window_fn:fixed_windows:v1"}
	r.req.Components.Pcollections["ref_PCollection_PCollection_1"].IsBounded = pipepb.IsBounded_UNBOUNDED
	resp := expand(t, r)
	windowInto := false
	for _, tr := range resp.GetComponents().GetTransforms() {
		windowInto = windowInto || tr.GetSpec().GetUrn() == "beam:transform:window_into:v1"
	}
	assert.True(t, windowInto, "a windowed input is put in the global window first, where the sink's failures land:\n%s", describe(resp.GetComponents().GetTransforms()))
	for id, pc := range resp.GetComponents().GetPcollections() {
		assert.Equal(t, pipepb.IsBounded_UNBOUNDED, pc.GetIsBounded(), "%s is unbounded like its input", id)
	}
}

func TestAnAppEngineTargetTakesItsRelativeURIFromURLField(t *testing.T) {
	r := newRequest(t, rowCoder(t, orderSchema()), with(baseConfig(), "http_url", nil, "target_type", "app-engine",
		"app_engine_relative_uri", "/orders", "url_field", "url", "app_engine_headers", map[string]string{"X-A": "1"}))
	resp := expand(t, r)
	assert.Contains(t, resp.GetTransform().GetOutputs(), defaultErrorOutput)

	msg := expandError(t, newRequest(t, rowCoder(t, orderSchema()), with(baseConfig(), "target_type", "app-engine")))
	assert.Contains(t, msg, `field http_url (option "http.url"): belongs to target.type http, but target.type is app-engine`)
}

func TestExpansionsWithoutANamespaceGetIdsOfTheirOwn(t *testing.T) {
	ids := func() map[string]bool {
		r := newRequest(t, rowCoder(t, orderSchema()), baseConfig())
		r.req.Namespace = ""
		out := map[string]bool{}
		for id := range expand(t, r).GetComponents().GetTransforms() {
			out[id] = true
		}
		return out
	}
	first, second := ids(), ids()
	for id := range first {
		assert.False(t, second[id], "transform id %s is in both expansions", id)
	}
}

func TestExactlyOnceExpandsWithItsReshuffle(t *testing.T) {
	resp := expand(t, newRequest(t, rowCoder(t, orderSchema()), with(baseConfig(), "sink_delivery_guarantee", "exactly-once",
		"task_id_field", "id", "sink_staged_name_retention", "2h")))
	reshuffle := false
	for _, tr := range resp.GetComponents().GetTransforms() {
		reshuffle = reshuffle || tr.GetSpec().GetUrn() == "beam:transform:reshuffle:v1"
	}
	assert.True(t, reshuffle, "exactly-once's stage and create steps are separated by a Reshuffle:\n%s", describe(resp.GetComponents().GetTransforms()))

	msg := expandError(t, newRequest(t, rowCoder(t, orderSchema()), with(baseConfig(), "sink_delivery_guarantee", "exactly-once",
		"error_handling", map[string]string{"output": "errors"})))
	assert.Contains(t, msg, "field sink_delivery_guarantee is exactly-once, where every failure fails the bundle, but on_failure is dead_letter")
}

func TestThePlainExternalPayloadIsExpandedToo(t *testing.T) {
	r := newRequest(t, rowCoder(t, orderSchema()), nil)
	s, row := configRow(t, with(baseConfig(), "error_handling", map[string]string{"output": "errs"}))
	payload, err := proto.Marshal(&pipepb.ExternalConfigurationPayload{Schema: s, Payload: row})
	require.NoError(t, err)
	r.req.Transform.Spec = &pipepb.FunctionSpec{Urn: Identifier, Payload: payload}
	resp := expand(t, r)
	assert.Contains(t, resp.GetTransform().GetOutputs(), "errs")
}

func TestBadRequestsAreRefusedWithAClearError(t *testing.T) {
	rows := rowCoder(t, orderSchema())
	cases := []struct {
		name   string
		req    *request
		says   []string
		hidden []string // never in the error
	}{
		{name: "an unknown field names the closest known one", req: newRequest(t, rows, with(baseConfig(), "http_ur", "https://example.com")),
			says: []string{`unknown configuration field "http_ur"`, `closest known field is http_url`}},
		{name: "an option key written with dots", req: newRequest(t, rows, with(baseConfig(), "sink.in-flight.max-tasks", int64(5))),
			says: []string{`"sink.in-flight.max-tasks"`, "sink_in_flight_max_tasks"}},
		{name: "a wrong type", req: newRequest(t, rows, with(baseConfig(), "sink_in_flight_max_tasks", "500")),
			says: []string{"field sink_in_flight_max_tasks must be an integer; it was sent as STRING"}},
		{name: "a string for a map", req: newRequest(t, rows, with(baseConfig(), "http_headers", "Authorization: Bearer SECRET")),
			says: []string{"field http_headers must be a map of strings to strings"}, hidden: []string{"SECRET"}},
		{name: "a missing required field", req: newRequest(t, rows, with(baseConfig(), "project", nil)),
			says: []string{`field project (option "project"): is required`}},
		{name: "a bad option value names the field and the key", req: newRequest(t, rows, with(baseConfig(), "sink_in_flight_max_tasks", int64(0))),
			says: []string{`field sink_in_flight_max_tasks (option "sink.in-flight.max-tasks")`, "below 1"}},
		{name: "a header value is never repeated", req: newRequest(t, rows, with(baseConfig(), "http_url", nil, "url_field", "nope",
			"http_headers", map[string]string{"Authorization": "Bearer SECRET"})),
			says: []string{"url_field names \"nope\", which the input rows do not have", "id, amount, url, at"}, hidden: []string{"SECRET"}},
		{name: "an input neither rows nor bytes", req: newRequest(t, &pipepb.Coder{Spec: &pipepb.FunctionSpec{Urn: "beam:coder:string_utf8:v1"}}, baseConfig()),
			says: []string{"neither rows nor bytes", "beam:coder:string_utf8:v1"}},
		{name: "a task id field missing from the schema", req: newRequest(t, rows, with(baseConfig(), "task_id_field", "key")),
			says: []string{`task_id_field names "key", which the input rows do not have`}},
		{name: "a task id field of a type it cannot read", req: newRequest(t, rows, with(baseConfig(), "schedule_time_field", "id", "task_id_field", "id", "url_field", "amount")),
			says: []string{`url_field names "amount", which holds INT64; it must hold a string`}},
		{name: "a metadata field on bytes", req: newRequest(t, bytesCoder(), with(baseConfig(), "task_id_field", "id")),
			says: []string{"task_id_field names an input field, but the input is bytes"}},
		{name: "a row format on bytes", req: newRequest(t, bytesCoder(), with(baseConfig(), "format", "csv")),
			says: []string{`field format is "csv", which encodes rows, but the input is bytes`}},
		{name: "dead letters without an output", req: newRequest(t, rows, with(baseConfig(), "on_failure", "dead_letter")),
			says: []string{"on_failure is dead_letter, which needs error_handling"}},
		{name: "error handling with a failure policy that contradicts it", req: newRequest(t, rows, with(baseConfig(), "on_failure", "fail",
			"error_handling", map[string]string{"output": "errs"})), says: []string{"on_failure is fail, but error_handling sends failed elements"}},
		{name: "an unknown failure policy", req: newRequest(t, rows, with(baseConfig(), "on_failure", "retry")),
			says: []string{`on_failure: value "retry" is not accepted; accepted: fail, log_and_drop, dead_letter`}},
		{name: "no URL", req: newRequest(t, rows, with(baseConfig(), "http_url", nil)), says: []string{"field http_url is required unless url_field"}},
		{name: "a field type the Go SDK cannot read", req: newRequest(t, rowCoder(t, &pipepb.Schema{Fields: []*pipepb.Field{
			{Name: "id", Type: atomicType(pipepb.AtomicType_STRING, false)},
			{Name: "at", Type: &pipepb.FieldType{TypeInfo: &pipepb.FieldType_LogicalType{LogicalType: &pipepb.LogicalType{
				Urn: "beam:logical_type:python_callable:v1", Representation: atomicType(pipepb.AtomicType_STRING, false)}}}}}}), baseConfig()),
			says: []string{`input field "at" holds logical type "beam:logical_type:python_callable:v1", which Beam's Go SDK cannot read`}},
		{name: "a field name the Go SDK cannot read", req: newRequest(t, rowCoder(t, &pipepb.Schema{Fields: []*pipepb.Field{
			{Name: "order-id", Type: atomicType(pipepb.AtomicType_STRING, false)}}}), baseConfig()),
			says: []string{`input field "order-id"`, "rename it"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := expandError(t, c.req)
			for _, s := range c.says {
				assert.Contains(t, msg, s)
			}
			for _, s := range c.hidden {
				assert.NotContains(t, msg, s)
			}
		})
	}
}

func TestACallerOfAnotherBeamReleaseIsRefused(t *testing.T) {
	r := newRequest(t, rowCoder(t, orderSchema()), baseConfig())
	r.req.Components.Environments["java"] = &pipepb.Environment{Urn: "beam:env:docker:v1",
		Capabilities: []string{"beam:coder:bytes:v1", sdkBaseVersion + "apache/beam_java11_sdk:2.60.0"}}
	msg := expandError(t, r)
	assert.Contains(t, msg, `of Beam "2.60.0"; this expansion service serves Beam `+MinBeamVersion+" to 2.77.x")

	r.req.Components.Environments["java"].Capabilities = []string{sdkBaseVersion + "apache/beam_java17_sdk:2.73.0"}
	expand(t, r)
}

func TestAnotherTransformIsRefused(t *testing.T) {
	r := newRequest(t, rowCoder(t, orderSchema()), baseConfig())
	r.req.Transform.Spec.Urn = "beam:transform:org.apache.beam:kafka_write:v1"
	assert.Contains(t, expandError(t, r), `not the URN "beam:transform:org.apache.beam:kafka_write:v1"`)
}

func TestDiscoveryListsEveryFieldWithTypeAndDescription(t *testing.T) {
	resp, err := testService(t).DiscoverSchemaTransform(context.Background(), &jobpb.DiscoverSchemaTransformRequest{})
	require.NoError(t, err)
	cfg := resp.GetSchemaTransformConfigs()[Identifier]
	require.NotNil(t, cfg)
	assert.Equal(t, []string{"input"}, cfg.GetInputPcollectionNames())
	byName := map[string]*pipepb.Field{}
	for _, f := range cfg.GetConfigSchema().GetFields() {
		byName[f.GetName()] = f
		assert.NotEmpty(t, f.GetDescription(), f.GetName())
		assert.NotContains(t, f.GetDescription(), "\n", "one line: %s", f.GetName())
		assert.True(t, f.GetType().GetNullable(), "every field may be left out: %s", f.GetName())
	}
	for name, want := range map[string]string{
		"project": "STRING", "http_url": "STRING", "sink_in_flight_max_tasks": "INT64", "sink_metrics_per_destination": "BOOLEAN",
		"sink_in_flight_adaptive_start_rate": "DOUBLE", "http_headers": "MAP<STRING, STRING>", "app_engine_headers": "MAP<STRING, STRING>",
		"csv_field_delimiter": "STRING", "avro_schema": "STRING", "task_id_field": "STRING", "url_field": "STRING",
		"schedule_time_field": "STRING", "on_failure": "STRING", "error_handling": `ROW("output")`, "emulator_endpoint": "STRING",
		"target_type": "STRING", "format": "STRING",
	} {
		if assert.Contains(t, byName, name) {
			assert.Equal(t, want, typeName(byName[name].GetType()), name)
		}
	}
	assert.Contains(t, byName["sink_in_flight_max_tasks"].GetDescription(), "WriterOptions.MaxInFlightTasks")
	assert.Contains(t, byName["sink_in_flight_max_tasks"].GetDescription(), "accepted: a decimal integer of at least 1")
}
