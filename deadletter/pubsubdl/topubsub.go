package pubsubdl

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/dlhook"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

var failedElementType = reflect.TypeFor[deadletter.FailedElement]()

func init() {
	register.DoFn3x1[context.Context, beam.EventTime, deadletter.FailedElement, error](&publishFn{})
	// deadletter.ToPubSub, the design contract's name for this output, finds it here.
	dlhook.InstallPubSub(func(s beam.Scope, cfg dlhook.PubSubSettings, failed beam.PCollection) error {
		return TryToPubSub(s, PubSubConfig{
			Topic:                 cfg.Topic,
			MaxInFlightMessages:   cfg.MaxInFlightMessages,
			FlushTimeout:          cfg.FlushTimeout,
			EmulatorEndpoint:      cfg.EmulatorEndpoint,
			ServiceAccountKeyFile: cfg.ServiceAccountKeyFile,
			Encoding:              cfg.Encoding,
		}, failed)
	})
}

// ToPubSub publishes every element of failed, a PCollection<FailedElement>, to the Pub/Sub
// topic cfg.Topic, one message per element. It panics on a bad configuration or input type;
// TryToPubSub returns those as errors instead.
//
// The message data carries the dead letter's Payload (for Cloud Tasks, the Task in wire
// format; empty when the task could not be built) and Element, the input element to replay:
// in the envelope EncodingEnvelopeV1 (attribute AttrEncoding) when the dead letter carries an
// element, else the Payload unchanged. The other fields travel as the attributes
// AttrConnector, AttrDestination, AttrCode, AttrError and AttrEventTime, with AttrWorker and
// AttrBundle naming the publisher. Messages carry no ordering key. With cfg.Encoding
// EncodingJSONV1 the data is one JSON object instead (JSONDeadLetter), with the same
// attributes. FromMessage reads every layout back.
//
// No dead letter fails the bundle for its size: one that would break Pub/Sub's limits (a
// publish request of 10 MB; attribute values are cut to MaxAttributeBytes, and a message has
// at most 9 attributes) is published reduced, without its Payload (in JSON, its task), then
// (in JSON) without the element's JSON rendering, and if that is not enough without its
// Element too; AttrOmitted says what was left out, the Error attribute
// starts with a note saying so, and the counter messagesReduced counts it. An emulator may
// take less than the service: pstest, like any gRPC server with default settings, refuses
// requests over 4 MiB. Such a refusal is not retried: the bundle fails at once with an error
// that gives the message's size and the server's limit.
//
// Publishing is at least once: a bundle succeeds only after every one of its messages was
// accepted by Pub/Sub, and a bundle that fails (a publish error, FlushTimeout expiring, a
// missing topic) is replayed by the runner and publishes its elements again, so consumers
// must tolerate duplicates. Each worker process shares one client per topic and setting,
// checks once that the topic exists, and never creates it.
//
// Metrics, namespace "deadletter": counter messagesPublished (messages Pub/Sub accepted),
// counter messagesReduced (messages published reduced, see above), gauge messagesOutstanding
// (publishes not yet awaited by the DoFn instance) and distribution flushWaitMillis (the
// duration of each wait for outstanding publishes).
func ToPubSub(s beam.Scope, cfg PubSubConfig, failed beam.PCollection) {
	if err := TryToPubSub(s, cfg, failed); err != nil {
		panic(err)
	}
}

// TryToPubSub is ToPubSub returning construction errors (a bad PubSubConfig field, or an
// input that is not a PCollection<FailedElement>) instead of panicking. Each error names the
// field at fault.
func TryToPubSub(s beam.Scope, cfg PubSubConfig, failed beam.PCollection) error {
	return withPrefix(tryToPubSub(s, cfg, failed))
}

// tryToPubSub is TryToPubSub without the package prefix on its errors (a *ConfigError has
// its own).
func tryToPubSub(s beam.Scope, cfg PubSubConfig, failed beam.PCollection) error {
	cfg, err := cfg.validate()
	if err != nil {
		return err
	}
	settings, _ := cfg.Client.settings(cfg.EmulatorEndpoint) // checked by validate
	if !failed.IsValid() {
		return fmt.Errorf("ToPubSub: the input PCollection is not valid")
	}
	if want := typex.New(failedElementType); !typex.IsEqual(failed.Type(), want) {
		return fmt.Errorf("ToPubSub: the input is a PCollection of %v; want a PCollection of deadletter.FailedElement", failed.Type())
	}
	// The step name predates this package (see the package doc): keep it for job updates.
	s = s.Scope("deadletter.ToPubSub")
	out, err := beam.TryParDo(s, &publishFn{
		Topic:                 cfg.Topic,
		MaxInFlightMessages:   cfg.MaxInFlightMessages,
		FlushTimeout:          cfg.FlushTimeout,
		EmulatorEndpoint:      cfg.EmulatorEndpoint,
		ServiceAccountKeyFile: cfg.ServiceAccountKeyFile,
		Client:                settings,
		Encoding:              cfg.Encoding,
	}, failed)
	if err != nil {
		return fmt.Errorf("ToPubSub: %w", err)
	}
	if len(out) != 0 {
		return fmt.Errorf("ToPubSub: internal error: the publishing DoFn has %d outputs", len(out))
	}
	return nil
}

// publishFn publishes FailedElements. Its exported fields are the validated configuration,
// serialized to the workers; the unexported ones are rebuilt in StartBundle.
type publishFn struct {
	Topic                 string
	MaxInFlightMessages   int
	FlushTimeout          time.Duration
	EmulatorEndpoint      string
	ServiceAccountKeyFile string
	Client                gcpconn.ClientSettings
	Encoding              string

	box      *outbox
	bundle   string
	maxBytes int // maxMessageBytes(Topic)
}

// StartBundle obtains the worker's shared publisher (creating it and checking the topic on
// first use) and starts an empty outbox for the bundle.
func (f *publishFn) StartBundle(ctx context.Context) error {
	sp, err := getPublisher(ctx, clientKey{topic: f.Topic, endpoint: f.EmulatorEndpoint, keyFile: f.ServiceAccountKeyFile, settings: f.Client}, f.FlushTimeout)
	if err != nil {
		return withPrefix(err)
	}
	f.start(pubsubPublisher{sp.pub})
	return nil
}

// start begins a bundle that publishes through pub.
func (f *publishFn) start(pub publisher) {
	limit := f.MaxInFlightMessages
	if limit == 0 {
		limit = DefaultMaxInFlightMessages
	}
	f.box = &outbox{pub: pub, topic: f.Topic, limit: limit, timeout: f.FlushTimeout}
	f.bundle = randomHex(8)
	f.maxBytes = maxMessageBytes(f.Topic)
}

// ProcessElement publishes one failed element, waiting for the outstanding publishes when
// the in-flight bound is reached.
func (f *publishFn) ProcessElement(ctx context.Context, et beam.EventTime, fe deadletter.FailedElement) error {
	build := newMessage
	if f.Encoding == EncodingJSONV1 {
		build = newJSONMessage
	}
	msg, reduced := build(fe, et, workerID(), f.bundle, f.maxBytes)
	if reduced {
		messagesReduced.Inc(ctx, 1)
	}
	return withPrefix(f.box.publish(ctx, msg))
}

// FinishBundle waits for every outstanding publish: the bundle succeeds only once Pub/Sub has
// accepted all of its messages.
func (f *publishFn) FinishBundle(ctx context.Context) error {
	return withPrefix(f.box.wait(ctx))
}
