package cloudtasksio

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
)

// This file is ConfigFromOptions: it reads the given keys through the key table
// (optiontable.go) in named passes, each returning the first error it finds, then checks the
// Config it built with Config.validate and reports a broken rule against the key that set the
// field (optionerrors.go).

// ConfigFromOptions builds a Config from flat option keys, the form templates take as flags and
// the Flink SQL connector takes as WITH options.
// https://github.com/beam-cloudtasks/beam-cloudtasks/blob/main/docs/options.md describes every
// key; each item below names its keys before the colon:
//
//   - project, location, queue: the fixed queue; all three are required.
//   - target.type: "http" (default) or "app-engine". Every http.* key is rejected for an App
//     Engine target and every app-engine.* key for an HTTP target.
//   - http.url, http.method, http.headers.<Name>, http.oidc.service-account-email,
//     http.oidc.audience, http.oauth.service-account-email, http.oauth.scope,
//     http.dispatch-deadline: HTTPTarget; the method defaults to POST, and the dispatch
//     deadline is an extension of this project.
//   - app-engine.relative-uri, app-engine.method, app-engine.headers.<Name>,
//     app-engine.service, app-engine.version, app-engine.instance,
//     app-engine.dispatch-deadline: AppEngineTarget and its routing; the method defaults to
//     POST, and the dispatch deadline is an extension of this project.
//   - format: json, form-urlencoded, csv, raw or avro; without it tasks have no body.
//   - csv.field-delimiter, csv.null-literal, csv.quote-character,
//     csv.disable-quote-character, avro.schema: the options of the format named in the key,
//     accepted only with that format.
//   - service-account-key-file, emulator-endpoint: Config.ServiceAccountKeyFile and
//     Config.EmulatorEndpoint.
//   - client.endpoint, client.quota-project, client.impersonate-service-account,
//     client.impersonate-delegates, client.universe-domain, client.telemetry: ClientOptions.
//   - sink.delivery-guarantee: "at-least-once" (default) or "exactly-once".
//   - sink.destination-failure: Config.OnDestinationFailure, "fail" (default) or "isolate"
//     (at-least-once only; TryWrite then wants OnFailure LogAndDrop or DeadLetter).
//   - sink.staged.name-retention, sink.staged.clock-skew-allowance,
//     sink.staged.request-timeout, sink.staged.verify-queue-retention,
//     sink.staged.expired-envelope-policy: StagedOptions, only accepted with exactly-once.
//   - sink.in-flight.max-tasks, sink.channel-pool-size, sink.attempt-timeout,
//     sink.recovery.initial-backoff, sink.recovery.max-backoff, sink.recovery.max-attempts,
//     sink.recovery.not-found.initial-backoff, sink.recovery.not-found.max-backoff,
//     sink.recovery.not-found.max-attempts, sink.metrics.per-destination,
//     sink.queue-preflight, sink.queue-health.interval, sink.in-flight.adaptive,
//     sink.in-flight.adaptive-start-rate: WriterOptions; the queue preflight takes "warn",
//     "fail" or "off", the queue health interval a duration ("0" is off), adaptive
//     concurrency "on" or "off", the start rate a decimal number of creates per second above
//     0.
//
// Values: durations use Go's time.ParseDuration syntax ("250ms", "1m30s", "2h") or the Flink
// connector's ("250 ms", "5 min", "1 d"; a number without a unit is refused, apart from Go's
// "0"); booleans are "true" or "false" in any letter case; integers are decimal; the
// enumerated values (target type, delivery guarantee, expired-envelope policy, queue
// preflight, format name, methods) match in any letter case. Option keys themselves are
// case-sensitive; header names keep the case given.
//
// An unknown key, a key of the other target family, a blank value (except for header values,
// app-engine.relative-uri and format options), a value that does not parse or is out of range,
// and a combination the sink would reject (OIDC with OAuth, an emulator with a key file, a
// channel pool or a client.* connection key, a staged key without exactly-once or
// sink.attempt-timeout with it, a max backoff below its initial backoff) are reported as an *OptionError naming the key. Keys are checked
// in a fixed order, so the same options always give the same error. Checks that need the
// element type (for example that an HTTP target without http.url has a `cloudtasks:"url"`
// field) happen in TryWrite.
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

// optionParser holds the options being read; its passes return the first error they find.
type optionParser struct {
	opts map[string]string
	keys []string // the given keys in lexical order
}

// config runs the passes in their fixed order: the checks of the keys alone, the target
// family, the keys that depend on the target family and on the format, then each row's value
// in table order.
func (p *optionParser) config() (Config, error) {
	for _, check := range []func() error{p.checkKeysKnown, p.checkValuesNotBlank, p.checkRequiredKeysGiven} {
		if err := check(); err != nil {
			return Config{}, err
		}
	}
	family, err := p.targetFamily()
	if err != nil {
		return Config{}, err
	}
	if err := p.checkKeysOfFamily(family); err != nil {
		return Config{}, err
	}
	if err := p.checkFormatOptionsMatchFormat(); err != nil {
		return Config{}, err
	}
	var cfg Config
	family.fill(&cfg)
	return cfg, p.setValues(&cfg)
}

// checkKeysKnown rejects the first key, in key order, that is not in the table (or not an
// accepted entry of a format), naming the known keys of its group so that a typo is easy to fix.
func (p *optionParser) checkKeysKnown() error {
	for _, k := range p.keys {
		if reason, ok := unsupportedKeys[k]; ok {
			return optErr(k, "%s", reason)
		}
		if r, entry, ok := rowOf(k); ok {
			if r.entries == nil || slices.Contains(r.entries, entry) {
				continue
			}
			return optErr(k, "unknown option key: format %s takes %s", strings.TrimSuffix(r.key, "."), prefixed(r.key, r.entries))
		}
		if name, ok := formatOfOptionKey(k); ok {
			return optErr(k, "unknown option key: format %s takes no options", name)
		}
		// The keys of the same group ("sink.recovery.*", "http.*", ...), else all top-level keys.
		var similar []string
		if i := strings.LastIndexByte(k, '.'); i > 0 {
			for _, known := range fixedOptionKeys {
				if strings.HasPrefix(known, k[:i+1]) {
					similar = append(similar, known)
				}
			}
		}
		if len(similar) == 0 {
			similar = fixedOptionKeys
		}
		return optErr(k, "unknown option key (keys are case-sensitive); known keys include %s", strings.Join(similar, ", "))
	}
	return nil
}

// checkValuesNotBlank rejects a blank value of a key whose row does not accept one.
func (p *optionParser) checkValuesNotBlank() error {
	for _, k := range p.keys {
		if r, _, _ := rowOf(k); !r.blankOK && strings.TrimSpace(p.opts[k]) == "" {
			return optErr(k, "the value is blank; %s", r.help)
		}
	}
	return nil
}

// checkRequiredKeysGiven rejects the first required key of the table that is missing.
func (p *optionParser) checkRequiredKeysGiven() error {
	for _, r := range optionTable {
		if _, ok := p.opts[r.key]; r.required && !ok {
			return optErr(r.key, "is required (the fixed queue is projects/<project>/locations/<location>/queues/<queue>)")
		}
	}
	return nil
}

// targetFamily reads target.type: the first family of the table unless it names another.
func (p *optionParser) targetFamily() (targetFamily, error) {
	v, ok := p.opts[optTargetType]
	if !ok {
		return targetFamilies[0], nil
	}
	byName := map[string]targetFamily{}
	for _, f := range targetFamilies {
		byName[f.name] = f
	}
	f, why := enumValue(strings.Join(familyNames(), ", "), byName).parse(v)
	if why != "" {
		return targetFamily{}, optErr(optTargetType, "%s", why)
	}
	return f, nil
}

// checkKeysOfFamily rejects a key of the other target family.
func (p *optionParser) checkKeysOfFamily(family targetFamily) error {
	for _, k := range p.keys {
		if r, _, _ := rowOf(k); r.family != "" && r.family != family.name {
			return optErr(k, "belongs to target.type %s, but target.type is %s", r.family, family.name)
		}
	}
	return nil
}

// checkFormatOptionsMatchFormat rejects a format option ("csv.null-literal") given without
// its format.
func (p *optionParser) checkFormatOptionsMatchFormat() error {
	format, hasFormat := p.opts[optFormat]
	current := "not set"
	if hasFormat {
		format = strings.ToLower(format)
		current = format
	}
	for _, k := range p.keys {
		if name, ok := formatOfOptionKey(k); ok && (!hasFormat || name != format) {
			return optErr(k, "applies to format %s, but format is %s", name, current)
		}
	}
	return nil
}

// setValues parses the value of each given key into cfg, row by row in table order (the keys
// under a prefix in key order).
func (p *optionParser) setValues(cfg *Config) error {
	for _, r := range optionTable {
		if r.set == nil {
			continue
		}
		for _, k := range p.keysOf(r) {
			entry, _ := strings.CutPrefix(k, r.key)
			if why := r.set(cfg, entry, p.opts[k]); why != "" {
				return optErr(k, "%s", why)
			}
		}
	}
	return nil
}

// keysOf returns the given keys of row r: its key, or every key under its prefix.
func (p *optionParser) keysOf(r optionRow) []string {
	if !r.prefix {
		if _, ok := p.opts[r.key]; ok {
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

// formatOfOptionKey returns the format of a key "<format>.<option>" for a known format name.
func formatOfOptionKey(k string) (format string, ok bool) {
	for _, name := range bodyformat.Names() {
		if strings.HasPrefix(k, name+".") {
			return name, true
		}
	}
	return "", false
}
