package deadletter

import (
	"errors"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/dlhook"
)

// PubSubConfig configures ToPubSub: the fields of pubsubdl.PubSubConfig that the project's
// design contract names, with the same meanings and defaults (see pubsubdl.PubSubConfig for
// each; pubsubdl.PubSubConfig also sets the client's options). The zero value of every field
// but Topic means its default.
type PubSubConfig struct {
	// Topic is the topic's full name, "projects/P/topics/T". It must exist: it is never
	// created.
	Topic string
	// MaxInFlightMessages bounds the publishes one DoFn instance leaves outstanding: 0 means
	// 1000; 1 waits for each publish before the next; -1 waits only in FinishBundle.
	MaxInFlightMessages int
	// FlushTimeout bounds each wait for outstanding publishes, and each worker's one-time
	// check that the topic exists (0 means 60s). When it expires the bundle fails and nothing
	// is dropped: Dataflow replays the bundle; prism fails the job.
	FlushTimeout time.Duration
	// EmulatorEndpoint is a Pub/Sub emulator's "host:port", reached over plaintext without
	// credentials; it cannot be combined with ServiceAccountKeyFile.
	EmulatorEndpoint string
	// ServiceAccountKeyFile is the path, on each worker, of a service-account JSON key; empty
	// means application-default credentials.
	ServiceAccountKeyFile string
	// Encoding is the layout of the message data: empty (the default) or "envelope-v1" for
	// the binary layout FromMessage has always read, "json-v1" for one JSON object any
	// consumer can read, with the task's header values and tokens redacted (see
	// pubsubdl.EncodingJSONV1).
	Encoding string
}

// errPubSubNotLinked is TryToPubSub's error when the program does not link the output.
var errPubSubNotLinked = errors.New("deadletter.ToPubSub: the Pub/Sub output is in package " +
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl, which this program does not " +
	"link, or has not initialised yet: import it (a blank import will do) in the package that " +
	"calls ToPubSub, or call pubsubdl.ToPubSub")

// ToPubSub publishes every element of failed, a PCollection<FailedElement>, to the Pub/Sub
// topic cfg.Topic, one message per element: it is pubsubdl.ToPubSub (which documents the
// messages, their limits and the metrics) under the name the project's design contract gives
// it. Package deadletter does not link the Pub/Sub client, so the package that calls ToPubSub
// must import github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl, at least blank
// (pubsubdl installs itself when Go initialises it, which it does before the packages that
// import it; a pipeline built in the init of a package that does not import it may come
// first). ToPubSub panics on a bad configuration, an input that is not a
// PCollection<FailedElement>, or a program in which pubsubdl has not been initialised;
// TryToPubSub returns those as errors instead.
func ToPubSub(s beam.Scope, cfg PubSubConfig, failed beam.PCollection) {
	if err := TryToPubSub(s, cfg, failed); err != nil {
		panic(err)
	}
}

// TryToPubSub is ToPubSub returning its construction errors instead of panicking. Each names
// the field or input at fault, as pubsubdl.TryToPubSub's do.
func TryToPubSub(s beam.Scope, cfg PubSubConfig, failed beam.PCollection) error {
	out := dlhook.PubSub()
	if out == nil {
		return errPubSubNotLinked
	}
	return out(s, dlhook.PubSubSettings(cfg), failed)
}
