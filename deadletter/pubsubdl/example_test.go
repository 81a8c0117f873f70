package pubsubdl_test

import (
	"fmt"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

// Publish the dead letters of a sink to a Pub/Sub topic. The topic must exist; ToPubSub never
// creates it. With EmulatorEndpoint set (for example a pstest server's address) the publisher
// uses a plaintext connection and no credentials.
func ExampleToPubSub() {
	p, s := beam.NewPipelineWithRoot()
	failed := beam.Create(s, deadletter.FailedElement{
		Connector:   "cloudtasks",
		Destination: "projects/my-project/locations/europe-west1/queues/orders",
		Code:        "INVALID_ARGUMENT",
		Error:       "the service rejected the task",
	})
	pubsubdl.ToPubSub(s, pubsubdl.PubSubConfig{
		Topic: "projects/my-project/topics/order-dead-letters",
		// MaxInFlightMessages and FlushTimeout keep their defaults: 1000 and 60s.
	}, failed)
	_ = p // run it with beamx.Run(ctx, p)
}

// Rebuild a dead letter from a message received on a subscription of the dead-letter topic.
func ExampleFromMessage() {
	msg := &pubsub.Message{
		Data: []byte{0x0a, 0x01, 'x'},
		Attributes: map[string]string{
			pubsubdl.AttrConnector:   "cloudtasks",
			pubsubdl.AttrDestination: "projects/p/locations/l/queues/q",
			pubsubdl.AttrCode:        "INVALID_ARGUMENT",
			pubsubdl.AttrError:       "the service rejected the task",
			pubsubdl.AttrEventTime:   "2026-03-04T05:06:07.089Z",
		},
	}
	fe, eventTime, err := pubsubdl.FromMessage(msg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(fe.Code, fe.Destination, len(fe.Payload), "payload bytes")
	fmt.Println(eventTime.UTC())
	// Output:
	// INVALID_ARGUMENT projects/p/locations/l/queues/q 3 payload bytes
	// 2026-03-04 05:06:07.089 +0000 UTC
}
