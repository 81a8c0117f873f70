package engines

// Dataflow's translation, offline. Every example and the Kafka template is run with the Go
// SDK's Dataflow runner and --dry_run, a fake project, region and gs:// staging location: the
// runner builds the portable pipeline and the Dataflow job (Runner v2, the Go SDK container,
// the staged worker binary) and prints both at INFO without submitting anything. The cases
// check that both were printed, that the job is what the flags ask for, and that the
// pipeline holds the sink's steps as the Go SDK's worker would run them; any error fails.
//
// The binaries are built once by .ci/engines (BEAM_EXAMPLE_BINARIES). They run with the proxy
// variables and the metadata server host pointed at a closed loopback port, so an attempt to
// reach Google fails at once instead of leaving the machine; what the dry run does try (it
// makes a Cloud Storage client to check the bucket's soft-delete policy, and gives up with a
// warning when there are no credentials) is logged by the case. This proves the job graph
// passes the Go SDK's Dataflow translation; not that Dataflow's service accepts the job or
// that it runs (docs/runners.md).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// exampleBinariesEnv names the variable holding the folder of the example binaries
// (`go build -o <folder>/ ./examples/...`); .ci/engines builds them and sets it.
const exampleBinariesEnv = "BEAM_EXAMPLE_BINARIES"

// dryRunFlags are the Dataflow flags of every dry run, with nothing real in them.
var dryRunFlags = []string{"--runner=dataflow", "--dry_run", "--project=p", "--region=us-central1", "--staging_location=gs://b/s"}

// offlineEnv is the environment of a dry run: any HTTP(S) or gRPC connection that honours the
// standard proxy variables goes to a closed loopback port, and no credentials are named. (Not
// GCE_METADATA_HOST: setting it makes Google's libraries believe they run on Compute Engine and
// wait for a token.)
// Cloud Storage is the fake at gcsHost.
func offlineEnv(gcsHost string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "GCE_METADATA_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST":
			continue
		}
		env = append(env, kv)
	}
	closed := "http://127.0.0.1:9"
	return append(env, "STORAGE_EMULATOR_HOST="+gcsHost, "HTTP_PROXY="+closed, "HTTPS_PROXY="+closed, "http_proxy="+closed, "https_proxy="+closed,
		"NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1")
}

// dryRunCase is one binary translated for Dataflow.
type dryRunCase struct {
	// Binary is the example's name, the file under BEAM_EXAMPLE_BINARIES.
	Binary string
	// Args are its own flags, after dryRunFlags.
	Args []string
	// Composites are the composite transforms the pipeline must hold, by unique name; each
	// must contain at least one ParDo that runs in the Go environment.
	Composites []string
	// Reshuffle names a composite that must contain a Reshuffle (exactly-once's stage and
	// create steps are separated by one).
	Reshuffle string
	// External names a composite whose ParDos must run in another SDK's environment (the Kafka
	// read, expanded by Beam's Java expansion service).
	External string
}

// dryRunCases are every example and the Kafka template; the template reads Kafka through the
// expansion service of BEAM_EXPANSION_ADDR, so its case needs that.
func dryRunCases(t *testing.T) []dryRunCase {
	cases := []dryRunCase{
		{Binary: "quickstart", Args: []string{"--verbose", "--orders=10"}, Composites: []string{"cloudtasksio.Write"}},
		{Binary: "appengine", Args: []string{"--verbose"}, Composites: []string{"cloudtasksio.Write"}},
		{Binary: "dynamicqueues", Args: []string{"--verbose"}, Composites: []string{"cloudtasksio.Write"}},
		{Binary: "deadletters", Args: []string{"--verbose"}, Composites: []string{"cloudtasksio.Write", "ToPubSub"}},
		{Binary: "exactlyonce", Args: []string{"--verbose"}, Composites: []string{"cloudtasksio.Write"}, Reshuffle: "cloudtasksio.Write"},
		// replay translates its dead-letter pipeline, then the replay, printed last and checked.
		{Binary: "replay", Args: []string{"--verbose"}, Composites: []string{"replay", "cloudtasksio.Write"}},
		// reschedule translates its reminder pipeline, then the change pipeline, printed last and
		// checked: a Delete of the replaced reminders beside a Write of the new ones.
		{Binary: "reschedule", Args: []string{"--verbose"}, Composites: []string{"cloudtasksio.Delete", "cloudtasksio.Write"}},
	}
	kafka := dryRunCase{Binary: "kafka-to-cloudtasks", Composites: []string{"cloudtasksio.Write"}, External: "KafkaIO.Read"}
	if addr := os.Getenv(expansionAddrEnv); addr != "" {
		kafka.Args = []string{
			"--expansion_addr=" + addr, "--kafka_bootstrap_servers=127.0.0.1:9", "--kafka_topics=orders", "--kafka_max_records=10",
			"--cloudtasks_project=p", "--cloudtasks_location=us-central1", "--cloudtasks_queue=orders",
			"--cloudtasks_http_url=https://example.com/orders", "--format=json",
		}
	}
	return append(cases, kafka)
}

func TestDataflowDryRunTranslatesEveryExample(t *testing.T) {
	dir := requireEnv(t, exampleBinariesEnv, "the folder of the example binaries (go build -o <folder>/ ./examples/...)")
	for _, c := range dryRunCases(t) {
		t.Run(c.Binary, func(t *testing.T) {
			if c.External != "" && c.Args == nil {
				requireEnv(t, expansionAddrEnv, "the address (host:port) of Beam's Java IO expansion service, which the Kafka template's dry run expands its read with")
			}
			gcs := newFakeGCS(t)
			out := runDryRun(t, filepath.Join(dir, c.Binary), gcs.Host, c.Args...)
			checkDataflowJob(t, out.job)
			staged := checkPipeline(t, c, out.pipeline)
			assert.Empty(t, gcs.Unexpected(), "requests to Cloud Storage that the dry run was not expected to make")
			checkStaged(t, gcs.Objects(), staged)
		})
	}
}

// TestEveryExampleHasADryRunCase fails when a program under examples/ (a folder whose package
// is main) has no case in dryRunCases: every example must translate for Dataflow.
func TestEveryExampleHasADryRunCase(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range dryRunCases(t) {
		listed[c.Binary] = true
	}
	dirs, err := os.ReadDir(examplesDir)
	require.NoError(t, err)
	var programs int
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		pkg, err := build.ImportDir(filepath.Join(examplesDir, d.Name()), 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			continue // not Go (examples/xlang)
		}
		require.NoError(t, err)
		if pkg.Name != "main" {
			continue
		}
		programs++
		assert.True(t, listed[d.Name()], "examples/%s has no case in dryRunCases: add one, so that its pipeline is translated for Dataflow", d.Name())
	}
	assert.Equal(t, len(listed), programs, "every case of dryRunCases is a program under examples/")
}

// examplesDir is the examples folder, from this package's.
const examplesDir = "../../examples"

// dryRunOutput is what a dry run printed.
type dryRunOutput struct {
	pipeline *pipepb.Pipeline
	job      map[string]any
}

// runDryRun runs bin with dryRunFlags and args, offline, and returns the pipeline and job it
// printed. The binary must exit with status 0 within a minute and log no error.
func runDryRun(t *testing.T, bin, gcsHost string, args ...string) dryRunOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(dryRunFlags), args...)...)
	cmd.Env = offlineEnv(gcsHost)
	cmd.Dir = t.TempDir() // the Go SDK writes cross-language artifacts under /tmp/artifacts, nothing here
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Logf("running %s %s", filepath.Base(bin), strings.Join(cmd.Args[1:], " "))
	err := cmd.Run()
	require.NoError(t, err, "the dry run failed; its stderr:\n%s", tail(stderr.String(), 40))

	var out dryRunOutput
	var dryRunSeen bool
	for _, line := range strings.Split(stderr.String(), "\n") {
		level, msg, ok := slogLine(line)
		switch {
		case !ok:
			continue
		case level == "ERROR":
			t.Errorf("the dry run logged an error: %.500s", msg)
		case level == "WARN":
			t.Logf("the dry run warned: %.300s", msg)
		case msg == "Dry-run: not submitting job!":
			dryRunSeen = true
		case strings.HasPrefix(msg, "components:"):
			var p pipepb.Pipeline
			require.NoError(t, prototext.Unmarshal([]byte(msg), &p), "the printed pipeline does not parse")
			out.pipeline = &p
		case strings.HasPrefix(msg, "{") && strings.Contains(msg, `"workerPools"`):
			require.NoError(t, json.Unmarshal([]byte(msg), &out.job), "the printed job does not parse")
		}
	}
	require.True(t, dryRunSeen, "the runner did not say it made a dry run; stderr:\n%s", tail(stderr.String(), 20))
	require.NotNil(t, out.pipeline, "no pipeline was printed (it is printed at INFO: a quiet log level hides it)")
	require.NotNil(t, out.job, "no Dataflow job was printed")
	return out
}

// slogLine splits a line of log/slog's text handler into its level and message.
func slogLine(line string) (level, msg string, ok bool) {
	_, rest, found := strings.Cut(line, " level=")
	if !found {
		return "", "", false
	}
	level, rest, _ = strings.Cut(rest, " ")
	raw, found := strings.CutPrefix(rest, "msg=")
	if !found {
		return "", "", false
	}
	if strings.HasPrefix(raw, `"`) {
		// The message is quoted as a Go string literal up to the end of the line or the next
		// attribute; the dry run's messages carry no attributes.
		if m, err := strconv.Unquote(strings.TrimRight(raw, " ")); err == nil {
			return level, m, true
		}
		return level, raw, true
	}
	msg, _, _ = strings.Cut(raw, " ")
	return level, msg, true
}

// checkDataflowJob checks the printed job against the flags: project, region, staging and
// temporary locations, Runner v2 and the Go SDK container of this module's Beam version.
func checkDataflowJob(t *testing.T, job map[string]any) {
	t.Helper()
	var j struct {
		ProjectID   string `json:"projectId"`
		Type        string `json:"type"`
		Environment struct {
			Experiments        []string `json:"experiments"`
			TempStoragePrefix  string   `json:"tempStoragePrefix"`
			SdkPipelineOptions struct {
				Options struct {
					Region string `json:"region"`
				} `json:"options"`
			} `json:"sdkPipelineOptions"`
			WorkerPools []struct {
				Packages []struct {
					Name     string `json:"name"`
					Location string `json:"location"`
				} `json:"packages"`
				SdkHarnessContainerImages []struct {
					ContainerImage string `json:"containerImage"`
				} `json:"sdkHarnessContainerImages"`
			} `json:"workerPools"`
		} `json:"environment"`
	}
	raw, err := json.Marshal(job)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &j))
	assert.Equal(t, "p", j.ProjectID)
	assert.Equal(t, "us-central1", j.Environment.SdkPipelineOptions.Options.Region)
	assert.Contains(t, j.Environment.Experiments, "use_runner_v2", "Beam Go runs on Dataflow's Runner v2")
	assert.Contains(t, j.Environment.Experiments, "use_portable_job_submission")
	assert.True(t, strings.HasPrefix(j.Environment.TempStoragePrefix, "gs://b/s/"), "temporary files go under the staging location: %q", j.Environment.TempStoragePrefix)
	require.NotEmpty(t, j.Environment.WorkerPools, "the job has no worker pool")
	pool := j.Environment.WorkerPools[0]
	var worker string
	for _, p := range pool.Packages {
		if p.Name == "worker" {
			worker = p.Location
		}
	}
	assert.Regexp(t, `^gs://b/s/.+/worker$`, worker, "the worker binary is staged under the staging location")
	var images []string
	for _, im := range pool.SdkHarnessContainerImages {
		images = append(images, im.ContainerImage)
	}
	assert.Contains(t, images, "gcr.io/cloud-dataflow/v1beta3/beam_go_sdk:"+core.SdkVersion, "the Go SDK container of this module's Beam version")
	t.Logf("Dataflow job: type %s, project %s, region %s, worker %s, containers %v", j.Type, j.ProjectID, j.Environment.SdkPipelineOptions.Options.Region, worker, images)
}

// checkPipeline checks that the pipeline holds the case's composites, each with a ParDo in the
// Go environment (a Docker environment of the Go SDK image with the worker binary staged), its
// Reshuffle and its external transform. It returns the files the external transform's
// environment stages, which the runner must have uploaded.
func checkPipeline(t *testing.T, c dryRunCase, p *pipepb.Pipeline) (staged []string) {
	t.Helper()
	ts := p.GetComponents().GetTransforms()
	goEnvs := map[string]bool{}
	for id, env := range p.GetComponents().GetEnvironments() {
		var docker pipepb.DockerPayload
		if env.GetUrn() == "beam:env:docker:v1" && proto.Unmarshal(env.GetPayload(), &docker) == nil &&
			strings.Contains(docker.GetContainerImage(), "beam_go_sdk:") && hasGoWorkerBinary(env) {
			goEnvs[id] = true
		}
	}
	require.NotEmpty(t, goEnvs, "no Go SDK environment with a staged worker binary")

	// under returns the leaf transforms that lie under a composite named composite, or
	// "<package>.<composite>".
	under := func(composite string) []*pipepb.PTransform {
		var out []*pipepb.PTransform
		for _, tr := range ts {
			segments := strings.Split(tr.GetUniqueName(), "/")
			inside := slices.ContainsFunc(segments[:len(segments)-1], func(seg string) bool {
				return seg == composite || strings.HasSuffix(seg, "."+composite)
			})
			if inside && len(tr.GetSubtransforms()) == 0 {
				out = append(out, tr)
			}
		}
		return out
	}
	var names []string
	for _, tr := range ts {
		names = append(names, tr.GetUniqueName())
	}
	slices.Sort(names)
	for _, composite := range c.Composites {
		var parDos []string
		for _, tr := range under(composite) {
			if tr.GetSpec().GetUrn() == "beam:transform:pardo:v1" && goEnvs[tr.GetEnvironmentId()] {
				parDos = append(parDos, tr.GetUniqueName())
			}
		}
		if assert.NotEmpty(t, parDos, "no ParDo in the Go environment under %q; the transforms are %q", composite, names) {
			t.Logf("%s: %s", composite, strings.Join(parDos, ", "))
		}
	}
	if c.Reshuffle != "" {
		var found bool
		for _, tr := range ts {
			if strings.HasPrefix(tr.GetUniqueName(), c.Reshuffle+"/") && tr.GetSpec().GetUrn() == "beam:transform:reshuffle:v1" {
				found = true
			}
		}
		assert.True(t, found, "no Reshuffle under %q; the transforms are %q", c.Reshuffle, names)
	}
	if c.External != "" {
		// Every ParDo under it runs in the other SDK's environment, staged with its own files.
		envs := map[string]int{}
		for _, tr := range under(c.External) {
			if tr.GetSpec().GetUrn() == "beam:transform:pardo:v1" {
				assert.False(t, goEnvs[tr.GetEnvironmentId()], "%s runs in the Go environment", tr.GetUniqueName())
				envs[tr.GetEnvironmentId()]++
			}
		}
		require.NotEmpty(t, envs, "no ParDo under %q; the transforms are %q", c.External, names)
		for id, n := range envs {
			env := p.GetComponents().GetEnvironments()[id]
			require.NotNil(t, env, "environment %q of %s is not in the pipeline", id, c.External)
			t.Logf("%s: %d ParDo(s) in environment %q (%s, %d staged files)", c.External, n, id, env.GetUrn(), len(env.GetDependencies()))
			for _, d := range env.GetDependencies() {
				var f pipepb.ArtifactFilePayload
				var u pipepb.ArtifactUrlPayload
				switch {
				case d.GetTypeUrn() == "beam:artifact:type:url:v1" && proto.Unmarshal(d.GetTypePayload(), &u) == nil:
					staged = append(staged, u.GetUrl())
				case d.GetTypeUrn() == "beam:artifact:type:file:v1" && proto.Unmarshal(d.GetTypePayload(), &f) == nil:
					staged = append(staged, f.GetPath())
				default:
					t.Errorf("a file of environment %q is neither a URL nor a file: %s", id, d.GetTypeUrn())
				}
			}
		}
	}
	return staged
}

// checkStaged checks that the dry run uploaded exactly the files the pipeline names, under the
// staging location: none for a pipeline of Go transforms only (the worker binary is staged
// only when the job is submitted), the other SDK's files for a cross-language one.
func checkStaged(t *testing.T, objects map[string]int64, staged []string) {
	t.Helper()
	var uploaded []string
	for name := range objects {
		uploaded = append(uploaded, name)
	}
	slices.Sort(uploaded)
	slices.Sort(staged)
	assert.Equal(t, staged, uploaded, "the objects the dry run uploaded to Cloud Storage are the files the pipeline stages")
	for _, name := range uploaded {
		assert.Regexp(t, `^gs://b/s/[^/]+/xlang/`, name, "cross-language files are staged under the staging location")
	}
	if len(uploaded) > 0 {
		t.Logf("the dry run uploaded %d cross-language files to the fake Cloud Storage, such as %s", len(uploaded), uploaded[0])
	}
}

// hasGoWorkerBinary says whether env stages a Go worker binary.
func hasGoWorkerBinary(env *pipepb.Environment) bool {
	for _, d := range env.GetDependencies() {
		if d.GetRoleUrn() == "beam:artifact:role:go_worker_binary:v1" {
			return true
		}
	}
	return false
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
