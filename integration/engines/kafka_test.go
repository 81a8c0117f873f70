package engines

// The Kafka-to-Cloud-Tasks template (examples/kafka-to-cloudtasks) reading a real Kafka broker
// through Beam's cross-language KafkaIO: the test produces records with franz-go, the template
// runs with its own flags, and the in-process Cloud Tasks server dispatches the tasks to a
// loopback receiver.
//
// The Java side of the read needs the broker (KAFKA_BOOTSTRAP_SERVERS) and Beam's Java IO
// expansion service (BEAM_EXPANSION_ADDR), whose default environment is an EXTERNAL Java
// worker pool that .ci/engines starts beside it, so no Docker is involved. The Go side runs
// LOOPBACK in this process. The cases run on prism, on the Python SDK's job service when
// BEAM_PYTHON_JOB_ENDPOINT is set (its runner hands the Java stages to the same Java worker
// pool), and on Flink when BEAM_FLINK_ENDPOINT is set.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
	"github.com/beam-cloudtasks/beam-cloudtasks/examples/kafka-to-cloudtasks/kafkatemplate"
)

// Variables naming the Kafka suite's services; .ci/engines starts them and sets both.
const (
	kafkaBootstrapEnv = "KAFKA_BOOTSTRAP_SERVERS"
	expansionAddrEnv  = "BEAM_EXPANSION_ADDR"
)

// kafkaEnv is one Kafka case's services: the broker, a client of it, and the expansion service.
type kafkaEnv struct {
	Brokers   string
	Expansion string
	client    *kgo.Client
}

// newKafkaEnv skips t, naming the variable, unless both services are given.
func newKafkaEnv(t *testing.T) *kafkaEnv {
	t.Helper()
	env := &kafkaEnv{
		Brokers:   requireEnv(t, kafkaBootstrapEnv, "the bootstrap servers (host:port) of a Kafka broker"),
		Expansion: requireEnv(t, expansionAddrEnv, "the address (host:port) of Beam's Java IO expansion service with a Docker-free default environment"),
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(env.Brokers, ",")...), kgo.RequiredAcks(kgo.AllISRAcks()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	env.client = cl
	return env
}

// kafkaEngines are the engines the Kafka cases run on: prism always, the Python job service
// and Flink when they are given.
func kafkaEngines() []engine {
	engines := []engine{prismEngine()}
	if ep := os.Getenv(pythonEndpointEnv); ep != "" {
		engines = append(engines, pythonJobService(ep))
	}
	if ep := os.Getenv(flinkEndpointEnv); ep != "" {
		engines = append(engines, flinkJobServer(ep))
	}
	return engines
}

// newTopic creates a topic with partitions partitions, named after t and unique to the run.
func (k *kafkaEnv) newTopic(t *testing.T, partitions int32) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()), time.Now().UnixNano())
	resp, err := kadm.NewClient(k.client).CreateTopic(context.Background(), partitions, 1, nil, name)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return name
}

// produce writes the records to topic, each to the partition its key hashes to (records
// without a key go round the partitions), and returns them with their partitions and offsets.
func (k *kafkaEnv) produce(t *testing.T, topic string, records ...*kgo.Record) []*kgo.Record {
	t.Helper()
	for _, r := range records {
		r.Topic = topic
	}
	res := k.client.ProduceSync(context.Background(), records...)
	require.NoError(t, res.FirstErr())
	return records
}

// delivery is one request the receiver got.
type delivery struct {
	Path    string
	Body    []byte
	Headers http.Header
}

// bodyReceiver is a loopback HTTP target that keeps every request it is sent.
type bodyReceiver struct {
	URL string

	mu  sync.Mutex
	got []delivery
}

func newBodyReceiver(t *testing.T) *bodyReceiver {
	t.Helper()
	r := &bodyReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, delivery{Path: req.URL.Path, Body: body, Headers: req.Header.Clone()})
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *bodyReceiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// runKafkaTemplate parses the template's flags as its main does, builds the pipeline and runs
// it on e.
func runKafkaTemplate(t *testing.T, e engine, args ...string) beam.PipelineResult {
	t.Helper()
	fs := flag.NewFlagSet("kafka-to-cloudtasks", flag.ContinueOnError)
	opts := kafkatemplate.RegisterFlags(fs)
	require.NoError(t, fs.Parse(args))
	p, s := beam.NewPipelineWithRoot()
	require.NoError(t, kafkatemplate.Build(s, *opts))
	return e.mustRun(t, p)
}

// templateArgs are the flags pointing the template at k, topic, the server's queue and url;
// the read stops after maxRecords records, read from the start of the topic. A flag in extra
// replaces the default of the same name (the template refuses a flag given twice).
func (k *kafkaEnv) templateArgs(ct *cloudTasks, topic, url string, maxRecords int, extra ...string) []string {
	defaults := []string{
		"--kafka_bootstrap_servers=" + k.Brokers, "--kafka_topics=" + topic, "--expansion_addr=" + k.Expansion,
		"--kafka_start_offset=earliest", fmt.Sprintf("--kafka_max_records=%d", maxRecords),
		"--cloudtasks_project=" + ct.Queue.Project, "--cloudtasks_location=" + ct.Queue.Location,
		"--cloudtasks_queue=" + ct.Queue.Name, "--cloudtasks_emulator_endpoint=" + ct.Addr,
		"--cloudtasks_http_url=" + url,
	}
	name := func(arg string) string { n, _, _ := strings.Cut(arg, "="); return n }
	given := map[string]bool{}
	for _, arg := range extra {
		given[name(arg)] = true
	}
	var args []string
	for _, arg := range defaults {
		if !given[name(arg)] {
			args = append(args, arg)
		}
	}
	return append(args, extra...)
}

func TestKafkaTemplateJSONRecordsBecomeTasksWithTheirBodiesAndHeaders(t *testing.T) {
	k := newKafkaEnv(t)
	for _, e := range kafkaEngines() {
		t.Run(e.Name, func(t *testing.T) {
			const n = 200
			topic := k.newTopic(t, 2)
			var records []*kgo.Record
			want := map[string]bool{}
			for i := range n {
				body := fmt.Sprintf(`{"id":"o-%03d","qty":%d,"note":"東京"}`, i, i)
				want[body] = true
				records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("o-%03d", i)), Value: []byte(body)})
			}
			k.produce(t, topic, records...)

			ct := newCloudTasks(t)
			rcv := newBodyReceiver(t)
			pr := runKafkaTemplate(t, e, k.templateArgs(ct, topic, rcv.URL+"/orders", n,
				"--format=json", "--task_id_field=id", `--cloudtasks_http_headers={"X-Source":"kafka"}`)...)
			ct.waitDrained(t)

			got := rcv.deliveries()
			require.Len(t, got, n, "one delivery per record")
			for _, d := range got {
				assert.True(t, want[string(d.Body)], "a body that is not a record: %.80q", d.Body)
				delete(want, string(d.Body))
				assert.Equal(t, "/orders", d.Path)
				assert.Equal(t, "application/json", d.Headers.Get("Content-Type"))
				assert.Equal(t, "kafka", d.Headers.Get("X-Source"))
				var rec struct{ ID string }
				require.NoError(t, json.Unmarshal(d.Body, &rec))
				assert.Equal(t, cloudtasksio.TaskID(rec.ID), d.Headers.Get("X-CloudTasks-TaskName"), "the task is named by --task_id_field")
			}
			assert.Empty(t, want, "records never delivered")
			if c := sinkCounters(pr, cloudtasksio.MetricsNamespace); len(c) > 0 {
				assert.Equal(t, int64(n), c[cloudtasksio.MetricRecordsSend])
			} else {
				t.Logf("%s returned no metrics; checked the server and the receiver only", e.Name)
			}
		})
	}
}

func TestKafkaTemplateRawRecordsAreSentByteForByte(t *testing.T) {
	k := newKafkaEnv(t)
	for _, e := range kafkaEngines() {
		t.Run(e.Name, func(t *testing.T) {
			topic := k.newTopic(t, 1)
			values := [][]byte{[]byte("plain text"), {0x00, 0xff, 0xfe, '\n', 0x01}, []byte("not json {"), {}}
			var records []*kgo.Record
			for _, v := range values {
				records = append(records, &kgo.Record{Value: v}) // no key: Kafka's null key
			}
			k.produce(t, topic, records...)

			ct := newCloudTasks(t)
			rcv := newBodyReceiver(t)
			runKafkaTemplate(t, e, k.templateArgs(ct, topic, rcv.URL+"/raw", len(values),
				"--cloudtasks_http_method=PUT", `--cloudtasks_http_headers={"Content-Type":"application/octet-stream"}`)...)
			ct.waitDrained(t)

			var bodies []string
			for _, d := range rcv.deliveries() {
				bodies = append(bodies, string(d.Body))
				assert.Equal(t, "application/octet-stream", d.Headers.Get("Content-Type"))
			}
			var want []string
			for _, v := range values {
				want = append(want, string(v))
			}
			assert.ElementsMatch(t, want, bodies, "each value is the body, unchanged, keyless records included")
		})
	}
}

func TestKafkaTemplateRecordKeyNamesTheTaskSoARereadCreatesNothing(t *testing.T) {
	k := newKafkaEnv(t)
	for _, e := range kafkaEngines() {
		t.Run(e.Name, func(t *testing.T) {
			const n = 50
			topic := k.newTopic(t, 2)
			var records []*kgo.Record
			for i := range n {
				records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("key-%02d", i)), Value: []byte(fmt.Sprintf("value %d", i))})
			}
			k.produce(t, topic, records...)

			ct := newCloudTasks(t)
			rcv := newBodyReceiver(t)
			args := k.templateArgs(ct, topic, rcv.URL+"/keyed", n, "--task_id_from_key")
			runKafkaTemplate(t, e, args...)
			ct.waitDrained(t)
			first := ct.Stats()

			// The whole topic again, from its start: every task name exists (as a tombstone once
			// dispatched), so the service refuses each create and nothing new is delivered.
			pr := runKafkaTemplate(t, e, args...)
			ct.waitDrained(t)
			second := ct.Stats()

			assert.Equal(t, n, first.TasksCreated, "the first read creates one task per record")
			assert.Equal(t, n, second.TasksCreated, "the re-read creates nothing")
			assert.Equal(t, n, second.AlreadyExists-first.AlreadyExists, "every create of the re-read is ALREADY_EXISTS")
			byTask := map[string]int{}
			for _, d := range rcv.deliveries() {
				byTask[d.Headers.Get("X-CloudTasks-TaskName")]++
			}
			require.Len(t, byTask, n)
			for i := range n {
				assert.Equal(t, 1, byTask[cloudtasksio.TaskID(fmt.Sprintf("key-%02d", i))], "key-%02d delivered once", i)
			}
			if c := sinkCounters(pr, cloudtasksio.MetricsNamespace); len(c) > 0 {
				assert.Equal(t, int64(n), c[cloudtasksio.MetricTasksDeduplicated], "the re-read counts each record deduplicated")
			}
		})
	}
}

func TestKafkaTemplateUnreadableRecordIsADeadLetterThatKeepsTheRecord(t *testing.T) {
	k := newKafkaEnv(t)
	for _, e := range kafkaEngines() {
		t.Run(e.Name, func(t *testing.T) {
			topic := k.newTopic(t, 2)
			produced := k.produce(t, topic,
				&kgo.Record{Key: []byte("good-1"), Value: []byte(`{"id":"good-1"}`)},
				&kgo.Record{Key: []byte("bad-json"), Value: []byte("not json \xff")},
				&kgo.Record{Key: []byte("good-2"), Value: []byte(`{"id":"good-2"}`)},
				&kgo.Record{Key: []byte("no-id"), Value: []byte(`{"qty":1}`)},
				&kgo.Record{Value: []byte(`["keyless array"]`)},
			)
			unreadable := map[string]*kgo.Record{} // by value
			for _, r := range []*kgo.Record{produced[1], produced[3], produced[4]} {
				unreadable[string(r.Value)] = r
			}

			const deadTopic = "projects/engines/topics/kafka-rejected"
			ps := newPubSubTopic(t, deadTopic)

			ct := newCloudTasks(t)
			rcv := newBodyReceiver(t)
			runKafkaTemplate(t, e, k.templateArgs(ct, topic, rcv.URL+"/orders", len(produced),
				"--format=json", "--task_id_field=id",
				"--dead_letter_topic="+deadTopic, "--dead_letter_emulator_endpoint="+ps.Addr)...)
			ct.waitDrained(t)

			var delivered []string
			for _, d := range rcv.deliveries() {
				delivered = append(delivered, string(d.Body))
			}
			assert.ElementsMatch(t, []string{`{"id":"good-1"}`, `{"id":"good-2"}`}, delivered)

			msgs := ps.Messages()
			require.Len(t, msgs, len(unreadable), "one dead letter per unreadable record")
			for _, m := range msgs {
				assert.Equal(t, cloudtasksio.CodeSerialization, m.Attributes[pubsubdl.AttrCode])
				assert.Equal(t, ct.Queue.Path(), m.Attributes[pubsubdl.AttrDestination])
				fe, _, err := pubsubdl.FromMessage(&pubsub.Message{Data: m.Data, Attributes: m.Attributes})
				require.NoError(t, err)
				var rec kafkatemplate.Record
				require.NoError(t, json.Unmarshal(fe.Payload, &rec), "the dead letter carries the record as JSON")
				want, ok := unreadable[string(rec.Value)]
				require.True(t, ok, "a dead letter of a record that was readable: %.80q", rec.Value)
				assert.NotContains(t, m.Attributes[pubsubdl.AttrError], string(rec.Value), "the error never carries the record")
				assert.Equal(t, topic, rec.Topic)
				assert.Equal(t, want.Partition, rec.Partition, "partition of %q", want.Value)
				assert.Equal(t, want.Offset, rec.Offset, "offset of %q", want.Value)
				assert.Equal(t, want.Key, rec.Key, "key of %q (nil when the record has none)", want.Value)
				delete(unreadable, string(rec.Value))
			}
			assert.Empty(t, unreadable, "unreadable records without a dead letter")
		})
	}
}

func TestKafkaTemplateCommittedOffsetsResumeTheConsumerGroup(t *testing.T) {
	k := newKafkaEnv(t)
	for _, e := range kafkaEngines() {
		t.Run(e.Name, func(t *testing.T) {
			const n = 20
			topic := k.newTopic(t, 1)
			group := topic + "-group"
			batch := func(from int) []*kgo.Record {
				var rs []*kgo.Record
				for i := from; i < from+n; i++ {
					rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%02d", i)), Value: []byte(fmt.Sprintf("value %d", i))})
				}
				return rs
			}
			k.produce(t, topic, batch(0)...)
			ct := newCloudTasks(t)
			rcv := newBodyReceiver(t)
			args := k.templateArgs(ct, topic, rcv.URL+"/keyed", n, "--task_id_from_key",
				"--kafka_consumer_group="+group, "--kafka_commit_offsets")
			runKafkaTemplate(t, e, args...)

			offsets, err := kadm.NewClient(k.client).FetchOffsets(context.Background(), group)
			require.NoError(t, err)
			committed, ok := offsets.Lookup(topic, 0)
			require.True(t, ok, "the read committed an offset for partition 0 of its group")
			assert.Equal(t, int64(n), committed.At, "the committed offset is past the last record read")

			// New records, and a second job of the same group: it resumes at the committed offset
			// (--kafka_start_offset=earliest applies only without one), so it reads only them.
			k.produce(t, topic, batch(n)...)
			runKafkaTemplate(t, e, args...)
			ct.waitDrained(t)
			assert.Equal(t, 2*n, ct.Stats().TasksCreated, "the second job created the new records' tasks")
			assert.Zero(t, ct.Stats().AlreadyExists, "the second job read none of the first job's records")
		})
	}
}

func TestKafkaTemplateStartTimeSkipsEarlierRecords(t *testing.T) {
	k := newKafkaEnv(t)
	for _, e := range kafkaEngines() {
		t.Run(e.Name, func(t *testing.T) {
			const n = 10
			topic := k.newTopic(t, 2)
			// Records carry the producer's timestamps (Kafka's CreateTime): n an hour old, n
			// from the last minute. The start time lies between them.
			now := time.Now().Truncate(time.Second)
			start := now.Add(-30 * time.Minute)
			var records []*kgo.Record
			for i := range 2 * n {
				at := now.Add(-time.Hour)
				if i >= n {
					at = now.Add(-time.Minute)
				}
				records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("key-%02d", i)), Value: []byte(fmt.Sprintf("value %d", i)), Timestamp: at})
			}
			k.produce(t, topic, records...)

			ct := newCloudTasks(t)
			rcv := newBodyReceiver(t)
			args := k.templateArgs(ct, topic, rcv.URL+"/late", n, "--kafka_start_offset="+start.UTC().Format(time.RFC3339))
			runKafkaTemplate(t, e, args...)
			ct.waitDrained(t)

			var bodies []string
			for _, d := range rcv.deliveries() {
				bodies = append(bodies, string(d.Body))
			}
			var want []string
			for i := n; i < 2*n; i++ {
				want = append(want, fmt.Sprintf("value %d", i))
			}
			assert.ElementsMatch(t, want, bodies, "only the records at or after the start time are read")
		})
	}
}
