package kafkatemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
)

// The template's flags are shaped for Dataflow Flex Templates, whose launcher passes every
// parameter once, as --name=value: a flag given twice is an error naming it (never a silent
// "last one wins"), and a flag that needs several entries (headers, consumer properties) takes
// one JSON object.
//
// flagTable below is the one list of them. Each sink option key of cloudtasksio.ConfigFromOptions
// has a flag of its own, named by SinkFlagName; RegisterFlags defines the flags from the table
// and metadata.json (the Flex Template spec) lists the same parameters, which a test checks.

// SinkFlagPrefix starts the name of every flag that carries a cloudtasksio option key.
const SinkFlagPrefix = "cloudtasks_"

// SinkFlagName returns the template flag of a cloudtasksio option key: SinkFlagPrefix, then the
// key with its dots and hyphens turned into underscores ("http.url" -> "cloudtasks_http_url",
// "sink.recovery.max-attempts" -> "cloudtasks_sink_recovery_max_attempts").
func SinkFlagName(key string) string {
	return SinkFlagPrefix + strings.NewReplacer(".", "_", "-", "_").Replace(key)
}

// Flag describes one template flag as the Flex Template spec (metadata.json) lists it.
type Flag struct {
	// Name is the flag's name, without dashes.
	Name string `json:"name"`
	// Label is a short title for the parameter.
	Label string `json:"label"`
	// Help says what the flag does, its default and what it accepts.
	Help string `json:"helpText"`
	// Optional is false only for the flags every run needs.
	Optional bool `json:"isOptional"`
	// Regexes, when set, hold one regular expression every accepted value matches.
	Regexes []string `json:"regexes,omitempty"`
	// Group is the heading the parameter is listed under (the spec's groupName): one of
	// GroupTarget, GroupSource, GroupSinkTuning, GroupFailureHandling and GroupCredentials.
	Group string `json:"groupName"`
	// OptionKey is the cloudtasksio option key the flag sets, for a sink flag (see
	// SinkFlagName); empty for the template's own flags. Header flags set the keys under
	// this prefix.
	OptionKey string `json:"-"`
	// Secret marks a flag whose value may hold credentials: no error or log repeats it.
	Secret bool `json:"-"`

	value func(o *Options) flag.Value
}

// Groups of the template's parameters, in the order metadata.json and the usage text list them.
const (
	GroupTarget          = "Target: queue and tasks"
	GroupSource          = "Source: records"
	GroupSinkTuning      = "Sink tuning"
	GroupFailureHandling = "Failure handling"
	GroupCredentials     = "Credentials and connection"
)

// Groups returns the parameter groups in their order.
func Groups() []string {
	return []string{GroupTarget, GroupSource, GroupSinkTuning, GroupFailureHandling, GroupCredentials}
}

// inGroup sets the group of each flag.
func inGroup(group string, flags ...Flag) []Flag {
	for i := range flags {
		flags[i].Group = group
	}
	return flags
}

// Regular expressions of metadata.json, for the values whose shape one can state.
const (
	reCount    = `^[1-9][0-9]*$`
	reCount0   = `^[0-9]+$`
	reBool     = `^(true|false|TRUE|FALSE|True|False)$`
	reHostPort = `^[^\s]+:[0-9]{1,5}$`
	reJSONObj  = `^\s*\{[\s\S]*\}\s*$`
	reMethod   = `^(?i)(POST|GET|HEAD|PUT|DELETE|PATCH|OPTIONS)$`
	reEmail    = `^[^@\s]+@[^@\s]+$`
	reHTTPURL  = `^https?://[^\s]+$`
	reRate     = `^[0-9]+(\.[0-9]+)?$` // a decimal number, the shape ConfigFromOptions reads a start rate in
)

// reDuration matches the durations cloudtasksio.ConfigFromOptions reads: Go's form (a sign,
// then 0 or numbers each with a unit) or the Flink connector's (whole digits, optional spaces,
// one unit word in any ASCII letter case).
var reDuration = `^([-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)|[0-9]+ *(` + anyASCIICase(
	"d", "day", "days", "h", "hour", "hours", "m", "min", "mins", "minute", "minutes",
	"s", "sec", "secs", "second", "seconds", "ms", "milli", "millis", "millisecond", "milliseconds",
	"µs", "μs", "us", "micro", "micros", "microsecond", "microseconds",
	"ns", "nano", "nanos", "nanosecond", "nanoseconds") + `))$`

// anyASCIICase is a regular expression alternation of words that matches each with its ASCII
// letters in either case and nothing else folded: "min" becomes [mM][iI][nN]. (A regex's own
// case-insensitive flag also folds letters such as ſ into s, which the option parser does not.)
func anyASCIICase(words ...string) string {
	var alts []string
	for _, w := range words {
		var b strings.Builder
		for _, r := range w {
			if 'a' <= r && r <= 'z' {
				fmt.Fprintf(&b, "[%c%c]", r, r-'a'+'A')
			} else {
				b.WriteRune(r)
			}
		}
		alts = append(alts, b.String())
	}
	return strings.Join(alts, "|")
}

// sinkFlag is a row for one cloudtasksio option key.
func sinkFlag(key, label, help, regex string) Flag {
	f := Flag{Name: SinkFlagName(key), Label: label, Help: help, Optional: true, OptionKey: key}
	if regex != "" {
		f.Regexes = []string{regex}
	}
	f.value = func(o *Options) flag.Value { return &optionValue{key: key, opts: o.Sink} }
	return f
}

// headerFlag is the row of a header family: one JSON object of header name to value.
func headerFlag(name, prefix, label string) Flag {
	return Flag{
		Name: name, Label: label, Optional: true, OptionKey: prefix, Secret: true,
		Help:    `Fixed headers of every task, as one JSON object of header name to value, for example {"Content-Type":"text/plain","Authorization":"Bearer ..."} (option keys ` + prefix + `<Name>). Values are never printed.`,
		Regexes: []string{reJSONObj},
		value: func(o *Options) flag.Value {
			return &jsonMapValue{flag: name, problems: o.flagProblems, set: func(k, v string) { o.Sink[prefix+k] = v }}
		},
	}
}

// templateFlag is a row for one of the template's own flags.
func templateFlag(name, label, help, regex string, value func(o *Options) flag.Value) Flag {
	f := Flag{Name: name, Label: label, Help: help, Optional: true, value: value}
	if regex != "" {
		f.Regexes = []string{regex}
	}
	return f
}

func stringFlag(p func(o *Options) *string) func(o *Options) flag.Value {
	return func(o *Options) flag.Value { return (*stringValue)(p(o)) }
}

// flagTable is every template flag, in the order of metadata.json.
var flagTable = func() []Flag {
	required := func(f Flag) Flag { f.Optional = false; return f }
	var t []Flag
	t = append(t, inGroup(GroupTarget,
		required(sinkFlag("project", "Cloud Tasks project", "Project ID of the Cloud Tasks queue (option key project).", `^[a-z][-a-z0-9.:]*$`)),
		required(sinkFlag("location", "Cloud Tasks location", "Region of the queue, for example us-central1 (option key location).", `^[a-z][-a-z0-9]*$`)),
		required(sinkFlag("queue", "Cloud Tasks queue", "Queue ID: letters, digits and hyphens, at most 100 (option key queue).", `^[A-Za-z0-9-]{1,100}$`)),
		sinkFlag("target.type", "Target type", "http (default) or app-engine (option key target.type).", `^(?i)(http|app-engine)$`),
		sinkFlag("http.url", "Task URL", "Absolute http or https URL of every task; records may override it with --url_field (option key http.url).", reHTTPURL),
		sinkFlag("http.method", "HTTP method", "Method of the task's request, default POST (option key http.method).", reMethod),
		headerFlag("cloudtasks_http_headers", "http.headers.", "HTTP headers"),
		sinkFlag("http.oidc.service-account-email", "OIDC service account", "Service account, in the queue's project, whose OIDC token Cloud Tasks adds to each request (option key http.oidc.service-account-email).", reEmail),
		sinkFlag("http.oidc.audience", "OIDC audience", "Audience of the OIDC token, default the task URL; when the URL has a path, set the service's root URL, which Cloud Run checks (option key http.oidc.audience).", ""),
		sinkFlag("http.oauth.service-account-email", "OAuth service account", "Service account whose OAuth token Cloud Tasks adds, for Google APIs (option key http.oauth.service-account-email).", reEmail),
		sinkFlag("http.oauth.scope", "OAuth scope", "Scope of the OAuth token (option key http.oauth.scope).", ""),
		sinkFlag("http.dispatch-deadline", "Dispatch deadline", "How long Cloud Tasks waits for the target's answer, 15s to 30m; default the service's (option key http.dispatch-deadline).", reDuration),
		sinkFlag("app-engine.relative-uri", "App Engine relative URI", "Path and query of every App Engine task, starting with / (option key app-engine.relative-uri).", `^(/[^\s#]*)?$`),
		sinkFlag("app-engine.method", "App Engine method", "Method of the App Engine request, default POST (option key app-engine.method).", reMethod),
		headerFlag("cloudtasks_app_engine_headers", "app-engine.headers.", "App Engine headers"),
		sinkFlag("app-engine.service", "App Engine service", "Service that receives the tasks (option key app-engine.service).", ""),
		sinkFlag("app-engine.version", "App Engine version", "Version that receives the tasks (option key app-engine.version).", ""),
		sinkFlag("app-engine.instance", "App Engine instance", "Instance that receives the tasks (option key app-engine.instance).", ""),
		sinkFlag("app-engine.dispatch-deadline", "App Engine dispatch deadline", "How long Cloud Tasks waits for the handler's answer, 15s to 24h15s; default the service's (option key app-engine.dispatch-deadline).", reDuration),
		templateFlag("task_id_field", "Task id field", "Top-level field of JSON records whose value (string or number) names the task, so a record read again creates nothing new. Needs --format json.", "",
			stringFlag(func(o *Options) *string { return &o.TaskIDField })),
		templateFlag("task_id_from_key", "Task id from Kafka key", "true: the Kafka record key names the task, so a re-read of the topic creates nothing new; a record without a key is rejected. Kafka only; excludes --task_id_field.", reBool,
			func(o *Options) flag.Value { return (*boolValue)(&o.TaskIDFromKey) }),
		templateFlag("url_field", "URL field", "Top-level string field of JSON records holding the task's URL (App Engine: relative URI). Needs --format json.", "",
			stringFlag(func(o *Options) *string { return &o.URLField })),
		templateFlag("schedule_time_field", "Schedule time field", "Top-level field of JSON records holding an RFC 3339 time at which the task is dispatched. Needs --format json.", "",
			stringFlag(func(o *Options) *string { return &o.ScheduleTimeField })),
	)...)
	t = append(t, inGroup(GroupSource,
		templateFlag("format", "Record format", "What record values are: raw (default; sent as they are) or json (one JSON document each, sent unchanged with Content-Type application/json).", `^(raw|json)$`,
			stringFlag(func(o *Options) *string { return &o.Format })),
		templateFlag("input", "Input files", "File pattern (local or gs://) of the input, one record per line, instead of Kafka. Without it and without Kafka, stdin is read.", "",
			stringFlag(func(o *Options) *string { return &o.Input })),
		templateFlag("kafka_bootstrap_servers", "Kafka bootstrap servers", "Kafka's bootstrap.servers, host:port[,host:port...]; setting it reads records from Kafka.", `^[^\s,]+:[0-9]{1,5}(,[^\s,]+:[0-9]{1,5})*$`,
			stringFlag(func(o *Options) *string { return &o.Kafka.BootstrapServers })),
		templateFlag("kafka_topics", "Kafka topics", "Comma-separated Kafka topics to read.", `^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$`,
			func(o *Options) flag.Value { return (*commaList)(&o.Kafka.Topics) }),
		templateFlag("kafka_consumer_group", "Kafka consumer group", "Consumer group id (group.id) of the read. Needed by --kafka_commit_offsets.", "",
			stringFlag(func(o *Options) *string { return &o.Kafka.ConsumerGroup })),
		templateFlag("kafka_commit_offsets", "Commit Kafka offsets", "true: commit the read's offsets to the consumer group as Beam finalizes its checkpoints, so a new job of the same group resumes there. Needs --kafka_consumer_group.", reBool,
			func(o *Options) flag.Value { return (*boolValue)(&o.Kafka.CommitOffsets) }),
		templateFlag("kafka_start_offset", "Kafka start offset", "Where to start reading: earliest, latest (Kafka's default; both apply where the group has no committed offset), or an RFC 3339 time such as 2026-05-01T09:30:00Z (the first record at or after it in each partition).", `^(earliest|latest|[0-9]{4}-[0-9]{2}-[0-9]{2}T\S+)$`,
			stringFlag(func(o *Options) *string { return &o.Kafka.StartOffset })),
		Flag{
			Name: "kafka_consumer_properties", Label: "Kafka consumer properties", Optional: true, Secret: true,
			Help:    `Extra Kafka consumer properties as one JSON object, for example {"security.protocol":"SASL_SSL","sasl.mechanism":"PLAIN","sasl.jaas.config":"..."} for SASL or TLS. Values are never printed.`,
			Regexes: []string{reJSONObj},
			value: func(o *Options) flag.Value {
				return &jsonMapValue{flag: "kafka_consumer_properties", problems: o.flagProblems, set: func(k, v string) { o.Kafka.ConsumerConfig[k] = v }}
			},
		},
		templateFlag("kafka_max_records", "Kafka max records", "Stop reading after this many records, making the read bounded (tests and demos); 0: unbounded.", reCount0,
			func(o *Options) flag.Value { return (*int64Value)(&o.Kafka.MaxNumRecords) }),
		templateFlag("kafka_max_read_secs", "Kafka max read seconds", "Stop reading after this many seconds, making the read bounded (tests and demos); 0: unbounded.", reCount0,
			func(o *Options) flag.Value { return (*int64Value)(&o.Kafka.MaxReadSecs) }),
		templateFlag("expansion_addr", "Expansion service", "host:port of Beam's Java IO expansion service for the Kafka read; empty lets Beam start one, which needs Java.", reHostPort,
			stringFlag(func(o *Options) *string { return &o.Kafka.ExpansionAddr })),
	)...)
	t = append(t, inGroup(GroupSinkTuning,
		sinkFlag("sink.delivery-guarantee", "Delivery guarantee", "at-least-once (default) or exactly-once (option key sink.delivery-guarantee).", `^(?i)(at-least-once|exactly-once)$`),
		sinkFlag("sink.destination-failure", "Destination failure", "fail (default) or isolate: whether a queue that is missing, forbidden or cannot take tasks fails the bundle, or sends only its own records to the failure policy (--on_failure log-and-drop or dead-letter) (option key sink.destination-failure).", `^(?i)(fail|isolate)$`),
		sinkFlag("sink.staged.name-retention", "Staged: name retention", "Exactly-once: the queue's task-name retention, default 1h (option key sink.staged.name-retention).", reDuration),
		sinkFlag("sink.staged.clock-skew-allowance", "Staged: clock skew allowance", "Exactly-once: clock skew allowed between workers, default 5m (option key sink.staged.clock-skew-allowance).", reDuration),
		sinkFlag("sink.staged.request-timeout", "Staged: request timeout", "Exactly-once: budget of one create, default 20s (option key sink.staged.request-timeout).", reDuration),
		sinkFlag("sink.staged.verify-queue-retention", "Staged: verify queue retention", "Exactly-once: read the queue's name retention before creating, default true (option key sink.staged.verify-queue-retention).", reBool),
		sinkFlag("sink.staged.expired-envelope-policy", "Staged: expired envelope policy", "Exactly-once: fail (default), assume-created (or its reference spelling assume-committed), create-anyway or drop (option key sink.staged.expired-envelope-policy).", `^(?i)(fail|assume-created|assume-committed|create-anyway|drop)$`),
		sinkFlag("sink.in-flight.max-tasks", "Max tasks in flight", "Creates in flight or waiting to be retried per worker, default 1000 (option key sink.in-flight.max-tasks).", reCount),
		sinkFlag("sink.channel-pool-size", "Channel pool size", "gRPC connections of the Cloud Tasks client, default one (option key sink.channel-pool-size).", reCount),
		sinkFlag("sink.attempt-timeout", "Create attempt timeout", "How long one create call may take before it is cut and retried as DEADLINE_EXCEEDED, at most 30m; default the client's 20s (option key sink.attempt-timeout).", reDuration),
		sinkFlag("sink.recovery.initial-backoff", "Retry initial backoff", "First wait after a transient failure, default 100ms (option key sink.recovery.initial-backoff).", reDuration),
		sinkFlag("sink.recovery.max-backoff", "Retry max backoff", "Longest wait between transient retries, default 10s (option key sink.recovery.max-backoff).", reDuration),
		sinkFlag("sink.recovery.max-attempts", "Retry max attempts", "Attempts of a create on transient failures, first included, default 8 (option key sink.recovery.max-attempts).", reCount),
		sinkFlag("sink.recovery.not-found.initial-backoff", "NOT_FOUND initial backoff", "First wait after NOT_FOUND (queue missing or reactivating), default 500ms (option key sink.recovery.not-found.initial-backoff).", reDuration),
		sinkFlag("sink.recovery.not-found.max-backoff", "NOT_FOUND max backoff", "Longest wait between NOT_FOUND retries, default 2s (option key sink.recovery.not-found.max-backoff).", reDuration),
		sinkFlag("sink.recovery.not-found.max-attempts", "NOT_FOUND max attempts", "Attempts of a create on NOT_FOUND, default 3 (option key sink.recovery.not-found.max-attempts).", reCount),
		sinkFlag("sink.metrics.per-destination", "Per-destination metrics", "Count sends and errors per queue too, default false (option key sink.metrics.per-destination).", reBool),
		sinkFlag("sink.queue-preflight", "Queue preflight", "warn (default), fail or off: what a worker does when it finds a queue paused, disabled or overriding task URLs or routing (option key sink.queue-preflight).", `^(?i)(warn|fail|off)$`),
		sinkFlag("sink.queue-health.interval", "Queue health interval", "How often each worker reads the queues it writes to again, 10s to 24h, to act on a queue paused since as the queue preflight does and report the queue's state and backlog as gauges; default 0, off (option key sink.queue-health.interval).", reDuration),
		sinkFlag("sink.in-flight.adaptive", "Adaptive concurrency", "on (default) or off: lower the creates in flight to a queue when Cloud Tasks answers RESOURCE_EXHAUSTED and raise them again as creates succeed (option key sink.in-flight.adaptive).", `^(?i)(on|off)$`),
		sinkFlag("sink.in-flight.adaptive-start-rate", "Adaptive start rate", "Creates per second at which each worker process starts each queue, 0.5 to 1000000: its share of the queue's create quota (the quota divided by the workers that start together). Where the rate starts, not a cap. Default: slow start, which learns the quota from the queue's answers (option key sink.in-flight.adaptive-start-rate).", reRate),
		sinkFlag("client.telemetry", "Client telemetry", "off (default) or on: whether the Cloud Tasks client's OpenTelemetry instrumentation runs (option key client.telemetry).", `^(?i)(on|off)$`),
	)...)
	t = append(t, inGroup(GroupFailureHandling,
		templateFlag("on_failure", "Failure policy", "What happens to a record that cannot become a task: fail (the default without --dead_letter_topic), log-and-drop, or dead-letter (the default with it).", `^(fail|log-and-drop|dead-letter)$`,
			stringFlag(func(o *Options) *string { return &o.OnFailure })),
		templateFlag("dead_letter_topic", "Dead-letter topic", "Pub/Sub topic projects/P/topics/T receiving rejected records; it must exist.", `^projects/[^/]+/topics/[^/]+$`,
			stringFlag(func(o *Options) *string { return &o.DeadLetterTopic })),
		templateFlag("dead_letter_emulator_endpoint", "Dead-letter emulator", "host:port of a Pub/Sub emulator for the dead-letter topic (tests).", reHostPort,
			stringFlag(func(o *Options) *string { return &o.DeadLetterEmulatorEndpoint })),
	)...)
	t = append(t, inGroup(GroupCredentials,
		sinkFlag("service-account-key-file", "Service account key file", "Path of a service-account JSON key for the Cloud Tasks client; default application-default credentials (option key service-account-key-file).", ""),
		sinkFlag("client.impersonate-service-account", "Impersonated service account", "Service account whose tokens the Cloud Tasks client uses, obtained with the worker's credentials (option key client.impersonate-service-account).", reEmail),
		sinkFlag("client.impersonate-delegates", "Impersonation delegates", "Comma-separated delegation chain ending at the impersonated service account (option key client.impersonate-delegates).", ""),
		sinkFlag("client.quota-project", "Quota project", "Project billed and charged quota for the Cloud Tasks requests (option key client.quota-project).", ""),
		sinkFlag("emulator-endpoint", "Emulator endpoint", "host:port of a Cloud Tasks emulator: plaintext, no credentials; never for production (option key emulator-endpoint).", reHostPort),
		sinkFlag("client.endpoint", "Cloud Tasks endpoint", "TLS host:port of a regional or Private Service Connect Cloud Tasks endpoint; default the global one (option key client.endpoint).", reHostPort),
		sinkFlag("client.universe-domain", "Universe domain", "Google Cloud universe of the Cloud Tasks client, default googleapis.com (option key client.universe-domain).", ""),
	)...)
	seen := map[string]bool{}
	for _, f := range t {
		if seen[f.Name] {
			panic("kafkatemplate: flag " + f.Name + " is listed twice")
		}
		seen[f.Name] = true
	}
	return t
}()

// Flags returns the template's flags as metadata.json lists them.
func Flags() []Flag { return append([]Flag(nil), flagTable...) }

// RegisterFlags defines the template's flags on fs (see Flags and https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/template.md) and returns
// the Options they fill when fs is parsed. Without --input and Kafka the records come from
// stdin.
//
// Values that may hold credentials (headers, consumer properties) never reach a flag parse
// error: what is wrong with them is kept and reported by Build, naming the flag and key only.
// So is a flag given more than once: Build names it and no value.
func RegisterFlags(fs *flag.FlagSet) *Options {
	o := &Options{Sink: map[string]string{}, Format: FormatRaw, Kafka: KafkaOptions{ConsumerConfig: map[string]string{}}, flagProblems: new([]string)}
	for _, f := range flagTable {
		fs.Var(&onceValue{Value: f.value(o), name: f.Name, problems: o.flagProblems}, f.Name, f.Help)
	}
	return o
}

// PrintUsage writes the usage text of a FlagSet on which RegisterFlags defined the template's
// flags: the template's own flags first, under their groups and in metadata.json's order with
// the required ones marked, then every other flag of fs (Beam's: runner, job and worker
// settings) apart, in flag's own format.
func PrintUsage(w io.Writer, fs *flag.FlagSet) {
	name := fs.Name()
	if name == "" {
		name = "kafka-to-cloudtasks"
	}
	fmt.Fprintf(w, "Usage: %s [flags]\n\nThe template's flags (each at most once, as --name=value):\n", name)
	ours := map[string]bool{}
	group := ""
	for _, f := range flagTable {
		ours[f.Name] = true
		if f.Group != group {
			group = f.Group
			fmt.Fprintf(w, "\n  %s\n", group)
		}
		required := ""
		if !f.Optional {
			required = " (required)"
		}
		fmt.Fprintf(w, "    --%s%s\n    \t%s\n", f.Name, required, f.Help)
	}
	others := flag.NewFlagSet(name, flag.ContinueOnError)
	others.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !ours[f.Name] {
			others.Var(f.Value, f.Name, f.Usage)
		}
	})
	fmt.Fprintf(w, "\nBeam's flags (runner, job and worker settings) and any other flags of the program:\n")
	others.PrintDefaults()
}

// onceValue refuses a flag given more than once. A Flex Template launch passes each parameter
// once, so a repeat is a mistake (a flag written twice in a script) whose silent "last one
// wins" would hide it. The problem is reported by Build, naming the flag and neither value.
type onceValue struct {
	flag.Value
	name     string
	given    bool
	problems *[]string
}

func (v *onceValue) String() string {
	if v == nil || v.Value == nil {
		return ""
	}
	return v.Value.String()
}

// IsBoolFlag keeps a boolean flag usable without a value (--kafka_commit_offsets).
func (v *onceValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *onceValue) Set(s string) error {
	if v.given {
		*v.problems = append(*v.problems, fmt.Sprintf("--%s is given more than once; give it once (each Flex Template parameter is passed once)", v.name))
		return nil
	}
	v.given = true
	return v.Value.Set(s)
}

// flagOfKey names the flag that sets option key k, for errors.
func flagOfKey(k string) string {
	for _, f := range flagTable {
		if f.OptionKey == "" {
			continue
		}
		if f.OptionKey == k {
			return "--" + f.Name
		}
		if name, ok := strings.CutPrefix(k, f.OptionKey); ok && strings.HasSuffix(f.OptionKey, ".") {
			return fmt.Sprintf("--%s header %s", f.Name, quote(name))
		}
	}
	return "option key " + quote(k) // set through Options.Sink, not a flag
}

// sinkError turns a ConfigFromOptions error into one naming the flag.
func sinkError(err error) error {
	var oe *cloudtasksio.OptionError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: %s (option key %s)", flagOfKey(oe.Key), cut(oe.Reason, 1024), quote(oe.Key))
	}
	return err
}

// optionValue is a sink flag: it sets one option key.
type optionValue struct {
	key  string
	opts map[string]string
}

func (v *optionValue) String() string     { return "" }
func (v *optionValue) Set(s string) error { v.opts[v.key] = s; return nil }

type stringValue string

func (v *stringValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

type boolValue bool

func (v *boolValue) String() string {
	if v == nil {
		return "false"
	}
	return strconv.FormatBool(bool(*v))
}
func (v *boolValue) IsBoolFlag() bool { return true }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("accepted: true or false")
	}
	*v = boolValue(b)
	return nil
}

type int64Value int64

func (v *int64Value) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*v), 10)
}
func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return errors.New("accepted: a whole number of at least 0")
	}
	*v = int64Value(n)
	return nil
}

// commaList is a flag holding a comma-separated list.
type commaList []string

func (c *commaList) String() string {
	if c == nil {
		return ""
	}
	return strings.Join(*c, ",")
}

func (c *commaList) Set(s string) error {
	*c = nil
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*c = append(*c, part)
		}
	}
	return nil
}

// jsonMapValue is a flag taking one JSON object of name to value (strings; numbers and
// booleans are taken as their JSON text). What is wrong with it is recorded in problems,
// naming the flag and at most a key, never a value, and reported by Build.
type jsonMapValue struct {
	flag     string
	problems *[]string
	set      func(k, v string)
}

func (v *jsonMapValue) String() string { return "" }

func (v *jsonMapValue) Set(s string) error {
	entries, err := parseJSONObject(s)
	if err != nil {
		*v.problems = append(*v.problems, fmt.Sprintf("--%s: %v", v.flag, err))
		return nil
	}
	for _, e := range entries {
		v.set(e[0], e[1])
	}
	return nil
}

// parseJSONObject reads a flat JSON object keeping each entry, and rejects a key given twice
// (encoding/json would silently keep the last). Errors never quote a value.
func parseJSONObject(s string) ([][2]string, error) {
	const shape = `takes one JSON object of name to string value, for example {"name":"value"}`
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New(shape)
	}
	var out [][2]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, errors.New(shape)
		}
		if key == "" {
			return nil, errors.New("a name is empty")
		}
		if seen[key] {
			return nil, fmt.Errorf("name %s is given twice", quote(key))
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("the value of %s is not valid JSON", quote(key))
		}
		var value string
		switch {
		case bytes.Equal(raw, []byte("null")):
			// json.Unmarshal takes null into a string as "": a header or property set to
			// nothing, where the flag's value most likely lost one.
			return nil, fmt.Errorf("the value of %s is null; it must be a string, a number or a boolean", quote(key))
		case json.Unmarshal(raw, &value) == nil:
		case bytes.Equal(raw, []byte("true")), bytes.Equal(raw, []byte("false")):
			value = string(raw)
		case json.Unmarshal(raw, new(json.Number)) == nil:
			value = string(raw)
		default:
			return nil, fmt.Errorf("the value of %s must be a string, a number or a boolean", quote(key))
		}
		out = append(out, [2]string{key, value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New(shape)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New(shape + ", and nothing after it")
	}
	return out, nil
}
