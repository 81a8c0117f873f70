package integration

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
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

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio/cloudtaskstest"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/kafka-to-cloudtasks/kafkatemplate"
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

// sinkFlags are the sink flags that point the template at the env's queue and server, plus
// extra option keys as "key=value" (header keys are gathered into their JSON-object flag).
func (e *tplEnv) sinkFlags(extra ...string) []string {
	return sinkArgs(append([]string{
		"project=" + e.queue.Project, "location=" + e.queue.Location,
		"queue=" + e.queue.Name, "emulator-endpoint=" + e.server.Addr,
	}, extra...)...)
}

// sinkArgs turns option keys given as "key=value" into the template's flags.
func sinkArgs(kvs ...string) []string {
	var args []string
	headers := map[string]map[string]string{}
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		if family, name, ok := strings.Cut(k, ".headers."); ok {
			if headers[family] == nil {
				headers[family] = map[string]string{}
			}
			headers[family][name] = v
			continue
		}
		args = append(args, "--"+kafkatemplate.SinkFlagName(k)+"="+v)
	}
	for family, h := range headers {
		obj, _ := json.Marshal(h)
		args = append(args, "--"+kafkatemplate.SinkFlagName(family+".headers")+"="+string(obj))
	}
	return args
}

// parseTplFlags parses template flags as the template's main does.
func parseTplFlags(t *testing.T, args ...string) *kafkatemplate.Options {
	t.Helper()
	fs := flag.NewFlagSet("kafka-to-cloudtasks", flag.ContinueOnError)
	opts := kafkatemplate.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	return opts
}

// runTemplate builds the template's pipeline and runs it on prism, returning every counter
// keyed "namespace.name".
func runTemplate(t *testing.T, opts *kafkatemplate.Options) (map[string]int64, error) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	require.NoError(t, kafkatemplate.Build(s, *opts))
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
	assert.Equal(t, int64(len(tplBadRecords)), counters[kafkatemplate.MetricsNamespace+".recordsRejected"])
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
	var deadValues []string
	for _, m := range ps.Messages() {
		assert.Equal(t, cloudtasksio.Connector, m.Attributes[pubsubdl.AttrConnector])
		assert.Equal(t, env.queue.Path(), m.Attributes[pubsubdl.AttrDestination])
		assert.NotContains(t, m.Attributes[pubsubdl.AttrError], "tomorrow noon", "errors never carry the record")
		codes[m.Attributes[pubsubdl.AttrCode]]++
		if m.Attributes[pubsubdl.AttrCode] == cloudtasksio.CodeSerialization {
			fe, _, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.Data, Attributes: m.Attributes})
			require.NoError(t, err)
			var rec kafkatemplate.Record
			require.NoError(t, json.Unmarshal(fe.Payload, &rec), "an unreadable record's dead letter carries the record as JSON")
			elem, err := deadletter.DecodeElement[kafkatemplate.Record](fe)
			require.NoError(t, err, "and as its element")
			assert.Equal(t, rec, elem)
			assert.Empty(t, rec.Topic, "a line of a file has no Kafka coordinates")
			deadValues = append(deadValues, string(rec.Value))
		} else {
			fe, _, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.Data, Attributes: m.Attributes})
			require.NoError(t, err)
			task, err := cloudtasksio.FailedTask(fe)
			require.NoError(t, err)
			assert.Equal(t, "ftp://127.0.0.1/x", task.GetHttpRequest().GetUrl())
		}
	}
	assert.Equal(t, map[string]int{cloudtasksio.CodeSerialization: len(tplBadRecords), cloudtasksio.CodeInvalidArgument: 1}, codes)
	assert.ElementsMatch(t, tplBadRecords, deadValues, "each unreadable record is kept, byte for byte")
	assert.Equal(t, int64(len(tplBadRecords)+1), counters["deadletter.messagesPublished"])
}

// tplSink are the sink flags of the construction-only tests.
var tplSink = sinkArgs("project=p", "location=l", "queue=q", "http.url="+tplFixedURL)

// TestTemplateConfigurationErrorsNameTheFlag checks that Build rejects bad flags and flag
// combinations before anything runs, naming the flag.
func TestTemplateConfigurationErrorsNameTheFlag(t *testing.T) {
	kafka := []string{"--kafka_bootstrap_servers", "127.0.0.1:9092", "--kafka_topics", "t"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"field flag on raw records", []string{"--task_id_field", "id"}, "--task_id_field"},
		{"unknown record format", []string{"--format", "xml"}, "--format"},
		{"bad sink value", []string{"--cloudtasks_sink_recovery_max_attempts=0"}, `--cloudtasks_sink_recovery_max_attempts: `},
		{"bad sink method", []string{"--cloudtasks_http_method=FETCH"}, `--cloudtasks_http_method: `},
		{"key of the other target", []string{"--cloudtasks_app_engine_service=w"}, `--cloudtasks_app_engine_service: `},
		{"bad header name", []string{`--cloudtasks_http_headers={"Bad Name":"v"}`}, `--cloudtasks_http_headers header "Bad Name": `},
		{"dead-letter without topic", []string{"--on_failure", "dead-letter"}, "--dead_letter_topic"},
		{"topic with fail", []string{"--on_failure", "fail", "--dead_letter_topic", "projects/p/topics/t"}, "--dead_letter_topic"},
		{"unknown failure policy", []string{"--on_failure", "retry"}, "--on_failure"},
		{"files and kafka", append([]string{"--input", "x"}, kafka...), "--input"},
		{"kafka without topics", []string{"--kafka_bootstrap_servers", "127.0.0.1:9092"}, "--kafka_topics"},
		{"expansion service without kafka", []string{"--input", "x", "--expansion_addr", "127.0.0.1:8097"}, "--expansion_addr configures the Kafka read"},
		{"consumer properties without kafka", []string{"--input", "x", `--kafka_consumer_properties={"client.id":"c"}`}, "--kafka_consumer_properties configures the Kafka read"},
		{"consumer group without kafka", []string{"--input", "x", "--kafka_consumer_group", "g"}, "--kafka_consumer_group configures the Kafka read"},
		{"commit without kafka", []string{"--input", "x", "--kafka_commit_offsets"}, "--kafka_commit_offsets configures the Kafka read"},
		{"start offset without kafka", []string{"--input", "x", "--kafka_start_offset", "earliest"}, "--kafka_start_offset configures the Kafka read"},
		{"key as task id without kafka", []string{"--input", "x", "--task_id_from_key"}, "--task_id_from_key configures the Kafka read"},
		{"record limit without kafka", []string{"--input", "x", "--kafka_max_records", "5"}, "--kafka_max_records configures the Kafka read"},
		{"time limit without kafka", []string{"--kafka_max_read_secs", "5"}, "--kafka_max_read_secs configures the Kafka read"},
		{"commit without a group", append([]string{"--kafka_commit_offsets"}, kafka...), "--kafka_commit_offsets commits to a consumer group: it needs --kafka_consumer_group"},
		{"bad start offset", append([]string{"--kafka_start_offset", "yesterday"}, kafka...), `--kafka_start_offset "yesterday" is not accepted`},
		{"group in the properties", append([]string{`--kafka_consumer_properties={"group.id":"g"}`}, kafka...), `sets "group.id": use --kafka_consumer_group`},
		{"reset in the properties", append([]string{`--kafka_consumer_properties={"auto.offset.reset":"earliest"}`}, kafka...), `use --kafka_start_offset`},
		{"servers in the properties", append([]string{`--kafka_consumer_properties={"bootstrap.servers":"h:1"}`}, kafka...), `use --kafka_bootstrap_servers`},
		{"two task ids", append([]string{"--task_id_from_key", "--format", "json", "--task_id_field", "id"}, kafka...), "--task_id_from_key and --task_id_field"},
		{"no input", nil, "no input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := parseTplFlags(t, append(append([]string{}, tplSink...), tc.args...)...)
			_, s := beam.NewPipelineWithRoot()
			err := kafkatemplate.Build(s, *opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// Without http.url the records must carry their URL.
	opts := parseTplFlags(t, sinkArgs("project=p", "location=l", "queue=q")...)
	opts.Stdin = strings.NewReader("x\n")
	_, s := beam.NewPipelineWithRoot()
	err := kafkatemplate.Build(s, *opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--url_field")

	// The library's Options.Sink takes any option key; the body format must stay raw.
	opts = parseTplFlags(t, tplSink...)
	opts.Stdin = strings.NewReader("x\n")
	opts.Sink["format"] = "json"
	_, s = beam.NewPipelineWithRoot()
	err = kafkatemplate.Build(s, *opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "option key format=json")
}

// TestTemplateSecretFlagsAreNeverQuoted checks that what is wrong with a flag that may hold
// credentials (headers, consumer properties) is reported by Build naming the flag and at most
// a key, never a value: a flag parse error would quote the value.
func TestTemplateSecretFlagsAreNeverQuoted(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"header given twice", []string{`--cloudtasks_http_headers={"Authorization":"Bearer s3cr3t-1","Authorization":"Bearer s3cr3t-2"}`},
			`--cloudtasks_http_headers: name "Authorization" is given twice`},
		{"header names equal after folding", []string{`--cloudtasks_http_headers={"Authorization":"Bearer s3cr3t-1","authorization":"Bearer s3cr3t-2"}`},
			`--cloudtasks_http_headers header `},
		{"header value with a newline", []string{`--cloudtasks_http_headers={"Authorization":"Bearer s3cr3t\nX"}`}, `--cloudtasks_http_headers header "Authorization"`},
		{"headers not an object", []string{`--cloudtasks_http_headers=Authorization: Bearer s3cr3t`}, "--cloudtasks_http_headers: takes one JSON object"},
		{"header value not a string", []string{`--cloudtasks_http_headers={"Authorization":["s3cr3t"]}`}, `the value of "Authorization" must be a string`},
		{"text after the object", []string{`--cloudtasks_http_headers={"A":"b"} s3cr3t`}, "nothing after it"},
		{"property given twice", []string{`--kafka_consumer_properties={"sasl.jaas.config":"s3cr3t-1","sasl.jaas.config":"s3cr3t-2"}`},
			`--kafka_consumer_properties: name "sasl.jaas.config" is given twice`},
		{"properties not JSON", []string{`--kafka_consumer_properties=sasl.jaas.config=s3cr3t`}, "--kafka_consumer_properties: takes one JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := parseTplFlags(t, append(append([]string{}, tplSink...), tc.args...)...)
			opts.Stdin = strings.NewReader("x\n")
			_, s := beam.NewPipelineWithRoot()
			err := kafkatemplate.Build(s, *opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
		})
	}

	opts := parseTplFlags(t, "--kafka_topics", "a, b,,c", `--kafka_consumer_properties={"client.id":"c","max.poll.records":500,"check.crcs":true}`,
		`--cloudtasks_http_headers={"X-A":"1","X-B":""}`)
	assert.Equal(t, []string{"a", "b", "c"}, opts.Kafka.Topics)
	assert.Equal(t, map[string]string{"client.id": "c", "max.poll.records": "500", "check.crcs": "true"}, opts.Kafka.ConsumerConfig)
	assert.Equal(t, map[string]string{"http.headers.X-A": "1", "http.headers.X-B": ""}, opts.Sink)
}

// TestTemplateFlagsAreTheFlexTemplateParameters checks that metadata.json, the Flex Template
// spec, lists exactly the template's flags (every flag is a parameter, every parameter a
// flag) with the labels, help texts, optional marks, regexes and groups of the flag table, and
// no field the spec does not define; that the groups are the template's five, each listed in
// one run; that every cloudtasksio option key but the body format has a flag; and that the
// regexes compile. After a change to the flag table, regenerate the parameters with
// UPDATE_TEMPLATE_METADATA=1 go test -run TestTemplateFlagsAreTheFlexTemplateParameters ./integration/
func TestTemplateFlagsAreTheFlexTemplateParameters(t *testing.T) {
	const metadataFile = "../examples/kafka-to-cloudtasks/metadata.json"
	if os.Getenv("UPDATE_TEMPLATE_METADATA") == "1" {
		writeTemplateMetadata(t, metadataFile)
	}
	raw, err := os.ReadFile(metadataFile)
	require.NoError(t, err)
	var spec struct {
		Name        string               `json:"name"`
		Description string               `json:"description"`
		Streaming   bool                 `json:"streaming"`
		Parameters  []kafkatemplate.Flag `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&spec), "metadata.json holds only the fields of the flag table")
	assert.NotEmpty(t, spec.Name)
	assert.NotEmpty(t, spec.Description)

	fs := flag.NewFlagSet("kafka-to-cloudtasks", flag.ContinueOnError)
	kafkatemplate.RegisterFlags(fs)
	var flagNames, paramNames []string
	fs.VisitAll(func(f *flag.Flag) { flagNames = append(flagNames, f.Name) })
	for _, p := range spec.Parameters {
		paramNames = append(paramNames, p.Name)
	}
	assert.ElementsMatch(t, flagNames, paramNames, "every flag is a parameter of metadata.json and every parameter a flag")

	want := kafkatemplate.Flags()
	require.Len(t, spec.Parameters, len(want))
	for i, f := range want {
		p := spec.Parameters[i]
		assert.Equal(t, f.Name, p.Name, "parameter %d is in the flag table's order", i)
		assert.Equal(t, f.Label, p.Label, "label of %s", f.Name)
		assert.Equal(t, f.Help, p.Help, "helpText of %s", f.Name)
		assert.Equal(t, f.Optional, p.Optional, "isOptional of %s", f.Name)
		assert.Equal(t, f.Regexes, p.Regexes, "regexes of %s", f.Name)
		assert.Equal(t, f.Group, p.Group, "groupName of %s", f.Name)
		for _, re := range f.Regexes {
			_, err := regexp.Compile(re)
			assert.NoError(t, err, "regex of %s", f.Name)
		}
	}
	assert.Equal(t, []string{"cloudtasks_project", "cloudtasks_location", "cloudtasks_queue"}, requiredNames(want))

	// The groups, in the order the parameters list them: each once, the five of the template.
	var runs []string
	for _, p := range spec.Parameters {
		if len(runs) == 0 || runs[len(runs)-1] != p.Group {
			runs = append(runs, p.Group)
		}
	}
	assert.Equal(t, kafkatemplate.Groups(), runs, "every parameter is in one of the groups, and each group's parameters are listed together")
	group := map[string]string{}
	for _, p := range spec.Parameters {
		group[p.Name] = p.Group
	}
	for name, g := range map[string]string{
		"cloudtasks_queue": kafkatemplate.GroupTarget, "kafka_topics": kafkatemplate.GroupSource,
		"cloudtasks_sink_recovery_max_attempts": kafkatemplate.GroupSinkTuning, "dead_letter_topic": kafkatemplate.GroupFailureHandling,
		"cloudtasks_service_account_key_file": kafkatemplate.GroupCredentials,
	} {
		assert.Equal(t, g, group[name], "group of %s", name)
	}

	byKey := map[string]bool{}
	for _, f := range want {
		if f.OptionKey != "" {
			byKey[f.OptionKey] = true
		}
	}
	for _, k := range append(cloudtasksio.OptionKeys(), cloudtasksio.OptionHeaderPrefixes()...) {
		if k == "format" {
			continue // the template's body is always the record's value (raw)
		}
		assert.True(t, byKey[k], "option key %q has no template flag", k)
	}
}

// A flag given twice is a mistake the template reports, naming the flag and neither value,
// instead of keeping the last one.
func TestTemplateRepeatedFlagIsAnErrorNamingIt(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cloudtasks_http_url=http://127.0.0.1:1/a", "--cloudtasks_http_url=http://127.0.0.1:1/b"}, "--cloudtasks_http_url is given more than once"},
		{[]string{`--cloudtasks_http_headers={"Authorization":"Bearer s3cr3t-1"}`, `--cloudtasks_http_headers={"X-A":"s3cr3t-2"}`}, "--cloudtasks_http_headers is given more than once"},
		{[]string{"--format", "raw", "--format=json"}, "--format is given more than once"},
		{[]string{"--kafka_commit_offsets", "--kafka_commit_offsets=false"}, "--kafka_commit_offsets is given more than once"},
	} {
		opts := parseTplFlags(t, append(append([]string{}, tplSink...), tc.args...)...)
		opts.Stdin = strings.NewReader("x\n")
		_, s := beam.NewPipelineWithRoot()
		err := kafkatemplate.Build(s, *opts)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "s3cr3t")
		assert.NotContains(t, err.Error(), "127.0.0.1:1/")
	}
	// Given once, each still parses as before (a boolean flag without a value included).
	opts := parseTplFlags(t, "--kafka_commit_offsets", "--format=json")
	assert.True(t, opts.Kafka.CommitOffsets)
	assert.Equal(t, "json", opts.Format)
}

// The usage text lists the template's own flags first, under their groups, and every other
// flag of the program (Beam's) apart, after them.
func TestTemplateUsageListsItsOwnFlagsApartFromBeams(t *testing.T) {
	fs := flag.NewFlagSet("kafka-to-cloudtasks", flag.ContinueOnError)
	kafkatemplate.RegisterFlags(fs)
	fs.String("runner", "", "Pipeline runner.") // stands for Beam's flags on flag.CommandLine
	var out strings.Builder
	kafkatemplate.PrintUsage(&out, fs)
	usage := out.String()

	beamAt := strings.Index(usage, "Beam's flags")
	require.Positive(t, beamAt, usage)
	ours, beams := usage[:beamAt], usage[beamAt:]
	last := 0
	for _, g := range kafkatemplate.Groups() {
		at := strings.Index(ours, "\n  "+g+"\n")
		require.Positive(t, at, "group %q is a heading of the template's part", g)
		assert.Greater(t, at, last, "groups in order")
		last = at
	}
	for _, f := range kafkatemplate.Flags() {
		entry := "    --" + f.Name + "\n"
		if !f.Optional {
			entry = "    --" + f.Name + " (required)\n"
		}
		assert.Contains(t, ours, entry, "template flag %s in the template's part", f.Name)
		assert.NotContains(t, beams, "-"+f.Name+" ", "template flag %s not among Beam's", f.Name)
	}
	assert.Contains(t, ours, "--cloudtasks_project (required)")
	assert.Contains(t, beams, "-runner string\n")
	assert.NotContains(t, ours, "runner string")
}

// writeTemplateMetadata rewrites the parameters of the metadata file from the flag table,
// keeping its other fields.
func writeTemplateMetadata(t *testing.T, name string) {
	t.Helper()
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	var spec map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &spec))
	spec["parameters"], err = json.Marshal(kafkatemplate.Flags())
	require.NoError(t, err)
	out, err := json.MarshalIndent(spec, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(name, append(out, '\n'), 0o644))
	t.Logf("rewrote the parameters of %s from the flag table", name)
}

func requiredNames(flags []kafkatemplate.Flag) []string {
	var out []string
	for _, f := range flags {
		if !f.Optional {
			out = append(out, f.Name)
		}
	}
	return out
}

// TestTemplateKafkaModeExpandsThroughTheExpansionService checks that Kafka flags select the
// cross-language read: with no expansion service listening, Build reports the failed
// expansion instead of panicking.
func TestTemplateKafkaModeExpandsThroughTheExpansionService(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())

	opts := parseTplFlags(t, append(append([]string{}, tplSink...), "--kafka_bootstrap_servers", "127.0.0.1:9092",
		"--kafka_topics", "orders", "--expansion_addr", closed,
		`--kafka_consumer_properties={"sasl.jaas.config":"s3cr3t"}`)...)
	_, s := beam.NewPipelineWithRoot()
	err = kafkatemplate.Build(s, *opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--expansion_addr")
	assert.Contains(t, err.Error(), "kafka_read", "the Kafka read's URN was sent for expansion")
	assert.Contains(t, err.Error(), "connection refused")
	assert.NotContains(t, err.Error(), "s3cr3t", "consumer properties may hold credentials")
}

// templateFlagRegex is the one regex of metadata.json for the template flag of option key key.
func templateFlagRegex(f *testing.F, key string) *regexp.Regexp {
	f.Helper()
	for _, fl := range kafkatemplate.Flags() {
		if strings.Contains(fl.Help, "(option key "+key+")") {
			require.Len(f, fl.Regexes, 1)
			return regexp.MustCompile(fl.Regexes[0])
		}
	}
	f.Fatalf("no flag for %s", key)
	return nil
}

// FuzzTemplateDurationRegexTakesWhatTheOptionsTake checks the duration parameters' regex of
// metadata.json against cloudtasksio.ConfigFromOptions: the regex matches a value exactly when
// the option parser reads it as a duration (whatever it then says of its range: zero, negative,
// too long). Its seeds are both forms, values without a unit or with spaces around them, and
// letters that only Unicode case folding turns into a unit (ſ, İ, Μ).
func FuzzTemplateDurationRegexTakesWhatTheOptionsTake(f *testing.F) {
	re := templateFlagRegex(f, "sink.staged.clock-skew-allowance")
	for _, v := range []string{
		"1h", "90m", "1h30m", "1.5h", ".5s", "5.s", "+10s", "-10s", "0", "+0", "-0", "-0s", "1µs", "1μs",
		"1 h", "90 min", "2 Days", "3600 seconds", "10 MS", "1d", "0 ms", "007 s",
		"3600", " 1 h", "1 h ", "1	h", "1 h 30 min", "-1 h", "1 parsec", ".s", "1.5 s", "",
		"1 ſ", "10 mſ", "1 MİN", "1 mİllis", "1 ΜS", "106752 d", "2562048h", "99999999999999999999 ns",
	} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.TrimSpace(v) == "" {
			return // refused as blank before it is parsed, and the flag is left unset
		}
		_, err := cloudtasksio.ConfigFromOptions(map[string]string{
			"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/",
			"sink.delivery-guarantee": "exactly-once", "sink.staged.clock-skew-allowance": v,
		})
		parsed := err == nil || !strings.Contains(err.Error(), "is not a duration")
		if re.MatchString(v) != parsed {
			t.Errorf("%q: the regex matches: %v; ConfigFromOptions: %v", v, re.MatchString(v), err)
		}
	})
}

// FuzzTemplateRateRegexTakesWhatTheOptionsTake checks the start rate parameter's regex of
// metadata.json against cloudtasksio.ConfigFromOptions: the regex matches a value exactly when
// the option parser reads it as a decimal number (whatever it then says of its range).
func FuzzTemplateRateRegexTakesWhatTheOptionsTake(f *testing.F) {
	re := templateFlagRegex(f, "sink.in-flight.adaptive-start-rate")
	for _, v := range []string{"125", "62.5", "0.5", "0", "0.4", "007.50", "1000001", "1e3", "1E3", "+5", "-5", ".5", "5.",
		"1_000", "0x1p4", "NaN", "inf", " 5", "5 ", "1,5", "١٢٣", "12\n"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.TrimSpace(v) == "" {
			return // refused as blank before it is parsed
		}
		_, err := cloudtasksio.ConfigFromOptions(map[string]string{
			"project": "p", "location": "l", "queue": "q", "http.url": "https://example.com/",
			"sink.in-flight.adaptive-start-rate": v,
		})
		parsed := err == nil || !strings.Contains(err.Error(), "is not a decimal number")
		if re.MatchString(v) != parsed {
			t.Errorf("%q: the regex matches: %v; ConfigFromOptions: %v", v, re.MatchString(v), err)
		}
	})
}
