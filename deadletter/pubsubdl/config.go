//lint:file-ignore ST1005 errors start with the field they name (Topic, Encoding); the package prefix comes before it (ConfigError.Error)

package pubsubdl

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/boundedtext"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// Defaults of PubSubConfig.
const (
	// DefaultMaxInFlightMessages is the number of publishes one DoFn instance leaves
	// outstanding before it waits for them. A zero MaxInFlightMessages means this value.
	DefaultMaxInFlightMessages = 1000
	// DefaultFlushTimeout bounds each wait for outstanding publishes. A zero FlushTimeout
	// means this value.
	DefaultFlushTimeout = 60 * time.Second
)

// PubSubConfig configures ToPubSub, the transform that publishes failed elements to a Pub/Sub
// topic. The zero value of every field but Topic means its default, so PubSubConfig{Topic: t}
// and DefaultPubSubConfig(t) behave the same.
type PubSubConfig struct {
	// Topic is the full resource name of the topic, "projects/P/topics/T". The topic must
	// already exist: ToPubSub never creates it, and fails the first bundle with an error
	// naming the topic when it is missing.
	Topic string
	// MaxInFlightMessages bounds the publishes one DoFn instance leaves outstanding. The
	// client batches them; when this many are outstanding the DoFn waits for all of them
	// before it publishes more. 0 (the zero value) means DefaultMaxInFlightMessages (1000).
	//
	// 1 waits for each publish before the next: one round trip per failed element, nothing
	// outstanding between elements. -1 never waits before FinishBundle, so a bundle's every
	// failed element may be outstanding at once. Values below -1 are rejected.
	MaxInFlightMessages int
	// FlushTimeout bounds each wait for outstanding publishes, whether in FinishBundle or
	// because MaxInFlightMessages was reached, as one deadline for all the messages of that
	// wait. When it expires the bundle fails and nothing is dropped: the runner replays the
	// bundle (Dataflow) or fails the job (prism). It also bounds each worker's one-time check
	// that the topic exists. Zero means DefaultFlushTimeout; negative values are rejected.
	FlushTimeout time.Duration
	// EmulatorEndpoint points the publisher at a Pub/Sub emulator ("host:port", for example
	// a pstest server) over a plaintext connection without credentials. Never use it for the
	// production service. It cannot be combined with ServiceAccountKeyFile.
	EmulatorEndpoint string
	// ServiceAccountKeyFile is the path of a service-account JSON key, read on each worker when
	// its publisher is created, so the file must exist there. Other credential types (user
	// credentials, external accounts) are rejected. Empty means application-default
	// credentials.
	ServiceAccountKeyFile string
	// Encoding selects the layout of the message data (attribute AttrEncoding). Empty, the
	// default, and EncodingEnvelopeV1 keep the binary layout every earlier version published:
	// the envelope for dead letters with an element, the bare payload for the others.
	// EncodingJSONV1 publishes one JSON object per dead letter (JSONDeadLetter) that any
	// consumer can read: the element as JSON where its Go type allows, the task in protojson
	// with its header values and token fields redacted. FromMessage reads every layout. Other
	// values are rejected.
	Encoding string
	// Client configures the Pub/Sub client: endpoint, quota project, impersonation, universe
	// domain and its OpenTelemetry instrumentation. The zero value is the client library's
	// defaults.
	Client ClientOptions
}

// DefaultPubSubConfig returns the recommended configuration for publishing to topic
// ("projects/P/topics/T"): MaxInFlightMessages DefaultMaxInFlightMessages (1000),
// FlushTimeout DefaultFlushTimeout (60s), application-default credentials. The topic is
// checked by ToPubSub, not here.
func DefaultPubSubConfig(topic string) PubSubConfig {
	return PubSubConfig{
		Topic:               topic,
		MaxInFlightMessages: DefaultMaxInFlightMessages,
		FlushTimeout:        DefaultFlushTimeout,
	}
}

// topicName is a validated "projects/P/topics/T".
type topicName struct{ project, topic string }

// ConfigError is the construction error of ToPubSub and TryToPubSub (and of deadletter's)
// for a PubSubConfig that cannot work. Field names the field at fault as the message spells
// it: "Topic", "MaxInFlightMessages", "FlushTimeout", "Encoding", "EmulatorEndpoint",
// "ServiceAccountKeyFile" or "Client.<field>". Find it with errors.As, for example to name the
// flag of a program that sets that field.
type ConfigError struct {
	// Field is the PubSubConfig field at fault.
	Field string
	msg   string
}

// Error returns the message, which names Field.
func (e *ConfigError) Error() string { return prefixText(e.msg) }

// validate checks cfg as ToPubSub needs it and returns it with defaults applied. Every error
// is a *ConfigError.
func (cfg PubSubConfig) validate() (PubSubConfig, error) {
	cfg, field, err := cfg.check()
	var se *gcpconn.SettingError
	switch {
	case err == nil:
		return cfg, nil
	case errors.As(err, &se):
		field = se.Name
	}
	return cfg, &ConfigError{Field: field, msg: err.Error()}
}

// check is validate, returning the field at fault beside the error (a *gcpconn.SettingError
// names its own).
func (cfg PubSubConfig) check() (PubSubConfig, string, error) {
	if _, err := parseTopic(cfg.Topic); err != nil {
		return cfg, "Topic", err
	}
	if cfg.MaxInFlightMessages < -1 {
		return cfg, "MaxInFlightMessages", fmt.Errorf("MaxInFlightMessages is %d; want a positive bound (1 waits for each message), 0 for the default %d, or -1 (wait only in FinishBundle)", cfg.MaxInFlightMessages, DefaultMaxInFlightMessages)
	}
	if cfg.MaxInFlightMessages == 0 {
		cfg.MaxInFlightMessages = DefaultMaxInFlightMessages
	}
	if cfg.FlushTimeout < 0 {
		return cfg, "FlushTimeout", fmt.Errorf("FlushTimeout is %v; want a positive duration, or 0 for the default %v", cfg.FlushTimeout, DefaultFlushTimeout)
	}
	if cfg.FlushTimeout == 0 {
		cfg.FlushTimeout = DefaultFlushTimeout
	}
	switch cfg.Encoding {
	case "", EncodingEnvelopeV1, EncodingJSONV1:
	default:
		return cfg, "Encoding", fmt.Errorf("Encoding is %s; want %q (the default, also written \"\") or %q", boundedtext.Quote(cfg.Encoding), EncodingEnvelopeV1, EncodingJSONV1)
	}
	conn := gcpconn.Connection{Emulator: cfg.EmulatorEndpoint, KeyFile: cfg.ServiceAccountKeyFile}
	if err := conn.CheckCredentials(clientFieldNames); err != nil {
		return cfg, "", err
	}
	if _, err := cfg.Client.settings(cfg.EmulatorEndpoint); err != nil {
		return cfg, "Client.Telemetry", err // the only refusal that is not a *gcpconn.SettingError
	}
	return cfg, "", nil
}

// parseTopic checks that name is "projects/P/topics/T" where P is a project id (or number)
// and T a valid topic id.
func parseTopic(name string) (topicName, error) {
	parts := strings.Split(name, "/")
	if name == "" || len(parts) != 4 || parts[0] != "projects" || parts[2] != "topics" {
		return topicName{}, fmt.Errorf("Topic %s is not a topic resource name; want \"projects/PROJECT/topics/TOPIC\"", boundedtext.Quote(name))
	}
	t := topicName{project: parts[1], topic: parts[3]}
	if !gcpconn.ValidProject(t.project) {
		return topicName{}, fmt.Errorf("Topic %s: project %s is not a project id; want lowercase letters, digits and hyphens (optionally after a \"domain:\" prefix), or a project number", boundedtext.Quote(name), boundedtext.Quote(t.project))
	}
	if !validTopicID(t.topic) {
		return topicName{}, fmt.Errorf("Topic %s: topic id %s is invalid; want 3 to 255 characters, starting with a letter, of letters, digits and - _ . ~ + %%, not starting with \"goog\"", boundedtext.Quote(name), boundedtext.Quote(t.topic))
	}
	return t, nil
}

// validTopicID applies Pub/Sub's rules for a topic id.
func validTopicID(t string) bool {
	if len(t) < 3 || len(t) > 255 || strings.HasPrefix(strings.ToLower(t), "goog") {
		return false
	}
	for i, r := range t {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		switch {
		case letter:
		case i == 0:
			return false
		case r >= '0' && r <= '9', strings.ContainsRune("-_.~+%", r):
		default:
			return false
		}
	}
	return true
}
