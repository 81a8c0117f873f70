package cloudtasksio

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
)

// This file maps the flat option keys of templates and flags (the SQL connector's WITH
// options) onto a Config through one table: a row per key (or per family of keys, such as the
// headers) with the Config field it sets, what it accepts and how its value is parsed. The
// target families contribute their rows from http.go and appengine.go. https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md is the
// user reference of every key.

// optionRow is one option key of ConfigFromOptions, like a flag of a flag.FlagSet.
type optionRow struct {
	// key is the option key, or with prefix the start shared by a family of keys whose rest
	// is an entry: a header name ("http.headers.X-Trace") or a format option ("csv.null-literal").
	key    string
	prefix bool
	// entries lists the entries a prefix row accepts; nil accepts any (header names).
	entries []string
	// family is the target family the key belongs to; 0 for keys of every target.
	family targetFamily
	// fields are the Config field paths the key sets: a field error about one of them, or
	// about a field below one, names this key.
	fields []string
	// help says what the key accepts, for errors.
	help string
	// required keys must be given; blankOK keys accept an empty value.
	required, blankOK bool
	// set parses value and stores it in cfg; why says what is wrong with a rejected value.
	set func(cfg *Config, entry, value string) (why string)
}

// valueKind parses one kind of option value: help says what it accepts; parse returns the
// value, or why it is rejected.
type valueKind[T any] struct {
	help  string
	parse func(v string) (T, string)
}

// optionOf is the row of a key whose value of kind k is stored where field points.
func optionOf[T any](key, path string, k valueKind[T], field func(*Config) *T) optionRow {
	return optionRow{key: key, fields: []string{path}, help: k.help, set: func(cfg *Config, _, v string) string {
		x, why := k.parse(v)
		if why == "" {
			*field(cfg) = x
		}
		return why
	}}
}

// of returns r as a key of target family f.
func (r optionRow) of(f targetFamily) optionRow { r.family = f; return r }

// withHelp returns r saying help instead of its kind's.
func (r optionRow) withHelp(help string) optionRow { r.help = help; return r }

// blank returns r accepting an empty value.
func (r optionRow) blank() optionRow { r.blankOK = true; return r }

// sets reports whether r sets field or a field below it.
func (r optionRow) sets(field string) bool {
	return slices.ContainsFunc(r.fields, func(f string) bool { return f == field || strings.HasPrefix(f, field+".") })
}

// The value kinds of the option table.
var (
	textValue = valueKind[string]{help: "accepted: a non-blank value", parse: func(v string) (string, string) { return v, "" }}
	// tokenValue is a name without whitespace (App Engine routing).
	tokenValue = valueKind[string]{help: "accepted: a name without whitespace", parse: func(v string) (string, string) {
		if strings.IndexFunc(v, isSpace) >= 0 {
			return "", "must contain no whitespace"
		}
		return v, ""
	}}
	// methodValue is upper-cased; the target's validation checks it.
	methodValue = valueKind[string]{help: "accepted: " + methodList, parse: func(v string) (string, string) { return strings.ToUpper(v), "" }}
	// listValue is comma-separated, blanks around an entry are not part of it.
	listValue = valueKind[[]string]{help: "accepted: a comma-separated list", parse: func(v string) ([]string, string) {
		var out []string
		for d := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(d))
		}
		return out, ""
	}}
	durationValue       = durationKind(false)
	durationOrZeroValue = durationKind(true)
	positiveIntValue    = valueKind[int]{help: "accepted: a decimal integer of at least 1", parse: func(v string) (int, string) {
		n, err := strconv.ParseInt(v, 10, 0)
		if err != nil {
			return 0, fmt.Sprintf("value %s is not a decimal integer; accepted: an integer of at least 1", quoteValue(v))
		}
		if n < 1 {
			return 0, fmt.Sprintf("value %s is below 1; accepted: an integer of at least 1", quoteValue(v))
		}
		return int(n), ""
	}}
	boolValue = valueKind[bool]{help: "accepted: true, false", parse: func(v string) (bool, string) {
		switch {
		case strings.EqualFold(v, "true"):
			return true, ""
		case strings.EqualFold(v, "false"):
			return false, ""
		}
		return false, fmt.Sprintf("value %s is not accepted; accepted: true, false", quoteValue(v))
	}}
)

// durationKind is a Go duration: positive, or not negative with allowZero.
func durationKind(allowZero bool) valueKind[time.Duration] {
	return valueKind[time.Duration]{help: "accepted: a Go duration such as 500ms, 10s or 1h", parse: func(v string) (time.Duration, string) {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return 0, fmt.Sprintf("value %s is not a duration; accepted: a Go duration such as 500ms, 10s, 1m30s or 2h", quoteValue(v))
		case d < 0:
			return 0, fmt.Sprintf("value %s is negative; accepted: a positive duration", quoteValue(v))
		case d == 0 && !allowZero:
			return 0, fmt.Sprintf("value %s is zero; accepted: a positive duration", quoteValue(v))
		}
		return d, ""
	}}
}

// enumValue matches one of the names, in any letter case; accepted lists them for errors.
func enumValue[T any](accepted string, byName map[string]T) valueKind[T] {
	return valueKind[T]{help: "accepted: " + accepted, parse: func(v string) (T, string) {
		x, ok := byName[strings.ToLower(v)]
		if !ok {
			return x, fmt.Sprintf("value %s is not accepted; accepted: %s", quoteValue(v), accepted)
		}
		return x, ""
	}}
}

// Option keys named outside their row.
const (
	optTargetType       = "target.type"
	optFormat           = "format"
	optHTTPHeaders      = "http.headers."
	optAppEngineHeaders = "app-engine.headers."
)

// queuePart is the row of a required part of the fixed queue.
func queuePart(key, path string, part func(*Queue) *string) optionRow {
	r := optionOf(key, path, textValue, func(c *Config) *string { return part(&c.Queue) })
	r.required = true
	return r.withHelp("the key is required and names part of the queue path")
}

// stagedOf returns cfg.Staged, set to the defaults on first use: a staged key changes only
// its own field.
func stagedOf(cfg *Config) *StagedOptions {
	if cfg.Staged == nil {
		d := DefaultStagedOptions()
		cfg.Staged = &d
	}
	return cfg.Staged
}

// bodyOf returns the body format of cfg's target.
func bodyOf(cfg *Config) *formats.Format {
	if cfg.AppEngine != nil {
		return &cfg.AppEngine.Body
	}
	return &cfg.HTTP.Body
}

// bodyFields are the fields the format keys set, whichever the target.
var bodyFields = []string{"HTTP.Body", "AppEngine.Body"}

// formatRows are the format key and a prefix row per format with options ("csv.").
func formatRows() []optionRow {
	names := bodyformat.Names()
	byName := map[string]string{}
	for _, n := range names {
		byName[n] = n
	}
	format := optionOf(optFormat, "", enumValue(strings.Join(names, ", ")+" (leave the key out to send no body)", byName),
		func(c *Config) *string { return &bodyOf(c).Name })
	format.fields = bodyFields
	rows := []optionRow{format}
	for _, name := range names {
		if options, _ := bodyformat.OptionKeys(name); len(options) > 0 {
			rows = append(rows, optionRow{key: name + ".", prefix: true, entries: options, fields: bodyFields, blankOK: true,
				help: "accepted: the options of format " + name,
				set:  func(c *Config, entry, v string) string { *bodyOf(c) = bodyOf(c).With(entry, v); return "" }})
		}
	}
	return rows
}

// headerRow is the row of a target family's header entries under prefix.
func headerRow(prefix, path string, f targetFamily, headers func(*Config) *map[string]string) optionRow {
	return optionRow{key: prefix, prefix: true, family: f, fields: []string{path}, blankOK: true,
		help: "accepted: a header value (the rest of the key is the header name)",
		set: func(c *Config, name, v string) string {
			h := headers(c)
			if *h == nil {
				*h = map[string]string{}
			}
			(*h)[name] = v
			return ""
		}}
}

// optionTable is every option key, in the order of https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md.
var optionTable = slices.Concat(
	[]optionRow{
		queuePart("project", "Queue.Project", func(q *Queue) *string { return &q.Project }),
		queuePart("location", "Queue.Location", func(q *Queue) *string { return &q.Location }),
		queuePart("queue", "Queue.Name", func(q *Queue) *string { return &q.Name }),
		{key: optTargetType, help: "accepted: http, app-engine"}, // read first, by ConfigFromOptions itself
	},
	httpOptionRows,
	appEngineOptionRows,
	formatRows()[:1],
	[]optionRow{
		optionOf("service-account-key-file", "ServiceAccountKeyFile", textValue, func(c *Config) *string { return &c.ServiceAccountKeyFile }).
			withHelp("accepted: the path of a service-account JSON key"),
		optionOf("emulator-endpoint", "EmulatorEndpoint", textValue, func(c *Config) *string { return &c.EmulatorEndpoint }).
			withHelp("accepted: host:port"),
		optionOf("client.endpoint", "Client.Endpoint", textValue, func(c *Config) *string { return &c.Client.Endpoint }).
			withHelp("accepted: a TLS endpoint host:port"),
		optionOf("client.quota-project", "Client.QuotaProject", textValue, func(c *Config) *string { return &c.Client.QuotaProject }).
			withHelp("accepted: a project id"),
		optionOf("client.impersonate-service-account", "Client.ImpersonateServiceAccount", textValue,
			func(c *Config) *string { return &c.Client.ImpersonateServiceAccount }).withHelp("accepted: a service-account e-mail address"),
		optionOf("client.impersonate-delegates", "Client.ImpersonateDelegates", listValue,
			func(c *Config) *[]string { return &c.Client.ImpersonateDelegates }).withHelp("accepted: comma-separated service-account e-mail addresses"),
		optionOf("client.universe-domain", "Client.UniverseDomain", textValue, func(c *Config) *string { return &c.Client.UniverseDomain }).
			withHelp("accepted: a domain name such as googleapis.com"),
		optionOf("client.telemetry", "Client.Telemetry", enumValue("on, off", map[string]Telemetry{"on": TelemetryOn, "off": TelemetryOff}),
			func(c *Config) *Telemetry { return &c.Client.Telemetry }),
		optionOf("sink.delivery-guarantee", "Delivery", enumValue("at-least-once, exactly-once",
			map[string]DeliveryGuarantee{"at-least-once": AtLeastOnce, "exactly-once": ExactlyOnce}),
			func(c *Config) *DeliveryGuarantee { return &c.Delivery }),
		optionOf("sink.staged.name-retention", "Staged.NameRetention", durationValue, func(c *Config) *time.Duration { return &stagedOf(c).NameRetention }),
		optionOf("sink.staged.clock-skew-allowance", "Staged.ClockSkewAllowance", durationOrZeroValue,
			func(c *Config) *time.Duration { return &stagedOf(c).ClockSkewAllowance }),
		optionOf("sink.staged.request-timeout", "Staged.RequestTimeout", durationValue, func(c *Config) *time.Duration { return &stagedOf(c).RequestTimeout }),
		optionOf("sink.staged.verify-queue-retention", "Staged.VerifyQueueRetention", boolValue,
			func(c *Config) *bool { return &stagedOf(c).VerifyQueueRetention }),
		optionOf("sink.staged.expired-envelope-policy", "Staged.ExpiredEnvelopePolicy", enumValue("fail, assume-created (or assume-committed), create-anyway, drop",
			map[string]ExpiredEnvelopePolicy{"fail": ExpiredFail, "assume-created": ExpiredAssumeCreated,
				"create-anyway": ExpiredCreateAnyway, "drop": ExpiredDrop,
				// The Flink connector's spelling: "committed" is its word for created.
				"assume-committed": ExpiredAssumeCreated}),
			func(c *Config) *ExpiredEnvelopePolicy { return &stagedOf(c).ExpiredEnvelopePolicy }),
		optionOf("sink.in-flight.max-tasks", "Writer.MaxInFlightTasks", positiveIntValue, func(c *Config) *int { return &c.Writer.MaxInFlightTasks }),
		optionOf("sink.channel-pool-size", "Writer.ChannelPoolSize", positiveIntValue, func(c *Config) *int { return &c.Writer.ChannelPoolSize }),
		optionOf("sink.recovery.initial-backoff", "Writer.RecoveryInitialBackoff", durationValue,
			func(c *Config) *time.Duration { return &c.Writer.RecoveryInitialBackoff }),
		optionOf("sink.recovery.max-backoff", "Writer.RecoveryMaxBackoff", durationValue, func(c *Config) *time.Duration { return &c.Writer.RecoveryMaxBackoff }),
		optionOf("sink.recovery.max-attempts", "Writer.RecoveryMaxAttempts", positiveIntValue, func(c *Config) *int { return &c.Writer.RecoveryMaxAttempts }),
		optionOf("sink.recovery.not-found.initial-backoff", "Writer.NotFoundRecoveryInitialBackoff", durationValue,
			func(c *Config) *time.Duration { return &c.Writer.NotFoundRecoveryInitialBackoff }),
		optionOf("sink.recovery.not-found.max-backoff", "Writer.NotFoundRecoveryMaxBackoff", durationValue,
			func(c *Config) *time.Duration { return &c.Writer.NotFoundRecoveryMaxBackoff }),
		optionOf("sink.recovery.not-found.max-attempts", "Writer.NotFoundRecoveryMaxAttempts", positiveIntValue,
			func(c *Config) *int { return &c.Writer.NotFoundRecoveryMaxAttempts }),
		optionOf("sink.metrics.per-destination", "Writer.PerDestinationMetrics", boolValue, func(c *Config) *bool { return &c.Writer.PerDestinationMetrics }),
		optionOf("sink.queue-preflight", "Writer.QueuePreflight", enumValue(strings.Join(queuePreflightValues, ", "), queuePreflightByValue),
			func(c *Config) *QueuePreflight { return &c.Writer.QueuePreflight }),
		optionOf("sink.in-flight.adaptive", "Writer.AdaptiveConcurrency",
			enumValue("on, off", map[string]AdaptiveConcurrency{"on": AdaptiveConcurrencyOn, "off": AdaptiveConcurrencyOff}),
			func(c *Config) *AdaptiveConcurrency { return &c.Writer.AdaptiveConcurrency }),
	},
	formatRows()[1:],
)

// fixedOptionKeys lists every key of the table that is not a prefix, in table order.
var fixedOptionKeys = func() []string {
	var keys []string
	for _, r := range optionTable {
		if !r.prefix {
			keys = append(keys, r.key)
		}
	}
	return keys
}()

// rowOf returns the row of key k and the entry after a prefix row's key.
func rowOf(k string) (r optionRow, entry string, ok bool) {
	for _, r := range optionTable {
		if r.prefix {
			if rest, found := strings.CutPrefix(k, r.key); found {
				return r, rest, true
			}
		} else if r.key == k {
			return r, "", true
		}
	}
	return optionRow{}, "", false
}

// unsupportedKeys are keys of the Flink connector that have no counterpart here, with the
// reason; https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md lists them among the differences.
var unsupportedKeys = map[string]string{
	"sink.staged.max-tasks": "has no counterpart in this sink: the Flink connector holds a checkpoint's staged tasks in the writer's memory and caps them, " +
		"while here each staged task leaves the stage step at once and the runner keeps it through the Reshuffle, so there is no batch to cap; leave the key out " +
		"(sink.in-flight.max-tasks bounds the creates in flight)",
	"sink.staged.max-bytes": "has no counterpart in this sink: the Flink connector holds a checkpoint's staged tasks in the writer's memory and caps their bytes, " +
		"while here each staged task leaves the stage step at once and the runner keeps it through the Reshuffle, so there is no batch to cap; leave the key out " +
		"(each staged task is still limited to 100,000 bytes)",
}

// OptionError is the error ConfigFromOptions returns: it names the option key at fault and
// says what the key accepts. Reason never repeats a header value, a URL or a file path, so the
// error is safe to log.
type OptionError struct {
	// Key is the option key at fault, exactly as given (for example "sink.recovery.max-attempts"),
	// or a required key that is missing ("project", "location", "queue").
	Key string
	// Reason says what is wrong with the key or its value, and what is accepted.
	Reason string
}

// Error returns `cloudtasksio: option "<key>": <reason>`, with a long key cut short
// (boundedtext.Quote) and the reason cut to maxReasonBytes: neither repeats a huge input in
// full.
func (e *OptionError) Error() string {
	return prefixText("option " + boundedtext.Quote(e.Key) + ": " + boundedtext.Cut(e.Reason, maxReasonBytes))
}

// maxReasonBytes bounds the reason an OptionError prints.
const maxReasonBytes = 1024

func optErr(key, format string, args ...any) *OptionError {
	return &OptionError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// ConfigFromOptions builds a Config from flat option keys, the form templates take as flags and
// the Flink SQL connector takes as WITH options. https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md lists every key; in short:
//
//   - project, location, queue (required): the fixed queue.
//   - target.type: "http" (default) or "app-engine". Every http.* key is rejected for an App
//     Engine target and every app-engine.* key for an HTTP target.
//   - http.url, http.method (default POST), http.headers.<Name>, http.oidc.service-account-email,
//     http.oidc.audience, http.oauth.service-account-email, http.oauth.scope, and
//     http.dispatch-deadline (an extension of this project: HTTPTarget.DispatchDeadline).
//   - app-engine.relative-uri, app-engine.method (default POST), app-engine.headers.<Name>,
//     app-engine.service, app-engine.version, app-engine.instance, and
//     app-engine.dispatch-deadline (an extension of this project: AppEngineTarget.DispatchDeadline).
//   - format (json, form-urlencoded, csv, raw, avro; absent = no body) and its options as
//     <format>.<option>, for example csv.field-delimiter or avro.schema.
//   - service-account-key-file, emulator-endpoint, and the client.* keys (client.endpoint,
//     client.quota-project, client.impersonate-service-account, client.impersonate-delegates,
//     client.universe-domain, client.telemetry): ClientOptions.
//   - sink.delivery-guarantee: "at-least-once" (default) or "exactly-once", and the
//     sink.staged.* keys, which are only accepted with exactly-once.
//   - sink.in-flight.max-tasks, sink.channel-pool-size, sink.recovery.*,
//     sink.recovery.not-found.*, sink.metrics.per-destination, sink.queue-preflight
//     ("warn", "fail" or "off"), sink.in-flight.adaptive ("on" or "off"): WriterOptions.
//
// Values: durations use Go's time.ParseDuration syntax ("250ms", "1m30s", "2h"); booleans are
// "true" or "false" in any letter case; integers are decimal; the enumerated values (target
// type, delivery guarantee, expired-envelope policy, queue preflight, format name, methods) match in any letter
// case. Option keys themselves are case-sensitive; header names keep the case given.
//
// An unknown key, a key of the other target family, a blank value (except for header values,
// app-engine.relative-uri and format options), a value that does not parse or is out of range,
// and a combination the sink would reject (OIDC with OAuth, an emulator with a key file, a
// channel pool or a client.* connection key, a staged key without exactly-once, a max backoff
// below its initial backoff) are
// reported as an *OptionError naming the key. Keys are checked in a fixed order, so the same
// options always give the same error. Checks that need the element type (for example that
// an HTTP target without http.url has a `cloudtasks:"url"` field) happen in TryWrite.
//
// The Config has no QueueFn, Serializer or TaskIDFn and its OnFailure is FailBundle; set those
// fields on the result when needed.
func ConfigFromOptions(opts map[string]string) (Config, error) {
	p := &optionParser{opts: opts, keys: slices.Sorted(maps.Keys(opts))}
	cfg, err := p.config()
	if err != nil {
		return Config{}, err
	}
	if err := cfg.validate(); err != nil {
		var fe *fieldError
		if !errors.As(err, &fe) {
			return Config{}, err
		}
		return Config{}, p.optionError(fe, cfg)
	}
	return cfg, nil
}

// optionParser holds the options being read; its methods return the first error in the fixed
// check order.
type optionParser struct {
	opts map[string]string
	keys []string // the given keys in lexical order
}

func (p *optionParser) given(key string) bool {
	_, ok := p.opts[key]
	return ok
}

// config checks the keys and parses their values into a Config through the table, in a fixed
// order: unknown keys, blank values, missing queue keys, the target type, keys of the other
// target family, format options without their format, then each row's value in table order.
func (p *optionParser) config() (Config, error) {
	for _, k := range p.keys {
		if err := checkKnownKey(k); err != nil {
			return Config{}, err
		}
	}
	for _, k := range p.keys {
		if r, _, _ := rowOf(k); !r.blankOK && strings.TrimSpace(p.opts[k]) == "" {
			return Config{}, optErr(k, "the value is blank; %s", r.help)
		}
	}
	for _, r := range optionTable {
		if r.required && !p.given(r.key) {
			return Config{}, optErr(r.key, "is required (the fixed queue is projects/<project>/locations/<location>/queues/<queue>)")
		}
	}

	var cfg Config
	family := familyHTTP
	if v, ok := p.opts[optTargetType]; ok {
		f, why := enumValue("http, app-engine", map[string]targetFamily{"http": familyHTTP, "app-engine": familyAppEngine}).parse(v)
		if why != "" {
			return Config{}, optErr(optTargetType, "%s", why)
		}
		family = f
	}
	if family == familyHTTP {
		cfg.HTTP = &HTTPTarget{Method: "POST"}
	} else {
		cfg.AppEngine = &AppEngineTarget{Method: "POST"}
	}
	for _, k := range p.keys {
		if r, _, _ := rowOf(k); r.family != 0 && r.family != family {
			return Config{}, optErr(k, "belongs to target.type %s, but target.type is %s", r.family, family)
		}
	}
	format, hasFormat := p.opts[optFormat]
	format = strings.ToLower(format)
	for _, k := range p.keys {
		if fname, _, ok := formatOptionKey(k); ok && (!hasFormat || fname != format) {
			current := "not set"
			if hasFormat {
				current = format
			}
			return Config{}, optErr(k, "applies to format %s, but format is %s", fname, current)
		}
	}

	for _, r := range optionTable {
		if r.set == nil {
			continue
		}
		for _, k := range p.keysOf(r) {
			entry, _ := strings.CutPrefix(k, r.key)
			if why := r.set(&cfg, entry, p.opts[k]); why != "" {
				return Config{}, optErr(k, "%s", why)
			}
		}
	}
	return cfg, nil
}

// keysOf returns the given keys of row r: its key, or every key under its prefix.
func (p *optionParser) keysOf(r optionRow) []string {
	if !r.prefix {
		if p.given(r.key) {
			return []string{r.key}
		}
		return nil
	}
	var keys []string
	for _, k := range p.keys {
		if strings.HasPrefix(k, r.key) {
			keys = append(keys, k)
		}
	}
	return keys
}

// optionError turns a field error of the parsed Config into an *OptionError for the key the
// table maps its field to, with the message naming every field by its key.
func (p *optionParser) optionError(fe *fieldError, cfg Config) *OptionError {
	key := p.blame(fe)
	reason := fe.say(optionKeyName)
	if r, _, _ := rowOf(key); !r.prefix && len(fe.entries) > 0 {
		// The error is about options of the format, but none was given (an option the format
		// requires): name their keys.
		var keys []string
		for _, e := range fe.entries {
			keys = append(keys, bodyOf(&cfg).Name+"."+e)
		}
		if len(keys) > 0 {
			reason += " (key " + strings.Join(keys, ", ") + ")"
		}
	}
	return &OptionError{Key: key, Reason: reason}
}

// blame returns the key a field error names: for the first of its fields that a given key
// sets, that key (in table order; for an error about entries, the given key of the first
// entry in key order).
func (p *optionParser) blame(fe *fieldError) string {
	for _, field := range fe.fields {
		for _, r := range optionTable {
			if !r.sets(field) {
				continue
			}
			for _, k := range p.keysOf(r) {
				entry, _ := strings.CutPrefix(k, r.key)
				if !r.prefix && len(fe.entries) == 0 || r.prefix && (len(fe.entries) == 0 || slices.Contains(fe.entries, entry)) {
					return k
				}
			}
		}
	}
	// No given key is about the entries (a format option the format requires): the first given
	// key of the field, else its first key.
	for _, r := range optionTable {
		if keys := p.keysOf(r); r.sets(fe.fields[0]) && len(keys) > 0 {
			return keys[0]
		}
	}
	for _, r := range optionTable {
		if !r.prefix && r.sets(fe.fields[0]) {
			return r.key
		}
	}
	return fe.fields[0]
}

// optionKeyName names a Config field by its option key in ConfigFromOptions' errors: the key
// of the one row that sets it, the shared start of several ("http.oidc.*"), or the prefix of
// a key family ("http.headers"). A field no key sets keeps its Go name.
func optionKeyName(field string) string {
	var keys, prefixes []string
	for _, r := range optionTable {
		if r.sets(field) {
			if r.prefix {
				prefixes = append(prefixes, strings.TrimSuffix(r.key, "."))
			} else {
				keys = append(keys, r.key)
			}
		}
	}
	switch {
	case len(keys) == 1:
		return keys[0]
	case len(keys) > 1:
		common := keys[0]
		for _, k := range keys[1:] {
			for !strings.HasPrefix(k, common) {
				common = common[:strings.LastIndexByte(common, '.')+1]
			}
		}
		if common == "" {
			return strings.Join(keys, ", ")
		}
		return common + "*"
	case len(prefixes) > 0:
		return prefixes[0]
	}
	return goFieldName(field)
}

// formatOptionKey splits "<format>.<option>" for a known format name.
func formatOptionKey(k string) (format, option string, ok bool) {
	for _, name := range bodyformat.Names() {
		if rest, found := strings.CutPrefix(k, name+"."); found {
			return name, rest, true
		}
	}
	return "", "", false
}

// checkKnownKey rejects a key that is not in the table (or not an accepted entry of a format).
func checkKnownKey(k string) error {
	if reason, ok := unsupportedKeys[k]; ok {
		return optErr(k, "%s", reason)
	}
	if r, entry, ok := rowOf(k); ok {
		if r.entries == nil || slices.Contains(r.entries, entry) {
			return nil
		}
		name := strings.TrimSuffix(r.key, ".")
		return optErr(k, "unknown option key: format %s takes %s", name, prefixed(r.key, r.entries))
	}
	if name, _, ok := formatOptionKey(k); ok {
		return optErr(k, "unknown option key: format %s takes no options", name)
	}
	// Suggest the keys of the same group ("sink.recovery.*", "http.*", ...), else all top-level
	// keys, so a typo is easy to fix.
	var similar []string
	if i := strings.LastIndexByte(k, '.'); i > 0 {
		group := k[:i+1]
		for _, known := range fixedOptionKeys {
			if strings.HasPrefix(known, group) {
				similar = append(similar, known)
			}
		}
	}
	if len(similar) == 0 {
		similar = append(similar, fixedOptionKeys...)
	}
	return optErr(k, "unknown option key (keys are case-sensitive); known keys include %s", strings.Join(similar, ", "))
}

func prefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}

// quoteValue quotes a rejected value for an error, cut to a length that identifies it without
// flooding the message. It is only used for values of typed keys (numbers, durations,
// booleans, enumerations), never for header values, URLs or paths.
func quoteValue(v string) string {
	const shown = 40 // bytes of a long value kept before the marker
	return strconv.Quote(boundedtext.Cut(v, shown+len(boundedtext.Marker)))
}
