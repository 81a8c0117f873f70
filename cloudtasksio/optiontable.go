package cloudtasksio

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// This file is the table of ConfigFromOptions' option keys (the SQL connector's WITH options,
// the flags of templates): a row per key, or per family of keys such as the headers, with the
// Config fields it sets, what it accepts and how its value is parsed (optionvalues.go). The
// target families contribute their rows from their own files (http.go, appengine.go) through
// the target family table (target.go). The parser
// (configfromoptions.go) and its errors (optionerrors.go) read nothing but this table, and
// https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md is the user
// reference of every key.

// optionRow is one option key of ConfigFromOptions, like a flag of a flag.FlagSet.
type optionRow struct {
	// key is the option key, or with prefix the start shared by a family of keys whose rest
	// is an entry: a header name ("http.headers.X-Trace") or a format option ("csv.null-literal").
	key    string
	prefix bool
	// entries lists the entries a prefix row accepts; nil accepts any (header names).
	entries []string
	// family is the target.type value of the family the key belongs to; "" for keys of every
	// target.
	family string
	// fields are the Config field paths the key sets: a field error about one of them, or
	// about a field below one, names this key.
	fields []string
	// help says what the key accepts, for errors.
	help string
	// required keys must be given; blankOK keys accept an empty value.
	required, blankOK bool
	// value is the Go type set parses the value into; nil for text the row keeps as given
	// (target.type, header values, format options).
	value reflect.Type
	// set parses value and stores it in cfg; why says what is wrong with a rejected value.
	set func(cfg *Config, entry, value string) (why string)
}

// optionOf is the row of a key whose value of kind k is stored where field points.
func optionOf[T any](key, path string, k valueKind[T], field func(*Config) *T) optionRow {
	return optionRow{key: key, fields: []string{path}, help: k.help, value: reflect.TypeFor[T](), set: func(cfg *Config, _, v string) string {
		x, why := k.parse(v)
		if why == "" {
			*field(cfg) = x
		}
		return why
	}}
}

// withHelp returns r saying help instead of its kind's.
func (r optionRow) withHelp(help string) optionRow { r.help = help; return r }

// blank returns r accepting an empty value.
func (r optionRow) blank() optionRow { r.blankOK = true; return r }

// Option keys named outside their row.
const (
	optTargetType = "target.type"
	optFormat     = "format"
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
func bodyOf(cfg *Config) *formats.Format { return cfg.target().body() }

// bodyFields are the fields the format keys set, whichever the target.
var bodyFields = func() []string {
	var fields []string
	for _, f := range targetFamilies {
		fields = append(fields, f.field+".Body")
	}
	return fields
}()

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
func headerRow(prefix, path string, headers func(*Config) *map[string]string) optionRow {
	return optionRow{key: prefix, prefix: true, fields: []string{path}, blankOK: true,
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
		{key: optTargetType, help: "accepted: " + strings.Join(familyNames(), ", ")}, // read first, by ConfigFromOptions itself
	},
	familyOptionRows(),
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
		optionOf("sink.destination-failure", "OnDestinationFailure", enumValue("fail, isolate", destinationFailureByValue),
			func(c *Config) *DestinationFailurePolicy { return &c.OnDestinationFailure }),
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
		optionOf("sink.attempt-timeout", "Writer.AttemptTimeout", durationValue, func(c *Config) *time.Duration { return &c.Writer.AttemptTimeout }),
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
		optionOf("sink.queue-health.interval", "Writer.QueueHealthInterval", durationOrZeroValue,
			func(c *Config) *time.Duration { return &c.Writer.QueueHealthInterval }),
		optionOf("sink.in-flight.adaptive", "Writer.AdaptiveConcurrency",
			enumValue("on, off", map[string]AdaptiveConcurrency{"on": AdaptiveConcurrencyOn, "off": AdaptiveConcurrencyOff}),
			func(c *Config) *AdaptiveConcurrency { return &c.Writer.AdaptiveConcurrency }),
		optionOf("sink.in-flight.adaptive-start-rate", "Writer.AdaptiveStartRate", startRateValue,
			func(c *Config) *float64 { return &c.Writer.AdaptiveStartRate }),
	},
	formatRows()[1:],
)

// familyNames are the target.type values, in table order.
func familyNames() []string {
	var names []string
	for _, f := range targetFamilies {
		names = append(names, f.name)
	}
	return names
}

// familyOptionRows are the option keys of every target family, family by family.
func familyOptionRows() []optionRow {
	var rows []optionRow
	for _, f := range targetFamilies {
		rows = append(rows, f.options...)
	}
	return rows
}

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

// rowsSetting maps every Config field path the table sets, and every path above one
// ("HTTP.OIDC", "Staged"), to the rows that set it or a field below it, in table order: the
// one lookup through which a field error finds the key to blame and the name it prints.
var rowsSetting = func() map[string][]optionRow {
	m := map[string][]optionRow{}
	for _, r := range optionTable {
		paths := map[string]bool{}
		for _, f := range r.fields {
			for p := f; ; p = p[:strings.LastIndexByte(p, '.')] {
				paths[p] = true
				if !strings.Contains(p, ".") {
					break
				}
			}
		}
		for p := range paths {
			m[p] = append(m[p], r)
		}
	}
	return m
}()
