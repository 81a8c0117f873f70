package engines

// Beam YAML pipelines (python -m apache_beam.yaml.main) that write through the expansion
// service with a remote provider: examples/xlang/yaml/orders.yaml, whose failed order goes to
// the error_handling output and a JSON file, and a pipeline without error_handling. YAML finds
// the transform by discovery and sends its configuration in the discovered schema.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
)

// runYAML runs a Beam YAML pipeline with the Jinja variables of the case's queue and service.
func runYAML(t *testing.T, python, file string, vars map[string]string) {
	t.Helper()
	b, err := json.Marshal(vars)
	require.NoError(t, err)
	runProcess(t, nil, python, "-m", "apache_beam.yaml.main", "--yaml_pipeline_file="+file, "--jinja_variables="+string(b))
}

// yamlVars are the variables of both YAML pipelines.
func yamlVars(ct *cloudTasks, service string) map[string]string {
	return map[string]string{"expansion_service": service, "project": ct.Queue.Project, "location": ct.Queue.Location,
		"queue": ct.Queue.Name, "url": "http://127.0.0.1:9/orders", "emulator_endpoint": ct.Addr}
}

func TestXlangYAMLWithErrorHandling(t *testing.T) {
	python := requireEnv(t, pythonEnv, "the python of a virtual environment with apache-beam[yaml] and beam_cloudtasks")
	service := requireEnv(t, xlangServiceEnv, "the host:port of a running cloudtasks-expansion-service")
	ct := newCloudTasks(t, cloudtaskstest.WithoutDispatch())
	vars := yamlVars(ct, service)
	vars["errors"] = filepath.Join(t.TempDir(), "errors")
	example, err := filepath.Abs("../../examples/xlang/yaml/orders.yaml")
	require.NoError(t, err)
	runYAML(t, python, example, vars)

	tasks := ct.Tasks(ct.Queue.Path())
	require.Len(t, tasks, 3, "the three orders with an id")
	for _, id := range []string{"order-0001", "order-0002", "order-0004"} {
		task, ok := ct.Task(ct.Queue.Path() + "/tasks/" + cloudtasksio.TaskID(id))
		if assert.True(t, ok, "order %s is a task named after its id", id) {
			assert.Contains(t, string(task.GetHttpRequest().GetBody()), `"id":"`+id+`"`)
			assert.Equal(t, "beam-yaml", task.GetHttpRequest().GetHeaders()["X-Source"])
		}
	}
	// WriteToJson writes DIR/errors-00000-of-00001, one error row a line.
	files, err := filepath.Glob(vars["errors"] + "*")
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 1, "the order without an id is the one error row")
	var row map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &row))
	assert.Equal(t, cloudtasksio.CodeTaskID, row["code"])
	assert.Equal(t, ct.Queue.Path(), row["destination"])
	assert.Contains(t, row["msg"], "task_id_field is null or empty")
	assert.Contains(t, lines[0], "no id: this one fails with code TASK_ID", "the error row carries the element")
}

func TestXlangYAMLWithoutErrorHandling(t *testing.T) {
	python := requireEnv(t, pythonEnv, "the python of a virtual environment with apache-beam[yaml] and beam_cloudtasks")
	service := requireEnv(t, xlangServiceEnv, "the host:port of a running cloudtasks-expansion-service")
	ct := newCloudTasks(t, cloudtaskstest.WithoutDispatch())
	runYAML(t, python, filepath.Join(testdataXlang(t), "orders_without_error_handling.yaml"), yamlVars(ct, service))
	tasks := ct.Tasks(ct.Queue.Path())
	require.Len(t, tasks, 3)
	for _, id := range []string{"yaml-0001", "yaml-0002", "yaml-0003"} {
		_, ok := ct.Task(ct.Queue.Path() + "/tasks/" + cloudtasksio.TaskID(id))
		assert.True(t, ok, "order %s is a task named after its id", id)
	}
}
