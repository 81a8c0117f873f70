package cloudtasksio

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/formats"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/bodyformat"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// This file maps the flat option keys of templates and flags (the SQL connector's WITH
// options) onto a Config. docs/options.md is the user reference of every key.

// Option keys of ConfigFromOptions that are not header or format-option families.
const (
	optProject  = "project"
	optLocation = "location"
	optQueue    = "queue"

	optTargetType = "target.type"

	optHTTPURL              = "http.url"
	optHTTPMethod           = "http.method"
	optHTTPOIDCEmail        = "http.oidc.service-account-email"
	optHTTPOIDCAudience     = "http.oidc.audience"
	optHTTPOAuthEmail       = "http.oauth.service-account-email"
	optHTTPOAuthScope       = "http.oauth.scope"
	optHTTPDispatchDeadline = "http.dispatch-deadline"

	optAppEngineRelativeURI = "app-engine.relative-uri"
	optAppEngineMethod      = "app-engine.method"
	optAppEngineService     = "app-engine.service"
	optAppEngineVersion     = "app-engine.version"
	optAppEngineInstance    = "app-engine.instance"
	optAppEngineDeadline    = "app-engine.dispatch-deadline"

	optFormat = "format"

	optServiceAccountKeyFile = "service-account-key-file"
	optEmulatorEndpoint      = "emulator-endpoint"

	optClientEndpoint     = "client.endpoint"
	optClientQuotaProject = "client.quota-project"
	optClientImpersonate  = "client.impersonate-service-account"
	optClientDelegates    = "client.impersonate-delegates"
	optClientUniverse     = "client.universe-domain"
	optClientTelemetry    = "client.telemetry"

	optDelivery = "sink.delivery-guarantee"

	optStagedNameRetention  = "sink.staged.name-retention"
	optStagedClockSkew      = "sink.staged.clock-skew-allowance"
	optStagedRequestTimeout = "sink.staged.request-timeout"
	optStagedVerify         = "sink.staged.verify-queue-retention"
	optStagedExpiredPolicy  = "sink.staged.expired-envelope-policy"

	optMaxInFlight         = "sink.in-flight.max-tasks"
	optChannelPoolSize     = "sink.channel-pool-size"
	optRecoveryInitial     = "sink.recovery.initial-backoff"
	optRecoveryMax         = "sink.recovery.max-backoff"
	optRecoveryAttempts    = "sink.recovery.max-attempts"
	optNotFoundInitial     = "sink.recovery.not-found.initial-backoff"
	optNotFoundMax         = "sink.recovery.not-found.max-backoff"
	optNotFoundAttempts    = "sink.recovery.not-found.max-attempts"
	optPerDestinationStats = "sink.metrics.per-destination"

	// Prefixes of the header families: the rest of the key is the header name.
	optHTTPHeaders      = "http.headers."
	optAppEngineHeaders = "app-engine.headers."

	// Prefixes of the two target families: every key under one is rejected for the other.
	prefixHTTP      = "http."
	prefixAppEngine = "app-engine."
	prefixStaged    = "sink.staged."
)

// fixedOptionKeys lists every option key that is not a header or a format option, in the order
// of the documentation.
var fixedOptionKeys = []string{
	optProject, optLocation, optQueue, optTargetType,
	optHTTPURL, optHTTPMethod, optHTTPOIDCEmail, optHTTPOIDCAudience, optHTTPOAuthEmail,
	optHTTPOAuthScope, optHTTPDispatchDeadline,
	optAppEngineRelativeURI, optAppEngineMethod, optAppEngineService, optAppEngineVersion,
	optAppEngineInstance, optAppEngineDeadline,
	optFormat, optServiceAccountKeyFile, optEmulatorEndpoint,
	optClientEndpoint, optClientQuotaProject, optClientImpersonate, optClientDelegates,
	optClientUniverse, optClientTelemetry,
	optDelivery, optStagedNameRetention, optStagedClockSkew, optStagedRequestTimeout,
	optStagedVerify, optStagedExpiredPolicy,
	optMaxInFlight, optChannelPoolSize, optRecoveryInitial, optRecoveryMax, optRecoveryAttempts,
	optNotFoundInitial, optNotFoundMax, optNotFoundAttempts, optPerDestinationStats,
}

// blankAllowed are the keys whose empty value means something; every other key rejects a
// blank value. Header values and format options are handled separately.
var blankAllowed = map[string]bool{optAppEngineRelativeURI: true}

// Accepted values of the enumerated keys, as listed in errors and docs.
var (
	targetTypeValues     = []string{"http", "app-engine"}
	deliveryValues       = []string{"at-least-once", "exactly-once"}
	expiredPolicyByValue = map[string]ExpiredEnvelopePolicy{
		"fail": ExpiredFail, "assume-created": ExpiredAssumeCreated,
		"create-anyway": ExpiredCreateAnyway, "drop": ExpiredDrop,
		// The Flink connector's spelling: "committed" is its word for created.
		"assume-committed": ExpiredAssumeCreated,
	}
	expiredPolicyValues = []string{"fail", "assume-created (or assume-committed)", "create-anyway", "drop"}
)

// unsupportedKeys are keys of the Flink connector that have no counterpart here, with the
// reason; docs/options.md lists them among the differences.
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

// Error returns `cloudtasksio: option "<key>": <reason>`.
func (e *OptionError) Error() string {
	return "cloudtasksio: option " + strconv.Quote(e.Key) + ": " + e.Reason
}

func optErr(key, format string, args ...any) *OptionError {
	return &OptionError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// ConfigFromOptions builds a Config from flat option keys, the form templates take as flags and
// the Flink SQL connector takes as WITH options. docs/options.md lists every key; in short:
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
//   - service-account-key-file, emulator-endpoint.
//   - sink.delivery-guarantee: "at-least-once" (default) or "exactly-once", and the
//     sink.staged.* keys, which are only accepted with exactly-once.
//   - sink.in-flight.max-tasks, sink.channel-pool-size, sink.recovery.*,
//     sink.recovery.not-found.*, sink.metrics.per-destination: WriterOptions.
//
// Values: durations use Go's time.ParseDuration syntax ("250ms", "1m30s", "2h"); booleans are
// "true" or "false" in any letter case; integers are decimal; the enumerated values (target
// type, delivery guarantee, expired-envelope policy, format name, methods) match in any letter
// case. Option keys themselves are case-sensitive; header names keep the case given.
//
// An unknown key, a key of the other target family, a blank value (except for header values,
// app-engine.relative-uri and format options), a value that does not parse or is out of range,
// and a combination the sink would reject (OIDC with OAuth, an emulator with a key file or a
// channel pool, a staged key without exactly-once, a max backoff below its initial backoff) are
// reported as an *OptionError naming the key. Keys are checked in a fixed order, so the same
// options always give the same error. Checks that need the element type (for example that
// an HTTP target without http.url has a `cloudtasks:"url"` field) happen in TryWrite.
//
// The Config has no QueueFn, Serializer or TaskIDFn and its OnFailure is FailBundle; set those
// fields on the result when needed.
func ConfigFromOptions(opts map[string]string) (Config, error) {
	p := &optionParser{opts: opts}
	cfg, err := p.config()
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// optionParser holds the options being read; its methods return the first error in the fixed
// check order.
type optionParser struct {
	opts map[string]string
}

func (p *optionParser) get(key string) (string, bool) {
	v, ok := p.opts[key]
	return v, ok
}

// sortedKeys returns the option keys in lexical order.
func (p *optionParser) sortedKeys() []string {
	keys := make([]string, 0, len(p.opts))
	for k := range p.opts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (p *optionParser) config() (Config, error) {
	keys := p.sortedKeys()
	for _, k := range keys {
		if err := checkKnownKey(k); err != nil {
			return Config{}, err
		}
	}
	for _, k := range keys {
		if fixedKey(k) && !blankAllowed[k] && strings.TrimSpace(p.opts[k]) == "" {
			return Config{}, optErr(k, "the value is blank; %s", describeKey(k))
		}
	}

	var cfg Config
	q, err := p.queue()
	if err != nil {
		return Config{}, err
	}
	cfg.Queue = q

	family, err := p.targetFamily(keys)
	if err != nil {
		return Config{}, err
	}
	body, err := p.format(keys)
	if err != nil {
		return Config{}, err
	}
	if family == familyHTTP {
		if cfg.HTTP, err = p.httpTarget(keys, body); err != nil {
			return Config{}, err
		}
	} else {
		if cfg.AppEngine, err = p.appEngineTarget(keys, body); err != nil {
			return Config{}, err
		}
	}
	if err := p.client(&cfg); err != nil {
		return Config{}, err
	}
	if err := p.delivery(keys, &cfg); err != nil {
		return Config{}, err
	}
	if cfg.Writer, err = p.writer(); err != nil {
		return Config{}, err
	}
	if cfg.Writer.ChannelPoolSize != 0 && cfg.EmulatorEndpoint != "" {
		return Config{}, optErr(optChannelPoolSize, "cannot be combined with %q: an emulator always uses one plaintext connection", optEmulatorEndpoint)
	}
	return cfg, nil
}

// fixedKey reports whether k is one of fixedOptionKeys.
func fixedKey(k string) bool { return slices.Contains(fixedOptionKeys, k) }

// formatOptionKey splits "<format>.<option>" for a known format name.
func formatOptionKey(k string) (format, option string, ok bool) {
	for _, name := range bodyformat.Names() {
		if rest, found := strings.CutPrefix(k, name+"."); found {
			return name, rest, true
		}
	}
	return "", "", false
}

// checkKnownKey rejects a key that is neither fixed, nor a header entry, nor an option of a
// known format.
func checkKnownKey(k string) error {
	if fixedKey(k) {
		return nil
	}
	if reason, ok := unsupportedKeys[k]; ok {
		return optErr(k, "%s", reason)
	}
	if _, ok := headerPrefix(k); ok {
		return nil
	}
	if name, option, ok := formatOptionKey(k); ok {
		accepted, _ := bodyformat.OptionKeys(name)
		if slices.Contains(accepted, option) {
			return nil
		}
		if len(accepted) == 0 {
			return optErr(k, "unknown option key: format %s takes no options", name)
		}
		return optErr(k, "unknown option key: format %s takes %s", name, prefixed(name+".", accepted))
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

// headerPrefix returns the header family prefix of k, if k is a header entry.
func headerPrefix(k string) (string, bool) {
	for _, prefix := range []string{optHTTPHeaders, optAppEngineHeaders} {
		if strings.HasPrefix(k, prefix) {
			return prefix, true
		}
	}
	return "", false
}

func prefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}

// describeKey says what a fixed key accepts, for the blank-value error.
func describeKey(k string) string {
	switch k {
	case optTargetType:
		return "accepted: " + strings.Join(targetTypeValues, ", ")
	case optDelivery:
		return "accepted: " + strings.Join(deliveryValues, ", ")
	case optStagedExpiredPolicy:
		return "accepted: " + strings.Join(expiredPolicyValues, ", ")
	case optFormat:
		return "accepted: " + strings.Join(bodyformat.Names(), ", ") + " (leave the key out to send no body)"
	case optHTTPMethod, optAppEngineMethod:
		return "accepted: " + methodList
	case optStagedVerify, optPerDestinationStats:
		return "accepted: true, false"
	case optClientTelemetry:
		return "accepted: on, off"
	case optHTTPDispatchDeadline, optAppEngineDeadline, optStagedNameRetention, optStagedClockSkew, optStagedRequestTimeout,
		optRecoveryInitial, optRecoveryMax, optNotFoundInitial, optNotFoundMax:
		return "accepted: a Go duration such as 500ms, 10s or 1h"
	case optMaxInFlight, optChannelPoolSize, optRecoveryAttempts, optNotFoundAttempts:
		return "accepted: a decimal integer of at least 1"
	case optProject, optLocation, optQueue:
		return "the key is required and names part of the queue path"
	case optHTTPURL:
		return "accepted: an absolute http or https URL (leave the key out when every element carries a url field)"
	}
	return "leave the key out instead"
}

const methodList = "POST, GET, HEAD, PUT, DELETE, PATCH, OPTIONS"

// queue reads the three required queue keys.
func (p *optionParser) queue() (Queue, error) {
	parts := []struct{ key, placeholder string }{
		{optProject, "p"}, {optLocation, "l"}, {optQueue, "q"},
	}
	values := make([]string, len(parts))
	for i, part := range parts {
		v, ok := p.get(part.key)
		if !ok {
			return Queue{}, optErr(part.key, "is required (the fixed queue is projects/<project>/locations/<location>/queues/<queue>)")
		}
		values[i] = v
	}
	// Check each part on its own so the error names its key.
	for i, part := range parts {
		check := []string{"p", "l", "q"}
		check[i] = values[i]
		if _, err := NewQueue(check[0], check[1], check[2]); err != nil {
			why := map[string]string{
				optProject:  "must be a project id: " + projectRule,
				optLocation: "must be a location id: " + locationRule,
				optQueue:    "must be a queue id: " + queueIDRule + " characters",
			}[part.key]
			return Queue{}, optErr(part.key, "%s", why)
		}
	}
	return Queue{Project: values[0], Location: values[1], Name: values[2]}, nil
}

// targetFamily reads target.type and rejects every key of the other family.
func (p *optionParser) targetFamily(keys []string) (targetFamily, error) {
	family := familyHTTP
	if v, ok := p.get(optTargetType); ok {
		switch strings.ToLower(v) {
		case "http":
		case "app-engine":
			family = familyAppEngine
		default:
			return 0, optErr(optTargetType, "value %s is not accepted; accepted: %s", quoteValue(v), strings.Join(targetTypeValues, ", "))
		}
	}
	other, otherName := prefixAppEngine, "app-engine"
	if family == familyAppEngine {
		other, otherName = prefixHTTP, "http"
	}
	for _, k := range keys {
		if strings.HasPrefix(k, other) {
			return 0, optErr(k, "belongs to target.type %s, but target.type is %s", otherName, family)
		}
	}
	return family, nil
}

// format reads the format name and its <format>.<option> keys.
func (p *optionParser) format(keys []string) (formats.Format, error) {
	name, hasName := p.get(optFormat)
	name = strings.ToLower(name)
	if hasName && !slices.Contains(bodyformat.Names(), name) {
		return formats.Format{}, optErr(optFormat, "value %s is not a known format; %s", quoteValue(name), describeKey(optFormat))
	}
	f := formats.Format{Name: name}
	var optionKeys []string
	for _, k := range keys {
		fname, option, ok := formatOptionKey(k)
		if !ok {
			continue
		}
		if !hasName || fname != name {
			current := "not set"
			if hasName {
				current = name
			}
			return formats.Format{}, optErr(k, "applies to format %s, but format is %s", fname, current)
		}
		f = f.With(option, p.opts[k])
		optionKeys = append(optionKeys, k)
	}
	if !hasName {
		return formats.Format{}, nil
	}
	if name == formats.NameAvro {
		if _, ok := f.Options[formats.OptionAvroSchema]; !ok {
			return formats.Format{}, optErr(optFormat, "format avro needs its writer schema in %q (JSON text)", formats.NameAvro+"."+formats.OptionAvroSchema)
		}
	}
	if err := bodyformat.Validate(f); err != nil {
		// The error names options without the "<format>." prefix; report the first flat key
		// (in key order) of the options it is about.
		key := optFormat
		var oe *bodyformat.OptionError
		if errors.As(err, &oe) {
			for _, k := range optionKeys {
				if _, option, _ := formatOptionKey(k); slices.Contains(oe.Options, option) {
					key = k
					break
				}
			}
		}
		return formats.Format{}, optErr(key, "%v", err)
	}
	return f, nil
}

// headers collects the header entries under prefix and checks their names and values.
func (p *optionParser) headers(keys []string, prefix string, appEngine bool) (map[string]string, error) {
	var headers map[string]string
	folded := map[string]string{} // lower-case name -> key
	var first string
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if first == "" {
			first = k
		}
		if name == "" {
			return nil, optErr(k, "the header name after %q is empty", prefix)
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return nil, optErr(k, "the header name is not a valid HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)")
			}
		}
		lower := strings.ToLower(name)
		if other, dup := folded[lower]; dup {
			return nil, optErr(k, "names the same header as %q (header names ignore case)", other)
		}
		folded[lower] = k
		if appEngine && (lower == "host" || lower == "content-length" ||
			strings.HasPrefix(lower, "x-google-") || strings.HasPrefix(lower, "x-appengine-")) {
			return nil, optErr(k, "Host, Content-Length, X-Google-* and X-AppEngine-* are set by Cloud Tasks or App Engine and cannot be overridden")
		}
		if strings.ContainsAny(p.opts[k], "\r\n\x00") {
			return nil, optErr(k, "the header value contains CR, LF or NUL")
		}
		if headers == nil {
			headers = map[string]string{}
		}
		headers[name] = p.opts[k]
	}
	if err := checkHeaders("the headers", headers, appEngine); err != nil {
		return nil, optErr(first, "%v", err)
	}
	return headers, nil
}

// checkContentType rejects a Content-Type header that conflicts with the one the format sets.
func checkContentType(prefix string, headers map[string]string, body formats.Format) error {
	owned := bodyformat.ContentType(body)
	if owned == "" {
		return nil
	}
	for name, v := range headers {
		if strings.EqualFold(name, "Content-Type") && !bodyformat.ContentTypeMatches(owned, v) {
			return optErr(prefix+name, "conflicts with format %s, which sends Content-Type %s itself (leave the header out)", body.Name, owned)
		}
	}
	return nil
}

func (p *optionParser) method(key string) (string, error) {
	v, ok := p.get(key)
	if !ok {
		return "POST", nil
	}
	if _, err := parseMethod("method", v); err != nil {
		return "", optErr(key, "value %s is not accepted; accepted: %s", quoteValue(v), methodList)
	}
	return strings.ToUpper(v), nil
}

func (p *optionParser) httpTarget(keys []string, body formats.Format) (*HTTPTarget, error) {
	t := &HTTPTarget{Body: body}
	var err error
	if v, ok := p.get(optHTTPURL); ok {
		if err := checkURL("the value", v); err != nil {
			return nil, optErr(optHTTPURL, "%v (accepted: an absolute http or https URL of at most %d characters)", err, maxURLLength)
		}
		t.URL = v
	}
	if t.Method, err = p.method(optHTTPMethod); err != nil {
		return nil, err
	}
	if t.Headers, err = p.headers(keys, optHTTPHeaders, false); err != nil {
		return nil, err
	}
	if err := checkContentType(optHTTPHeaders, t.Headers, body); err != nil {
		return nil, err
	}

	oidcEmail, hasOIDCEmail := p.get(optHTTPOIDCEmail)
	audience, hasAudience := p.get(optHTTPOIDCAudience)
	oauthEmail, hasOAuthEmail := p.get(optHTTPOAuthEmail)
	scope, hasScope := p.get(optHTTPOAuthScope)
	switch {
	case (hasOIDCEmail || hasAudience) && (hasOAuthEmail || hasScope):
		key := optHTTPOAuthEmail
		if !hasOAuthEmail {
			key = optHTTPOAuthScope
		}
		return nil, optErr(key, "cannot be combined with the http.oidc.* keys: a task carries at most one token (OIDC for Cloud Run and other OIDC endpoints, OAuth for *.googleapis.com)")
	case hasAudience && !hasOIDCEmail:
		return nil, optErr(optHTTPOIDCAudience, "needs %q, the service account whose OIDC token Cloud Tasks sends", optHTTPOIDCEmail)
	case hasScope && !hasOAuthEmail:
		return nil, optErr(optHTTPOAuthScope, "needs %q, the service account whose OAuth token Cloud Tasks sends", optHTTPOAuthEmail)
	case hasOIDCEmail:
		t.OIDC = &OIDCToken{ServiceAccountEmail: oidcEmail, Audience: audience}
	case hasOAuthEmail:
		t.OAuth = &OAuthToken{ServiceAccountEmail: oauthEmail, Scope: scope}
	}

	if t.DispatchDeadline, err = p.dispatchDeadline(optHTTPDispatchDeadline, maxHTTPDispatchDL); err != nil {
		return nil, err
	}
	return t, nil
}

// dispatchDeadline reads a target's dispatch-deadline key: absent is zero (the service
// default); a value must lie in the target family's bounds [15s, max].
func (p *optionParser) dispatchDeadline(key string, max time.Duration) (time.Duration, error) {
	if _, ok := p.get(key); !ok {
		return 0, nil
	}
	d, err := p.duration(key, false)
	if err != nil {
		return 0, err
	}
	if err := checkDispatchDeadline("the value", d, max); err != nil {
		return 0, optErr(key, "%v", err)
	}
	return d, nil
}

func (p *optionParser) appEngineTarget(keys []string, body formats.Format) (*AppEngineTarget, error) {
	t := &AppEngineTarget{Body: body}
	var err error
	if v, ok := p.get(optAppEngineRelativeURI); ok {
		if err := checkRelativeURI("the value", v); err != nil {
			return nil, optErr(optAppEngineRelativeURI, "%v (accepted: empty for the root, or a path starting with '/' and an optional query)", err)
		}
		t.RelativeURI = v
	}
	if t.Method, err = p.method(optAppEngineMethod); err != nil {
		return nil, err
	}
	if t.Headers, err = p.headers(keys, optAppEngineHeaders, true); err != nil {
		return nil, err
	}
	if err := checkContentType(optAppEngineHeaders, t.Headers, body); err != nil {
		return nil, err
	}
	var routing AppEngineRouting
	for _, f := range []struct {
		key string
		dst *string
	}{
		{optAppEngineService, &routing.Service}, {optAppEngineVersion, &routing.Version}, {optAppEngineInstance, &routing.Instance},
	} {
		if v, ok := p.get(f.key); ok {
			if strings.IndexFunc(v, isSpace) >= 0 {
				return nil, optErr(f.key, "must contain no whitespace")
			}
			*f.dst = v
		}
	}
	if routing != (AppEngineRouting{}) {
		t.Routing = &routing
	}
	if t.DispatchDeadline, err = p.dispatchDeadline(optAppEngineDeadline, maxAppEngineDispDL); err != nil {
		return nil, err
	}
	return t, nil
}

// client reads the credential and emulator keys.
func (p *optionParser) client(cfg *Config) error {
	if v, ok := p.get(optServiceAccountKeyFile); ok {
		cfg.ServiceAccountKeyFile = v
	}
	if v, ok := p.get(optEmulatorEndpoint); ok {
		if err := checkEndpoint("the value", v); err != nil {
			return optErr(optEmulatorEndpoint, "%v", strings.TrimPrefix(err.Error(), "cloudtasksio: "))
		}
		if cfg.ServiceAccountKeyFile != "" {
			return optErr(optEmulatorEndpoint, "cannot be combined with %q: the emulator's plaintext connection carries no credentials", optServiceAccountKeyFile)
		}
		cfg.EmulatorEndpoint = v
	}
	return p.clientOptions(cfg)
}

// clientOptionKeys names the client.* keys in errors, as clientFieldNames names the fields.
var clientOptionKeys = gcpconn.SettingNames{
	Endpoint: optClientEndpoint, QuotaProject: optClientQuotaProject, ImpersonateServiceAccount: optClientImpersonate,
	ImpersonateDelegates: optClientDelegates, UniverseDomain: optClientUniverse, Emulator: optEmulatorEndpoint,
}

// clientOptions reads the client.* keys into cfg.Client and checks them as Write will.
func (p *optionParser) clientOptions(cfg *Config) error {
	c := &cfg.Client
	for _, f := range []struct {
		key string
		dst *string
	}{
		{optClientEndpoint, &c.Endpoint}, {optClientQuotaProject, &c.QuotaProject},
		{optClientImpersonate, &c.ImpersonateServiceAccount}, {optClientUniverse, &c.UniverseDomain},
	} {
		if v, ok := p.get(f.key); ok {
			*f.dst = v
		}
	}
	if v, ok := p.get(optClientDelegates); ok {
		// A comma-separated chain; blanks around an entry are not part of an address.
		for d := range strings.SplitSeq(v, ",") {
			c.ImpersonateDelegates = append(c.ImpersonateDelegates, strings.TrimSpace(d))
		}
	}
	if v, ok := p.get(optClientTelemetry); ok {
		switch strings.ToLower(v) {
		case "on":
			c.Telemetry = TelemetryOn
		case "off":
			c.Telemetry = TelemetryOff
		default:
			return optErr(optClientTelemetry, "%q is not on or off", v)
		}
	}
	if _, err := c.settings(clientOptionKeys, cfg.EmulatorEndpoint); err != nil {
		var se *gcpconn.SettingError
		if errors.As(err, &se) {
			return optErr(se.Name, "%s", se.Reason)
		}
		return err
	}
	return nil
}

// delivery reads the delivery guarantee and the staged keys.
func (p *optionParser) delivery(keys []string, cfg *Config) error {
	if v, ok := p.get(optDelivery); ok {
		switch strings.ToLower(v) {
		case "at-least-once":
			cfg.Delivery = AtLeastOnce
		case "exactly-once":
			cfg.Delivery = ExactlyOnce
		default:
			return optErr(optDelivery, "value %s is not accepted; accepted: %s", quoteValue(v), strings.Join(deliveryValues, ", "))
		}
	}
	var stagedKeys []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefixStaged) {
			stagedKeys = append(stagedKeys, k)
		}
	}
	if len(stagedKeys) == 0 {
		return nil
	}
	if cfg.Delivery != ExactlyOnce {
		return optErr(stagedKeys[0], "needs %s=exactly-once (any sink.staged.* key does, even at its default value)", optDelivery)
	}
	staged := DefaultStagedOptions()
	var err error
	for _, f := range []struct {
		key       string
		dst       *time.Duration
		allowZero bool
	}{
		{optStagedNameRetention, &staged.NameRetention, false},
		{optStagedClockSkew, &staged.ClockSkewAllowance, true},
		{optStagedRequestTimeout, &staged.RequestTimeout, false},
	} {
		if _, ok := p.get(f.key); ok {
			if *f.dst, err = p.duration(f.key, f.allowZero); err != nil {
				return err
			}
		}
	}
	if _, ok := p.get(optStagedVerify); ok {
		if staged.VerifyQueueRetention, err = p.boolean(optStagedVerify); err != nil {
			return err
		}
	}
	if v, ok := p.get(optStagedExpiredPolicy); ok {
		policy, known := expiredPolicyByValue[strings.ToLower(v)]
		if !known {
			return optErr(optStagedExpiredPolicy, "value %s is not accepted; accepted: %s", quoteValue(v), strings.Join(expiredPolicyValues, ", "))
		}
		staged.ExpiredEnvelopePolicy = policy
	}
	if err := staged.validate(); err != nil {
		// A bound of one duration names its key; a window too short names the first key given.
		var key string
		if se := (*stagedError)(nil); errors.As(err, &se) {
			key = map[string]string{"NameRetention": optStagedNameRetention, "ClockSkewAllowance": optStagedClockSkew,
				"RequestTimeout": optStagedRequestTimeout, "ExpiredEnvelopePolicy": optStagedExpiredPolicy}[se.field]
		}
		if key == "" {
			key = optStagedNameRetention
			for _, k := range []string{optStagedNameRetention, optStagedClockSkew, optStagedRequestTimeout} {
				if _, ok := p.get(k); ok {
					key = k
					break
				}
			}
		}
		return optErr(key, "%s (keys %s, %s, %s)", strings.TrimPrefix(err.Error(), "cloudtasksio: "),
			optStagedNameRetention, optStagedClockSkew, optStagedRequestTimeout)
	}
	cfg.Staged = &staged
	return nil
}

// writer reads the WriterOptions keys. Absent keys stay zero (the default); the backoff pairs
// are checked against each other with defaults filled in.
func (p *optionParser) writer() (WriterOptions, error) {
	var w WriterOptions
	var err error
	for _, f := range []struct {
		key string
		dst *int
	}{
		{optMaxInFlight, &w.MaxInFlightTasks}, {optChannelPoolSize, &w.ChannelPoolSize},
		{optRecoveryAttempts, &w.RecoveryMaxAttempts}, {optNotFoundAttempts, &w.NotFoundRecoveryMaxAttempts},
	} {
		if _, ok := p.get(f.key); ok {
			if *f.dst, err = p.positiveInt(f.key); err != nil {
				return w, err
			}
		}
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{
		{optRecoveryInitial, &w.RecoveryInitialBackoff}, {optRecoveryMax, &w.RecoveryMaxBackoff},
		{optNotFoundInitial, &w.NotFoundRecoveryInitialBackoff}, {optNotFoundMax, &w.NotFoundRecoveryMaxBackoff},
	} {
		if _, ok := p.get(f.key); ok {
			if *f.dst, err = p.duration(f.key, false); err != nil {
				return w, err
			}
		}
	}
	if _, ok := p.get(optPerDestinationStats); ok {
		if w.PerDestinationMetrics, err = p.boolean(optPerDestinationStats); err != nil {
			return w, err
		}
	}
	// The values parsed above are positive, so resolve can only object to a value above its
	// limit or to a backoff pair.
	var be *backoffError
	var re *rangeError
	_, err = w.resolve()
	if errors.As(err, &re) {
		key := map[string]string{"MaxInFlightTasks": optMaxInFlight, "ChannelPoolSize": optChannelPoolSize,
			"RecoveryMaxAttempts": optRecoveryAttempts, "NotFoundRecoveryMaxAttempts": optNotFoundAttempts}[re.field]
		return w, optErr(key, "value %s", re.msg)
	}
	if errors.As(err, &be) {
		// Blame the max key when it was given, else the initial key that exceeded the default max.
		key := map[string][2]string{"Recovery": {optRecoveryInitial, optRecoveryMax}, "NotFoundRecovery": {optNotFoundInitial, optNotFoundMax}}[be.budget]
		blamed := key[1]
		if _, ok := p.get(blamed); !ok {
			blamed = key[0]
		}
		return w, optErr(blamed, "max backoff %v (%s) is below initial backoff %v (%s); raise %s or lower %s",
			be.max, key[1], be.initial, key[0], key[1], key[0])
	}
	return w, nil
}

// duration parses a Go duration; it must be positive, or not negative with allowZero.
func (p *optionParser) duration(key string, allowZero bool) (time.Duration, error) {
	v := p.opts[key]
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, optErr(key, "value %s is not a duration; accepted: a Go duration such as 500ms, 10s, 1m30s or 2h", quoteValue(v))
	}
	switch {
	case d < 0:
		return 0, optErr(key, "value %s is negative; accepted: a positive duration", quoteValue(v))
	case d == 0 && !allowZero:
		return 0, optErr(key, "value %s is zero; accepted: a positive duration", quoteValue(v))
	}
	return d, nil
}

// positiveInt parses a decimal integer of at least 1.
func (p *optionParser) positiveInt(key string) (int, error) {
	v := p.opts[key]
	n, err := strconv.ParseInt(v, 10, 0)
	if err != nil {
		return 0, optErr(key, "value %s is not a decimal integer; accepted: an integer of at least 1", quoteValue(v))
	}
	if n < 1 {
		return 0, optErr(key, "value %s is below 1; accepted: an integer of at least 1", quoteValue(v))
	}
	return int(n), nil
}

// boolean parses "true" or "false" in any letter case.
func (p *optionParser) boolean(key string) (bool, error) {
	v := p.opts[key]
	switch {
	case strings.EqualFold(v, "true"):
		return true, nil
	case strings.EqualFold(v, "false"):
		return false, nil
	}
	return false, optErr(key, "value %s is not accepted; accepted: true, false", quoteValue(v))
}

// quoteValue quotes a rejected value for an error, cut to a length that identifies it without
// flooding the message. It is only used for values of typed keys (numbers, durations,
// booleans, enumerations), never for header values, URLs or paths.
func quoteValue(v string) string {
	const shown = 40 // bytes of a long value kept before the marker
	return strconv.Quote(boundedtext.Cut(v, shown+len(boundedtext.Marker)))
}
