package integration

import (
	"context"
	"flag"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/kafka-to-cloudtasks/template"
)

// These tests run the Kafka-to-Cloud-Tasks template's local modes (files and stdin) on prism
// against an in-process cloudtaskstest server, configured through the template's own flags.

const tplFixedURL = "http://127.0.0.1:1/orders"

// tplEnv is one template test's Cloud Tasks server and queue.
type tplEnv struct {
	server *cloudtaskstest.Server
	queue  cloudtasksio.Queue
}

func newTplEnv(t *testing.T) *tplEnv {
	t.Helper()
	needsCloudtaskstest(t, "WithoutDispatch and stored task bodies")
	b := newBackend(t, cloudtaskstest.WithoutDispatch())
	return &tplEnv{server: b.Server, queue: b.newQueue(t, nil)}
}

// sinkFlags are the --sink flags that point the template at the env's queue and server.
func (e *tplEnv) sinkFlags(extra ...string) []string {
	args := []string{
		"--sink", "project=" + e.queue.Project, "--sink", "location=" + e.queue.Location,
		"--sink", "queue=" + e.queue.Name, "--sink", "emulator-endpoint=" + e.server.Addr,
	}
	for _, kv := range extra {
		args = append(args, "--sink", kv)
	}
	return args
}

// parseTplFlags parses template flags as the template's main does.
func parseTplFlags(t *testing.T, args ...string) *template.Options {
	t.Helper()
	fs := flag.NewFlagSet("kafka-to-cloudtasks", flag.ContinueOnError)
	opts := template.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	return opts
}

// runTemplate builds the template's pipeline and runs it on prism, returning every counter
// keyed "namespace.name".
func runTemplate(t *testing.T, opts *template.Options) (map[string]int64, error) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	require.NoError(t, template.Build(s, *opts))
	pr, err := ptest.RunWithMetrics(p)
	if err != nil {
		return nil, err
	}
	counters := map[string]int64{}
	for _, c := range pr.Metrics().Query(func(metrics.SingleResult) bool { return true }).Counters() {
		counters[c.Namespace()+"."+c.Name()] += c.Result()
	}
	return counters, nil
}

func writeInput(t *testing.T, lines ...string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "records.jsonl")
	require.NoError(t, os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return name
}

func tasksByID(tasks []*cloudtaskspb.Task) map[string]*cloudtaskspb.Task {
	out := map[string]*cloudtaskspb.Task{}
	for _, task := range tasks {
		out[path.Base(task.GetName())] = task
	}
	return out
}

func TestTemplateLocalFileModeExtractsFieldsAndDedupsOnRerun(t *testing.T) {
	env := newTplEnv(t)
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	records := []string{
		`{"id":"o-1","url":"http://127.0.0.1:1/special","at":"` + at.Format(time.RFC3339) + `","qty":1}`,
		`{"id":"o-2","qty":2}`,
		``, // blank lines are skipped
		`{"id":3,"url":null,"at":null,"note":"東京"}`,
	}
	input := writeInput(t, records...)
	opts := parseTplFlags(t, append([]string{
		"--input", input, "--format", "json",
		"--task_id_field", "id", "--url_field", "url", "--schedule_time_field", "at",
	}, env.sinkFlags("http.url="+tplFixedURL, "http.headers.X-Source=template")...)...)

	counters, err := runTemplate(t, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(3), counters["cloudtasksio.numRecordsSend"])

	tasks := tasksByID(env.server.Tasks(env.queue.Path()))
	require.Len(t, tasks, 3)
	one := tasks[cloudtasksio.TaskID("o-1")]
	require.NotNil(t, one, "o-1 is named by its id")
	assert.Equal(t, records[0], string(one.GetHttpRequest().GetBody()), "the value is the body, unchanged")
	assert.Equal(t, "http://127.0.0.1:1/special", one.GetHttpRequest().GetUrl())
	assert.True(t, at.Equal(one.GetScheduleTime().AsTime()), "schedule time %v, want %v", one.GetScheduleTime().AsTime(), at)
	assert.Equal(t, map[string]string{"Content-Type": "application/json", "X-Source": "template"}, one.GetHttpRequest().GetHeaders())
	assert.Equal(t, cloudtaskspb.HttpMethod_POST, one.GetHttpRequest().GetHttpMethod())

	two := tasks[cloudtasksio.TaskID("o-2")]
	require.NotNil(t, two)
	assert.Equal(t, tplFixedURL, two.GetHttpRequest().GetUrl(), "without the url field the fixed URL applies")
	assert.WithinDuration(t, time.Now(), two.GetScheduleTime().AsTime(), time.Minute, "without the field: as soon as possible")

	three := tasks[cloudtasksio.TaskID("3")]
	require.NotNil(t, three, "a numeric id is keyed by its JSON text")
	assert.Equal(t, records[3], string(three.GetHttpRequest().GetBody()))
	assert.Equal(t, tplFixedURL, three.GetHttpRequest().GetUrl(), "a null url field is absent")

	// The same input again: every task already exists, nothing new is stored.
	env.server.ResetStats()
	counters, err = runTemplate(t, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(3), counters["cloudtasksio.tasksDeduplicated"])
	assert.Equal(t, 3, env.server.Stats().AlreadyExists)
	assert.Len(t, env.server.Tasks(env.queue.Path()), 3)
}

func TestTemplateStdinRawModeSendsLinesAsTheyAre(t *testing.T) {
	env := newTplEnv(t)
	opts := parseTplFlags(t, env.sinkFlags("http.url="+tplFixedURL, "http.method=PUT")...)
	opts.Stdin = strings.NewReader("hello\r\nnot json {\n\n\tworld \n")

	_, err := runTemplate(t, opts)
	require.NoError(t, err)

	var bodies []string
	for _, task := range env.server.Tasks(env.queue.Path()) {
		req := task.GetHttpRequest()
		bodies = append(bodies, string(req.GetBody()))
		assert.Empty(t, req.GetHeaders()["Content-Type"], "raw records get no Content-Type unless configured")
		assert.Equal(t, cloudtaskspb.HttpMethod_PUT, req.GetHttpMethod())
		assert.NotRegexp(t, `/tasks/[0-9a-f]{64}$`, task.GetName(), "without --task_id_field the service names the task")
	}
	assert.ElementsMatch(t, []string{"hello", "not json {", "\tworld "}, bodies)
}

func TestTemplateAppEngineURLFieldIsTheRelativeURI(t *testing.T) {
	env := newTplEnv(t)
	opts := parseTplFlags(t, append([]string{"--format", "json", "--url_field", "path"},
		env.sinkFlags("target.type=app-engine", "app-engine.relative-uri=/default", "app-engine.service=worker")...)...)
	opts.Stdin = strings.NewReader(`{"path":"/orders/1"}` + "\n" + `{"other":1}` + "\n")

	_, err := runTemplate(t, opts)
	require.NoError(t, err)

	var uris []string
	for _, task := range env.server.Tasks(env.queue.Path()) {
		req := task.GetAppEngineHttpRequest()
		require.NotNil(t, req)
		uris = append(uris, req.GetRelativeUri())
		assert.Equal(t, "worker", req.GetAppEngineRouting().GetService())
		assert.Equal(t, "application/json", req.GetHeaders()["Content-Type"])
	}
	assert.ElementsMatch(t, []string{"/orders/1", "/default"}, uris)
}

// tplBadRecords are records the template cannot read with --task_id_field id
// --schedule_time_field at, one per reason.
var tplBadRecords = []string{
	`not json`,                          // not JSON
	`["o-9"]`,                           // not an object
	`{"qty":1}`,                         // no task id
	`{"id":true}`,                       // task id of the wrong type
	`{"id":""}`,                         // empty task id
	`{"id":"o-8","at":"tomorrow noon"}`, // schedule time not RFC 3339
}

func tplMixedInput(t *testing.T) string {
	return writeInput(t, append([]string{`{"id":"good"}`}, tplBadRecords...)...)
}

func TestTemplateLogAndDropKeepsGoodRecords(t *testing.T) {
	env := newTplEnv(t)
	opts := parseTplFlags(t, append([]string{
		"--input", tplMixedInput(t), "--format", "json", "--task_id_field", "id", "--schedule_time_field", "at",
		"--on_failure", "log-and-drop",
	}, env.sinkFlags("http.url="+tplFixedURL)...)...)

	counters, err := runTemplate(t, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(len(tplBadRecords)), counters[template.MetricsNamespace+".recordsRejected"])
	tasks := env.server.Tasks(env.queue.Path())
	require.Len(t, tasks, 1)
	assert.Equal(t, cloudtasksio.TaskID("good"), path.Base(tasks[0].GetName()))
}

func TestTemplateFailPolicyFailsTheJobWithoutTheRecord(t *testing.T) {
	env := newTplEnv(t)
	opts := parseTplFlags(t, append([]string{
		"--input", writeInput(t, `{"secret-value":1}`), "--format", "json", "--task_id_field", "id",
	}, env.sinkFlags("http.url="+tplFixedURL)...)...)

	_, err := runTemplate(t, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `task id field "id" is missing`)
	assert.NotContains(t, err.Error(), "secret-value")
}

func TestTemplateDeadLettersReachPubSub(t *testing.T) {
	env := newTplEnv(t)
	ps := pstest.NewServer()
	t.Cleanup(func() { ps.Close() })
	const topic = "projects/tpl/topics/rejected"
	ctx := context.Background()
	client, err := pubsub.NewClient(ctx, "tpl", option.WithEndpoint(ps.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	require.NoError(t, err)
	defer client.Close()
	_, err = client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topic})
	require.NoError(t, err)

	input := writeInput(t, append([]string{
		`{"id":"good"}`,
		`{"id":"bad-url","url":"ftp://127.0.0.1/x"}`, // readable, but the sink rejects the task
	}, tplBadRecords...)...)
	opts := parseTplFlags(t, append([]string{
		"--input", input, "--format", "json",
		"--task_id_field", "id", "--url_field", "url", "--schedule_time_field", "at",
		"--dead_letter_topic", topic, "--dead_letter_emulator_endpoint", ps.Addr,
	}, env.sinkFlags("http.url="+tplFixedURL)...)...)

	counters, err := runTemplate(t, opts)
	require.NoError(t, err)
	require.Len(t, env.server.Tasks(env.queue.Path()), 1)

	codes := map[string]int{}
	for _, m := range ps.Messages() {
		assert.Equal(t, "cloudtasks", m.Attributes[deadletter.AttrConnector])
		assert.Equal(t, env.queue.Path(), m.Attributes[deadletter.AttrDestination])
		assert.NotContains(t, m.Attributes[deadletter.AttrError], "tomorrow noon", "errors never carry the record")
		codes[m.Attributes[deadletter.AttrCode]]++
		if m.Attributes[deadletter.AttrCode] == "SERIALIZATION" {
			assert.Empty(t, m.Data, "an unreadable record has no task")
		} else {
			var task cloudtaskspb.Task
			require.NoError(t, proto.Unmarshal(m.Data, &task))
			assert.Equal(t, "ftp://127.0.0.1/x", task.GetHttpRequest().GetUrl())
		}
	}
	assert.Equal(t, map[string]int{"SERIALIZATION": len(tplBadRecords), "INVALID_ARGUMENT": 1}, codes)
	assert.Equal(t, int64(len(tplBadRecords)+1), counters["deadletter.messagesPublished"])
}

// TestTemplateConfigurationErrorsNameTheFlag checks that Build rejects bad flag combinations
// before anything runs, naming the flag or option key.
func TestTemplateConfigurationErrorsNameTheFlag(t *testing.T) {
	sink := []string{"--sink", "project=p", "--sink", "location=l", "--sink", "queue=q", "--sink", "http.url=" + tplFixedURL}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"field flag on raw records", []string{"--task_id_field", "id"}, "--task_id_field"},
		{"unknown record format", []string{"--format", "xml"}, "--format"},
		{"sink format other than raw", []string{"--sink", "format=json"}, "--sink format=json"},
		{"bad sink key", []string{"--sink", "http.uri=x"}, `"http.uri"`},
		{"dead-letter without topic", []string{"--on_failure", "dead-letter"}, "--dead_letter_topic"},
		{"topic with fail", []string{"--on_failure", "fail", "--dead_letter_topic", "projects/p/topics/t"}, "--dead_letter_topic"},
		{"unknown failure policy", []string{"--on_failure", "retry"}, "--on_failure"},
		{"files and kafka", []string{"--input", "x", "--kafka_bootstrap_servers", "127.0.0.1:9092", "--kafka_topics", "t"}, "--input"},
		{"kafka without topics", []string{"--kafka_bootstrap_servers", "127.0.0.1:9092"}, "--kafka_topics"},
		{"expansion service without kafka", []string{"--input", "x", "--expansion_addr", "127.0.0.1:8097"}, "--expansion_addr configures the Kafka read"},
		{"consumer property without kafka", []string{"--input", "x", "--kafka_consumer_config", "group.id=g"}, "--kafka_consumer_config configures the Kafka read"},
		{"record limit without kafka", []string{"--input", "x", "--kafka_max_records", "5"}, "--kafka_max_records configures the Kafka read"},
		{"time limit without kafka", []string{"--kafka_max_read_secs", "5"}, "--kafka_max_read_secs configures the Kafka read"},
		{"no input", nil, "no input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := parseTplFlags(t, append(append([]string{}, sink...), tc.args...)...)
			_, s := beam.NewPipelineWithRoot()
			err := template.Build(s, *opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// Without http.url the records must carry their URL.
	opts := parseTplFlags(t, "--sink", "project=p", "--sink", "location=l", "--sink", "queue=q")
	opts.Stdin = strings.NewReader("x\n")
	_, s := beam.NewPipelineWithRoot()
	err := template.Build(s, *opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--url_field")
}

// TestTemplateFlagsRejectRepeatedKeysWithoutQuotingValues checks that a repeated or malformed
// key=value flag is reported by Build, naming the flag and the key but never the value: a
// flag parse error would quote the value, which can be a credential.
func TestTemplateFlagsRejectRepeatedKeysWithoutQuotingValues(t *testing.T) {
	sink := []string{"--sink", "project=p", "--sink", "location=l", "--sink", "queue=q", "--sink", "http.url=" + tplFixedURL}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"repeated sink key", []string{"--sink", "http.headers.Authorization=Bearer s3cr3t-1", "--sink", "http.headers.Authorization=Bearer s3cr3t-2"},
			`--sink key "http.headers.Authorization" is given twice`},
		{"repeated consumer property", []string{"--kafka_consumer_config", "sasl.jaas.config=s3cr3t-1", "--kafka_consumer_config", "sasl.jaas.config=s3cr3t-2"},
			`--kafka_consumer_config key "sasl.jaas.config" is given twice`},
		{"sink value without '='", []string{"--sink", "http.headers.Authorization:Bearer s3cr3t"}, "--sink takes key=value"},
		{"sink value without key", []string{"--sink", "=s3cr3t"}, "--sink takes key=value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := parseTplFlags(t, append(append([]string{}, sink...), tc.args...)...)
			opts.Stdin = strings.NewReader("x\n")
			_, s := beam.NewPipelineWithRoot()
			err := template.Build(s, *opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
		})
	}

	opts := parseTplFlags(t, "--kafka_topics", "a, b", "--kafka_topics", "c", "--kafka_consumer_config", "group.id=g")
	assert.Equal(t, []string{"a", "b", "c"}, opts.Kafka.Topics)
	assert.Equal(t, map[string]string{"group.id": "g"}, opts.Kafka.ConsumerConfig)
}

// TestTemplateKafkaModeExpandsThroughTheExpansionService checks that Kafka flags select the
// cross-language read: with no expansion service listening, Build reports the failed
// expansion instead of panicking.
func TestTemplateKafkaModeExpandsThroughTheExpansionService(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())

	opts := parseTplFlags(t, "--sink", "project=p", "--sink", "location=l", "--sink", "queue=q",
		"--sink", "http.url="+tplFixedURL, "--kafka_bootstrap_servers", "127.0.0.1:9092",
		"--kafka_topics", "orders", "--expansion_addr", closed,
		"--kafka_consumer_config", "sasl.jaas.config=s3cr3t")
	_, s := beam.NewPipelineWithRoot()
	err = template.Build(s, *opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--expansion_addr")
	assert.Contains(t, err.Error(), "kafka_read", "the Kafka read's URN was sent for expansion")
	assert.Contains(t, err.Error(), "connection refused")
	assert.NotContains(t, err.Error(), "s3cr3t", "consumer properties may hold credentials")
}
