package xlang

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPythonPipelineOptionsReachTheGoHarness: testdata/python-pipeline-options.json holds
// options as Python's FnApiRunner provides them to a worker (apache-beam 2.77.0; it writes
// integers such as beam:option:parallelism:v1 as strings). Beam's Go harness unmarshals them
// into runtime.RawOptionsWrapper and exits when that fails ("cannot unmarshal string into Go
// struct field RawOptionsWrapper.beam:option:parallelism:v1 of type int"): every Go worker of a
// Python pipeline died at start until PrepareWorker rewrote them.
func TestPythonPipelineOptionsReachTheGoHarness(t *testing.T) {
	raw, err := os.ReadFile("testdata/python-pipeline-options.json")
	require.NoError(t, err)
	var w runtime.RawOptionsWrapper
	require.Error(t, json.Unmarshal(raw, &w), "the recorded options no longer break the harness: is the workaround still needed?")

	fixed, err := readableOptions(raw)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(fixed, &w), "the harness reads the rewritten options")
	assert.Equal(t, -1, w.Parallelism)

	var before, after map[string]any
	require.NoError(t, json.Unmarshal(raw, &before))
	require.NoError(t, json.Unmarshal(fixed, &after))
	delete(before, "beam:option:parallelism:v1")
	delete(after, "beam:option:parallelism:v1")
	assert.Equal(t, before, after, "every other option is kept as it is")
}

func TestAnOptionThatCannotBeConvertedIsDropped(t *testing.T) {
	fixed, err := readableOptions([]byte(`{"beam:option:parallelism:v1":"many","beam:option:retain_docker_containers:v1":"true","beam:option:experiments:v1":"a,b","x":1}`))
	require.NoError(t, err)
	var w runtime.RawOptionsWrapper
	require.NoError(t, json.Unmarshal(fixed, &w))
	assert.True(t, w.RetainDocker)
	assert.JSONEq(t, `{"beam:option:retain_docker_containers:v1":true,"x":1}`, string(fixed))

	_, err = readableOptions([]byte(`[1]`))
	assert.Error(t, err)
}
