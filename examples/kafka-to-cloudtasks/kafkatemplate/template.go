// Package kafkatemplate is the pipeline of the Kafka-to-Cloud-Tasks template
// (examples/kafka-to-cloudtasks): it reads records from Kafka (through Beam's cross-language
// Kafka read), from local files or from stdin, and writes one Cloud Task per record with
// cloudtasksio. Each record's value becomes the task's body unchanged; with JSON records, named
// fields of the value can supply the task id, the URL and the schedule time.
//
// It is a library beside the template's main so that the same pipeline can be built by that
// main and by the integration tests; it is not an API. https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/template.md is the user guide.
package kafkatemplate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // gs:// inputs
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*HTTPRecord)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*AppEngineRecord)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Record)(nil)).Elem())
	register.DoFn4x1[context.Context, Record, func(HTTPRecord), func(deadletter.FailedElement), error](&httpRecordFn{})
	register.DoFn4x1[context.Context, Record, func(AppEngineRecord), func(deadletter.FailedElement), error](&appEngineRecordFn{})
	register.Emitter1[HTTPRecord]()
	register.Emitter1[AppEngineRecord]()
	register.Emitter1[deadletter.FailedElement]()
	register.Emitter1[Record]()
	register.Function1x2(httpRecordKey)
	register.Function1x2(appEngineRecordKey)
	register.Function2x0(lineBytes)
}

// Values of Options.Format.
const (
	// FormatRaw sends each value as the body, bytes as they are (the default).
	FormatRaw = "raw"
	// FormatJSON requires each value to be one JSON document, sends it unchanged as the body
	// with Content-Type application/json (unless a Content-Type header is configured), and
	// lets the field options pick task metadata out of it.
	FormatJSON = "json"
)

// Values of Options.OnFailure.
const (
	// OnFailureFail fails the bundle (and so, on prism and Flink, the job): the default
	// without Options.DeadLetterTopic.
	OnFailureFail = "fail"
	// OnFailureLogAndDrop logs a warning for a rejected record and drops it: one per record
	// the template could not read, and for tasks the sink rejects cloudtasksio's LogAndDrop
	// lines (the first 10 of a bundle one by one, then one line with the count of the rest).
	OnFailureLogAndDrop = "log-and-drop"
	// OnFailureDeadLetter publishes rejected records to Options.DeadLetterTopic.
	OnFailureDeadLetter = "dead-letter"
)

// MetricsNamespace is the Beam metrics namespace of the template's own counters:
// recordsRejected counts records whose value could not be read (not JSON, a field of the wrong
// type), whatever the failure policy does with them.
const MetricsNamespace = "kafka-to-cloudtasks"

// Options configure the template. The flags of RegisterFlags fill them.
type Options struct {
	// Sink holds the cloudtasksio option keys (https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md), for example "project",
	// "http.url" or "sink.recovery.max-attempts"; the cloudtasks_* flags fill it (see
	// SinkFlagName). Its "format" may be left out or be "raw": the body is always the record's
	// value.
	Sink map[string]string
	// Format says what the record values are: FormatRaw (the default) or FormatJSON.
	Format string
	// TaskIDField names a top-level field of JSON values whose value (a string, or a number
	// taken as its JSON text) is the task's deduplication key: the task is named
	// cloudtasksio.TaskID(key), so a record seen again is created once. A record without it is
	// rejected. Empty: tasks are not named.
	TaskIDField string
	// TaskIDFromKey names each task after its Kafka record key (the key's bytes are the
	// deduplication key), so a re-read of the topic creates nothing new. A record without a key
	// is rejected. Kafka only; excludes TaskIDField.
	TaskIDFromKey bool
	// URLField names a top-level string field of JSON values holding the task's URL (for an
	// App Engine target, its relative URI). A record without it uses http.url
	// (app-engine.relative-uri).
	URLField string
	// ScheduleTimeField names a top-level field of JSON values holding an RFC 3339 time
	// ("2026-05-01T09:30:00Z") at which the task is dispatched. A record without it is
	// dispatched as soon as the queue allows.
	ScheduleTimeField string

	// Input is a file pattern (textio glob, for example "/data/orders-*.jsonl" or
	// "gs://bucket/in/*") of files with one record per line. Empty lines are skipped.
	Input string
	// Stdin supplies records, one per line, when neither Input nor Kafka is set. It is read
	// completely while the pipeline is built.
	Stdin io.Reader
	// Kafka reads records from Kafka when Kafka.BootstrapServers is set.
	Kafka KafkaOptions

	// OnFailure decides what happens to a record that cannot become a task (its value cannot
	// be read, the task is invalid, Cloud Tasks rejects it as INVALID_ARGUMENT): OnFailureFail,
	// OnFailureLogAndDrop or OnFailureDeadLetter. Empty means OnFailureDeadLetter when
	// DeadLetterTopic is set and OnFailureFail otherwise.
	OnFailure string
	// DeadLetterTopic is the Pub/Sub topic ("projects/P/topics/T") that receives rejected
	// records as deadletter.FailedElement messages. It must exist.
	DeadLetterTopic string
	// DeadLetterEmulatorEndpoint points the dead-letter publisher at a Pub/Sub emulator
	// ("host:port"). Without it the publisher uses the sink's service-account-key-file, or
	// application-default credentials.
	DeadLetterEmulatorEndpoint string

	// flagProblems collects what was wrong with the JSON-object flags while they were parsed;
	// Build reports the first. See jsonMapValue for why these are not flag parse errors.
	flagProblems *[]string
}

// KafkaOptions select Beam's cross-language Kafka read, which runs in Java: the runner must
// support cross-language transforms (Flink and Dataflow do; so does prism with a Java SDK
// harness), and an expansion service must be reachable while the pipeline is built.
type KafkaOptions struct {
	// ExpansionAddr is the "host:port" of the Java IO expansion service
	// (beam-sdks-java-io-expansion-service). Empty lets Beam download and start it, which
	// needs Java and network access.
	ExpansionAddr string
	// BootstrapServers is Kafka's bootstrap.servers list ("host:9092,host2:9092").
	BootstrapServers string
	// Topics are the topics to read.
	Topics []string
	// ConsumerGroup is the consumer group id (group.id).
	ConsumerGroup string
	// CommitOffsets commits the read's offsets to ConsumerGroup when Beam finalizes a
	// checkpoint, so a later job of the same group resumes where this one stopped.
	CommitOffsets bool
	// StartOffset says where a partition without a committed offset starts: "earliest",
	// "latest" (empty: Kafka's default, latest), or an RFC 3339 time: the first record at or
	// after it, in every partition.
	StartOffset string
	// ConsumerConfig are extra Kafka consumer properties, for example security.protocol and
	// the sasl.* or ssl.* properties. The properties that a field above sets are rejected
	// here. Values are never printed.
	ConsumerConfig map[string]string
	// MaxNumRecords stops reading after this many records (0: unbounded).
	MaxNumRecords int64
	// MaxReadSecs stops reading after this many seconds (0: unbounded).
	MaxReadSecs int64
}

// HTTPRecord is the element the template writes to an HTTP target: the record's value as the
// raw body, plus the metadata read from it.
type HTTPRecord struct {
	// Value is the body.
	Value []byte `json:"value"`
	// Key is the deduplication key (with Options.TaskIDField); it is not part of the body.
	Key string `json:"-"`
	// URL overrides http.url when not empty.
	URL string `cloudtasks:"url"`
	// ScheduleTime delays dispatch; zero means now.
	ScheduleTime time.Time `cloudtasks:"schedule-time"`
}

// AppEngineRecord is HTTPRecord for an App Engine target.
type AppEngineRecord struct {
	// Value is the body.
	Value []byte `json:"value"`
	// Key is the deduplication key (with Options.TaskIDField); it is not part of the body.
	Key string `json:"-"`
	// RelativeURI overrides app-engine.relative-uri when not empty.
	RelativeURI string `cloudtasks:"relative-uri"`
	// ScheduleTime delays dispatch; zero means now.
	ScheduleTime time.Time `cloudtasks:"schedule-time"`
}

// httpRecordKey and appEngineRecordKey are the sink's TaskIDFn: the key read from the record
// (the record reader rejects records without one, so it is never empty here).
func httpRecordKey(r HTTPRecord) (string, error)           { return r.Key, nil }
func appEngineRecordKey(r AppEngineRecord) (string, error) { return r.Key, nil }

// Record is one input record: its value and, for a Kafka record, its key and where it was
// read. As the payload of a dead letter (code SERIALIZATION) it is JSON, with the key and
// value in base64, so that the record can be replayed.
type Record struct {
	// Topic, Partition and Offset say where a Kafka record was read; empty for files and stdin.
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Key is the Kafka record's key; nil when it has none (and for files and stdin).
	Key []byte `json:"key"`
	// Value is the record's value: a line of the input, or the Kafka record's value (nil for a
	// Kafka record without one).
	Value []byte `json:"value"`
}

// lineBytes turns a text line into a record, dropping a CR left by CRLF line ends and skipping
// empty lines.
func lineBytes(line string, emit func(Record)) {
	line = strings.TrimSuffix(line, "\r")
	if line != "" {
		emit(Record{Value: []byte(line)})
	}
}

// Build adds the template's pipeline to s: the source, the record reader and the Cloud Tasks
// sink (plus the dead-letter publisher). Every configuration error is returned here, naming
// the flag or option key at fault; nothing is checked later on a worker.
func Build(s beam.Scope, o Options) error {
	cfg, spec, err := configure(o)
	if err != nil {
		return err
	}
	values, err := source(s, o)
	if err != nil {
		return err
	}
	var records, rejected beam.PCollection
	if cfg.AppEngine != nil {
		records, rejected = beam.ParDo2(s.Scope("ReadRecords"), &appEngineRecordFn{Spec: spec}, values)
	} else {
		records, rejected = beam.ParDo2(s.Scope("ReadRecords"), &httpRecordFn{Spec: spec}, values)
	}
	deadLetters, err := cloudtasksio.TryWrite(s, cfg, records)
	if err != nil {
		return err
	}
	if cfg.OnFailure != cloudtasksio.DeadLetter {
		return nil
	}
	all := beam.Flatten(s, deadLetters, rejected)
	pub := pubsubdl.DefaultPubSubConfig(o.DeadLetterTopic)
	pub.EmulatorEndpoint = o.DeadLetterEmulatorEndpoint
	if pub.EmulatorEndpoint == "" {
		pub.ServiceAccountKeyFile = cfg.ServiceAccountKeyFile
	}
	if err := pubsubdl.TryToPubSub(s, pub, all); err != nil {
		return fmt.Errorf("%s: %w", deadLetterFlagOf(err), err)
	}
	return nil
}

// deadLetterFlagOf names the flag behind a dead-letter publisher setting the error blames: the
// emulator endpoint and the key file have flags of their own; everything else comes from
// --dead_letter_topic.
func deadLetterFlagOf(err error) string {
	var ce *pubsubdl.ConfigError
	if errors.As(err, &ce) {
		switch ce.Field {
		case "EmulatorEndpoint":
			return "--dead_letter_emulator_endpoint"
		case "ServiceAccountKeyFile":
			return "--" + SinkFlagName("service-account-key-file")
		}
	}
	return "--dead_letter_topic"
}

// source returns the records as a PCollection<Record>.
func source(s beam.Scope, o Options) (beam.PCollection, error) {
	kafka := o.Kafka.BootstrapServers != "" || len(o.Kafka.Topics) > 0
	if !kafka {
		// Flags that only configure the Kafka read would be ignored: say so instead.
		for _, f := range []struct {
			flag string
			set  bool
		}{
			{"--expansion_addr", o.Kafka.ExpansionAddr != ""},
			{"--kafka_consumer_group", o.Kafka.ConsumerGroup != ""},
			{"--kafka_commit_offsets", o.Kafka.CommitOffsets},
			{"--kafka_start_offset", o.Kafka.StartOffset != ""},
			{"--kafka_consumer_properties", len(o.Kafka.ConsumerConfig) > 0},
			{"--kafka_max_records", o.Kafka.MaxNumRecords != 0},
			{"--kafka_max_read_secs", o.Kafka.MaxReadSecs != 0},
			{"--task_id_from_key", o.TaskIDFromKey},
		} {
			if f.set {
				return beam.PCollection{}, fmt.Errorf("%s configures the Kafka read: it needs --kafka_bootstrap_servers and --kafka_topics", f.flag)
			}
		}
	}
	switch {
	case kafka && o.Input != "":
		return beam.PCollection{}, errors.New("--input and --kafka_bootstrap_servers select different sources; give one")
	case kafka:
		return kafkaSource(s, o.Kafka)
	case o.Input != "":
		if err := validateScheme(o.Input); err != nil {
			return beam.PCollection{}, err
		}
		return beam.ParDo(s.Scope("Lines"), lineBytes, textio.Read(s, o.Input)), nil
	case o.Stdin != nil:
		lines, err := readLines(o.Stdin)
		if err != nil {
			return beam.PCollection{}, fmt.Errorf("reading stdin: %w", err)
		}
		return beam.CreateList(s, lines), nil
	}
	return beam.PCollection{}, errors.New("no input: give --input, --kafka_bootstrap_servers or records on stdin")
}

// validateScheme reports an input pattern whose file system (scheme) is not linked in.
func validateScheme(pattern string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("--input: %s", cutPanicText(sprintRecovered(r)))
		}
	}()
	filesystem.ValidateScheme(pattern)
	return nil
}

// maxLineBytes bounds one stdin record; Cloud Tasks takes tasks of at most 100 KiB anyway.
const maxLineBytes = 1 << 20

func readLines(r io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLineBytes)
	lines := []Record{}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line != "" {
			lines = append(lines, Record{Value: []byte(line)})
		}
	}
	return lines, sc.Err()
}

// sprintRecovered formats v, a value recover returned. Printing a panic value runs its String
// or Error method, which may panic too; fmt recovers that once but not a panic raised while
// printing the second value, so a value that cannot be printed is named by its type instead.
func sprintRecovered(v any) (text string) {
	defer func() {
		if recover() != nil {
			text = fmt.Sprintf("a %T that panics when formatted", v)
		}
	}()
	return fmt.Sprint(v)
}

// maxPanicText bounds the text of a recovered panic that an error repeats.
const maxPanicText = 1024

// cutPanicText returns text cut to at most maxPanicText bytes, at a character boundary.
func cutPanicText(text string) string {
	if len(text) <= maxPanicText {
		return text
	}
	return strings.ToValidUTF8(text[:maxPanicText-len("...")], "") + "..."
}

func firstAndLastLine(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	switch len(lines) {
	case 0:
		return "no details"
	case 1:
		return lines[0]
	}
	return lines[0] + " ... " + lines[len(lines)-1]
}
