package pubsubdl

import (
	"go/ast"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundary/boundarytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNoHandWrittenPackagePrefixOutsideTheBoundary keeps the package prefix in boundary.go.
// Every log line goes through the boundary's helpers: only boundary.go imports Beam's log.
func TestNoHandWrittenPackagePrefixOutsideTheBoundary(t *testing.T) {
	src := boundarytest.Parse(t, 9)
	src.NoHandWrittenPrefix(t, string(pkgPrefix), true)
	var logs []string
	for name, f := range src.Files {
		for _, imp := range f.Imports {
			if imp.Path.Value == `"github.com/apache/beam/sdks/v2/go/pkg/beam/log"` && name != boundarytest.BoundaryFile {
				logs = append(logs, name)
			}
		}
	}
	assert.Empty(t, logs, "these files log without the boundary's helpers (infof)")
}

// TestErrorsCrossTheBoundaryOnlyThroughIt checks the code's shape: every exported function or
// method returning an error (the DoFn methods Beam calls included) ends each return statement
// in nil or withPrefix(...); the Error method of an exported error type returns
// prefixText(...); and every panic but ToPubSub's (TryToPubSub's error) panics with
// prefixText(...).
func TestErrorsCrossTheBoundaryOnlyThroughIt(t *testing.T) {
	src := boundarytest.Parse(t, 9)
	checked := src.ExportedReturnThroughTheBoundary(t, nil)
	for _, name := range []string{"TryToPubSub", "FromMessage", "ConfigError.Error",
		"publishFn.StartBundle", "publishFn.ProcessElement", "publishFn.FinishBundle"} {
		assert.True(t, checked[name], "%s was not found: the check saw no such function", name)
	}
	for _, f := range src.Files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || boundarytest.FuncName(fn) == "ToPubSub" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && boundarytest.IsCallOf(call, "panic") {
					assert.True(t, len(call.Args) == 1 && boundarytest.IsCallOf(call.Args[0], "prefixText"),
						"%s: %s panics without prefixText", src.Pos(call), boundarytest.FuncName(fn))
				}
				return true
			})
		}
	}
}

// assertPrefixedOnce checks that err starts with the package prefix and carries it once.
func assertPrefixedOnce(t *testing.T, err error, what string) {
	t.Helper()
	boundarytest.PrefixedOnce(t, err, string(pkgPrefix), what)
}

// TestErrorsLeaveWithThePrefixOnce drives each way out of the package into a failure (the
// configuration, the input, a message that cannot be read, a missing topic, a refused publish)
// and checks the error a caller or Beam gets: the prefix once, at its start, with what errors.As
// and status.Code need still reachable.
func TestErrorsLeaveWithThePrefixOnce(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	failed := beam.Create(s, numbered(1)[0])
	for _, cfg := range []PubSubConfig{
		{Topic: "dead-letters"},
		{Topic: testTopic, FlushTimeout: -time.Second},
		{Topic: testTopic, EmulatorEndpoint: "no port"},
		{Topic: testTopic, Client: ClientOptions{Telemetry: 7}},
	} {
		err := TryToPubSub(s, cfg, failed)
		assertPrefixedOnce(t, err, "TryToPubSub of a bad configuration")
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assertPrefixedOnce(t, ce, "the *ConfigError itself")
	}
	assertPrefixedOnce(t, TryToPubSub(s, PubSubConfig{Topic: testTopic}, beam.PCollection{}), "TryToPubSub of an invalid input")
	assertPrefixedOnce(t, TryToPubSub(s, PubSubConfig{Topic: testTopic}, beam.Create(s, 1)), "TryToPubSub of another element type")

	for what, msg := range map[string]*pubsub.Message{
		"nil":                    nil,
		"an unknown encoding":    {Attributes: map[string]string{AttrEncoding: "xml"}},
		"a broken envelope":      {Data: []byte{0xff}, Attributes: map[string]string{AttrEncoding: EncodingEnvelopeV1}},
		"broken JSON":            {Data: []byte("{"), Attributes: map[string]string{AttrEncoding: EncodingJSONV1}},
		"a bad event time":       {Attributes: map[string]string{AttrEventTime: "yesterday"}},
		"a JSON field's type":    {Data: []byte(`{"code":5}`), Attributes: map[string]string{AttrEncoding: EncodingJSONV1}},
		"a JSON bad event time":  {Data: []byte(`{"event_time":"x"}`), Attributes: map[string]string{AttrEncoding: EncodingJSONV1}},
		"a JSON task not a task": {Data: []byte(`{"task":{"name":5}}`), Attributes: map[string]string{AttrEncoding: EncodingJSONV1}},
	} {
		_, _, err := FromMessage(msg)
		assertPrefixedOnce(t, err, "FromMessage of "+what)
	}

	srv := newPubSub(t, false)
	fn := &publishFn{Topic: testTopic, MaxInFlightMessages: 1, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
	assertPrefixedOnce(t, fn.StartBundle(t.Context()), "StartBundle with a missing topic")

	srv = newPubSub(t, true, pstest.WithErrorInjection("Publish", codes.PermissionDenied, "caller may not publish"))
	fn = &publishFn{Topic: testTopic, MaxInFlightMessages: 1, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
	require.NoError(t, fn.StartBundle(t.Context()))
	err := fn.ProcessElement(t.Context(), 0, numbered(1)[0])
	assertPrefixedOnce(t, err, "ProcessElement waiting for a refused publish")
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "the prefix keeps the status reachable")
	fn.MaxInFlightMessages = -1
	require.NoError(t, fn.StartBundle(t.Context()))
	require.NoError(t, fn.ProcessElement(t.Context(), 0, numbered(1)[0]))
	assertPrefixedOnce(t, fn.FinishBundle(t.Context()), "FinishBundle with a refused publish")
}
