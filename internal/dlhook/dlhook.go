// Package dlhook connects deadletter.ToPubSub, the name the project's design contract gives the
// Pub/Sub dead-letter output, to package deadletter/pubsubdl, which implements it. Package
// deadletter must not import the Pub/Sub client (every program that writes tasks imports
// deadletter for its failed-element type, and would link the client), so pubsubdl installs
// its output here when a program links it, and deadletter looks it up at pipeline
// construction.
package dlhook

import (
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// PubSubSettings are the fields of deadletter.PubSubConfig.
type PubSubSettings struct {
	Topic                 string
	MaxInFlightMessages   int
	FlushTimeout          time.Duration
	EmulatorEndpoint      string
	ServiceAccountKeyFile string
	Encoding              string
}

// PubSubOutput adds the Pub/Sub dead-letter output to s for failed, a
// PCollection<FailedElement>, or returns the construction error. The error has crossed
// pubsubdl's boundary (it starts with "pubsubdl: "): deadletter.TryToPubSub passes it on as it
// is.
type PubSubOutput func(s beam.Scope, cfg PubSubSettings, failed beam.PCollection) error

var (
	mu     sync.Mutex
	pubSub PubSubOutput
)

// InstallPubSub installs the Pub/Sub output; package pubsubdl calls it once, from init. It
// panics on nil or on a second call.
func InstallPubSub(out PubSubOutput) {
	mu.Lock()
	defer mu.Unlock()
	switch {
	case out == nil:
		panic("dlhook: InstallPubSub(nil)")
	case pubSub != nil:
		panic("dlhook: InstallPubSub called twice")
	}
	pubSub = out
}

// PubSub returns the installed Pub/Sub output, nil when the program does not link
// deadletter/pubsubdl.
func PubSub() PubSubOutput {
	mu.Lock()
	defer mu.Unlock()
	return pubSub
}
