package kafkatemplate

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/xlangx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/xlang/kafkaio"
)

// The Kafka read is Beam's Java KafkaIO through the Java IO expansion service, as Beam Go's
// kafkaio package does it, with two differences that package does not allow: the read keeps
// each record's topic, partition and offset (the "with metadata" form), so that a dead letter
// can say where its record came from, and it hands a record without a key or value to the
// template as nil instead of failing the bundle (kafkaio's []byte output panics on Kafka's null).

// kafkaReadWithMetadataURN is the expansion service's URN of KafkaIO's read that outputs rows
// of ByteArrayKafkaRecord.
const kafkaReadWithMetadataURN = "beam:transform:org.apache.beam:kafka_read_with_metadata:v1"

// kafkaRow is the Go type of the read's output rows: the exact struct the Go SDK builds from the
// Java schema (field order, names, nullability as pointers), which is why it is an alias of an
// unnamed struct. Checked against Beam Java 2.73.0's KafkaIO.
type kafkaRow = struct {
	Topic             string            `beam:"topic"`
	Partition         int32             `beam:"partition"`
	Offset            int64             `beam:"offset"`
	Timestamp         int64             `beam:"timestamp"`
	Key               *[]byte           `beam:"key"`
	Value             *[]byte           `beam:"value"`
	Headers           *[]kafkaHeaderRow `beam:"headers"`
	TimestampTypeId   int32             `beam:"timestampTypeId"`
	TimestampTypeName string            `beam:"timestampTypeName"`
}

type kafkaHeaderRow = struct {
	Key   string  `beam:"key"`
	Value *[]byte `beam:"value"`
}

// kafkaReadPayload is the read's configuration, KafkaIO.Read.External.Configuration of the Java
// side; the field names are the schema the expansion service reads.
type kafkaReadPayload struct {
	ConsumerConfig         map[string]string
	Topics                 []string
	KeyDeserializer        string
	ValueDeserializer      string
	StartReadTime          *int64
	MaxNumRecords          *int64
	MaxReadTime            *int64
	CommitOffsetInFinalize bool
	TimestampPolicy        string
}

// kafkaioAutoStartAddress makes the Go SDK download and start the Java IO expansion service
// of its own version when --expansion_addr is empty, as kafkaio does.
var kafkaioAutoStartAddress = xlangx.UseAutomatedJavaExpansionService(":sdks:java:io:expansion-service:runExpansionService")

func init() {
	beam.RegisterType(reflect.TypeOf((*kafkaReadPayload)(nil)).Elem())
	// An unnamed struct cannot go through the register package's type registration, so
	// kafkaRecord is called by reflection.
	beam.RegisterFunction(kafkaRecord)
}

// kafkaRecord turns a row of the read into a Record.
func kafkaRecord(row kafkaRow) Record {
	r := Record{Topic: row.Topic, Partition: row.Partition, Offset: row.Offset}
	if row.Key != nil {
		r.Key = *row.Key
	}
	if row.Value != nil {
		r.Value = *row.Value
	}
	return r
}

// consumerPropertiesOfFlags are the consumer properties that flags of their own set.
var consumerPropertiesOfFlags = []struct{ property, flag string }{
	{"bootstrap.servers", "--kafka_bootstrap_servers"},
	{"group.id", "--kafka_consumer_group"},
	{"auto.offset.reset", "--kafka_start_offset"},
	{"enable.auto.commit", "--kafka_commit_offsets"},
}

// kafkaRead is the checked configuration of the Kafka read.
type kafkaRead struct {
	props       map[string]string // consumer properties, bootstrap.servers aside
	startMillis int64             // StartReadTimestamp; 0: none
}

// checkKafka checks the Kafka options, naming the flag at fault, and resolves them into the
// read's configuration.
func checkKafka(k KafkaOptions) (kafkaRead, error) {
	var r kafkaRead
	if k.BootstrapServers == "" {
		return r, errors.New("--kafka_topics needs --kafka_bootstrap_servers")
	}
	if len(k.Topics) == 0 {
		return r, errors.New("--kafka_bootstrap_servers needs --kafka_topics")
	}
	if k.MaxNumRecords < 0 || k.MaxReadSecs < 0 {
		return r, errors.New("--kafka_max_records and --kafka_max_read_secs must not be negative")
	}
	r.props = map[string]string{}
	for name, v := range k.ConsumerConfig {
		for _, p := range consumerPropertiesOfFlags {
			if name == p.property {
				return r, fmt.Errorf("--kafka_consumer_properties sets %s: use %s instead", quote(name), p.flag)
			}
		}
		r.props[name] = v
	}
	if k.ConsumerGroup != "" {
		r.props["group.id"] = k.ConsumerGroup
	}
	if k.CommitOffsets {
		if k.ConsumerGroup == "" {
			return r, errors.New("--kafka_commit_offsets commits to a consumer group: it needs --kafka_consumer_group")
		}
		// The read commits the offsets when Beam finalizes, not the consumer on its own.
		r.props["enable.auto.commit"] = "false"
	}
	switch k.StartOffset {
	case "":
	case "earliest", "latest":
		r.props["auto.offset.reset"] = k.StartOffset
	default:
		t, err := time.Parse(time.RFC3339, k.StartOffset)
		if err != nil {
			return r, fmt.Errorf("--kafka_start_offset %s is not accepted; accepted: earliest, latest or an RFC 3339 time such as 2026-05-01T09:30:00Z", quote(k.StartOffset))
		}
		if t.UnixMilli() <= 0 {
			return r, fmt.Errorf("--kafka_start_offset %s is not after 1970", quote(k.StartOffset))
		}
		r.startMillis = t.UnixMilli()
	}
	return r, nil
}

func kafkaSource(s beam.Scope, k KafkaOptions) (col beam.PCollection, err error) {
	r, err := checkKafka(k)
	if err != nil {
		return col, err
	}
	props := map[string]string{"bootstrap.servers": k.BootstrapServers}
	for name, v := range r.props {
		props[name] = v
	}
	pl := kafkaReadPayload{
		ConsumerConfig:         props,
		Topics:                 k.Topics,
		KeyDeserializer:        kafkaio.ByteArrayDeserializer,
		ValueDeserializer:      kafkaio.ByteArrayDeserializer,
		CommitOffsetInFinalize: k.CommitOffsets,
		TimestampPolicy:        string(kafkaio.ProcessingTime),
	}
	if r.startMillis != 0 {
		pl.StartReadTime = &r.startMillis
	}
	if k.MaxNumRecords > 0 {
		pl.MaxNumRecords = &k.MaxNumRecords
	}
	if k.MaxReadSecs > 0 {
		pl.MaxReadTime = &k.MaxReadSecs
	}
	addr := k.ExpansionAddr
	if addr == "" {
		addr = kafkaioAutoStartAddress
	}
	// The cross-language expansion panics when the expansion service fails; report it instead.
	// The panic text quotes the whole expansion request, consumer properties (which may hold
	// credentials) included, so only its first line (what was tried where) and its last (the
	// root cause) are kept.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("--expansion_addr: expanding the Kafka read failed: %s", cutPanicText(firstAndLastLine(sprintRecovered(p))))
		}
	}()
	s = s.Scope("KafkaRead")
	out := beam.CrossLanguage(s, kafkaReadWithMetadataURN, beam.CrossLanguagePayload(pl), addr, nil,
		beam.UnnamedOutput(typex.New(reflect.TypeOf(kafkaRow{}))))
	return beam.ParDo(s, kafkaRecord, out[beam.UnnamedOutputTag()]), nil
}
