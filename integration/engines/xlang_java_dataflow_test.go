package engines

// Beam Java and Dataflow with the expansion service: a Java pipeline
// (examples/xlang/java/WriteToCloudTasks.java) expands the transform and is translated to
// Beam's portable form, which is all Java can do here: no Java portable runner can be fetched
// on the project's machines. And the Python job is translated for Dataflow offline, with the
// service answering with a DOCKER environment (Beam's Go SDK container) whose worker binary
// Beam's Dataflow runner stages under the staging location (a fake Cloud Storage on
// loopback); the case stops the runner where it would submit the job.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestXlangJavaExpandsAndTranslates(t *testing.T) {
	lib := requireEnv(t, javaClasspathEnv, "a folder of Beam Java 2.73.0 jars (beam-sdks-java-core and its dependencies)")
	service := requireEnv(t, xlangServiceEnv, "the host:port of a running cloudtasks-expansion-service")
	example, err := filepath.Abs("../../examples/xlang/java/WriteToCloudTasks.java")
	require.NoError(t, err)
	out := runProcess(t, nil, javaBinary(), "-cp", filepath.Join(lib, "*"), example, service, "127.0.0.1:9")
	t.Logf("the translated pipeline:\n%s", tail(out, 20))

	goEnv := regexp.MustCompile(`(?m)^environment (\S+) urn=beam:env:external:v1 dependencies=1$`).FindStringSubmatch(out)
	require.NotNil(t, goEnv, "the Go environment (EXTERNAL, the worker binary staged) is in the pipeline")
	for _, step := range []string{"xlang.toTaskFn", "cloudtasksio.writeFn", "xlang.errorRowFn"} {
		assert.Regexp(t, `(?m)^ +transform \S+/`+regexp.QuoteMeta(step)+` urn=beam:transform:pardo:v1 environment=`+regexp.QuoteMeta(goEnv[1])+`$`, out,
			"%s runs in the Go environment", step)
	}
	assert.Regexp(t, `errors output: \S+ schema \{ +element: <ROW NOT NULL> \{ +id: <STRING NOT NULL> +amount: <INT64 NOT NULL>`, out,
		"the error rows carry the Java row")
	t.Log("!!! NOT RUN: the Java pipeline itself. It expands and translates, but no Java portable runner " +
		"(Flink, Spark, Samza job server or beam-runners-portability-java) can be fetched on these machines (.ci/NOTES.md), " +
		"and Java's direct runner cannot run Go steps.")
}

// javaBinary is JAVA_HOME's java, else the one on PATH.
func javaBinary() string {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		return filepath.Join(home, "bin", "java")
	}
	return "java"
}

func TestXlangPythonJobTranslatesForDataflow(t *testing.T) {
	python := requireEnv(t, pythonEnv, "the python of a virtual environment with apache-beam[gcp] and beam_cloudtasks")
	binary := requireEnv(t, xlangBinaryEnv, "the path of the cloudtasks-expansion-service program")
	info, err := os.Stat(binary)
	require.NoError(t, err)
	gcs := newFakeGCS(t)
	out := filepath.Join(t.TempDir(), "dataflow.json")
	runProcess(t, []string{"STORAGE_EMULATOR_HOST=http://" + gcs.Host}, python,
		filepath.Join(testdataXlang(t), "cases.py"), "dataflow", "--out", out, "--emulator", "127.0.0.1:9",
		"--binary", binary, "--binary-arg=--environment=docker", "--",
		"--runner=DataflowRunner", "--project=my-project", "--region=us-central1", "--temp_location=gs://my-bucket/tmp",
		"--staging_location=gs://my-bucket/staging", "--no_auth", "--sdk_location=container")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var res struct {
		Environments map[string]struct {
			URN   string   `json:"urn"`
			Image string   `json:"image"`
			Roles []string `json:"roles"`
		} `json:"environments"`
		Transforms []struct {
			Name, URN, Environment string
		} `json:"transforms"`
		JobEnvironment struct {
			Experiments []string `json:"experiments"`
			WorkerPools []struct {
				Packages []struct {
					Name     string `json:"name"`
					Location string `json:"location"`
				} `json:"packages"`
				SdkHarnessContainerImages []struct {
					ContainerImage string `json:"container_image"`
					EnvironmentID  string `json:"environment_id"`
				} `json:"sdk_harness_container_images"`
			} `json:"worker_pools"`
		} `json:"job_environment"`
	}
	require.NoError(t, json.Unmarshal(b, &res))

	goEnv := ""
	for id, env := range res.Environments {
		if strings.Contains(env.Image, "beam_go_sdk") {
			goEnv = id
			assert.Equal(t, "beam:env:docker:v1", env.URN)
			// The service names apache/beam_go_sdk; Beam's Dataflow runner swaps in Dataflow's copy.
			assert.Equal(t, "gcr.io/cloud-dataflow/v1beta3/beam_go_sdk:"+core.SdkVersion, env.Image, "the Go SDK container of the service's Beam release")
			assert.Equal(t, []string{"beam:artifact:role:go_worker_binary:v1"}, env.Roles, "the worker binary is staged in its role")
		}
	}
	require.NotEmpty(t, goEnv, "a Go environment is in the Dataflow pipeline: %+v", res.Environments)
	var goSteps []string
	for _, tr := range res.Transforms {
		if tr.Environment == goEnv {
			goSteps = append(goSteps, tr.Name)
		}
	}
	assert.NotEmpty(t, goSteps, "the sink's steps run in the Go environment")
	t.Logf("Go steps: %s", strings.Join(goSteps, ", "))

	assert.Contains(t, res.JobEnvironment.Experiments, "use_runner_v2", "cross-language pipelines run on Runner v2")
	require.NotEmpty(t, res.JobEnvironment.WorkerPools)
	var images []string
	for _, im := range res.JobEnvironment.WorkerPools[0].SdkHarnessContainerImages {
		images = append(images, im.ContainerImage)
	}
	assert.Contains(t, strings.Join(images, " "), "beam_go_sdk:"+core.SdkVersion, "the job's workers start the Go SDK container too")
	staged := false
	for obj, size := range gcs.Objects() {
		if strings.HasPrefix(obj, "gs://my-bucket/staging/") && size == info.Size() {
			staged = true
			t.Logf("the worker binary is staged as %s (%d bytes)", obj, size)
		}
	}
	assert.True(t, staged, "the worker binary (%d bytes) is uploaded under the staging location: %v", info.Size(), gcs.Objects())
	t.Logf("job: experiments %v, containers %v", res.JobEnvironment.Experiments, images)
}
