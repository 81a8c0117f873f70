package cloudtasksio_test

import (
	"errors"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

func init() {
	log.LogLevel = "warn"
	register.Function1x2(queueByRegion)
	register.Function1x2(serializeOrder)
	register.Function1x2(keyOfOrder)
	register.Function1x2(keyOfKeyedOrder)
	register.Function1x2(serializeNamed)
	register.Function1x2(serializeKeyedOrder)
	register.Function1x1(describeDeadLetter)
	register.Function1x1(routedFromID)
}

// order is the element type of most tests: two body fields.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	Region string `json:"region,omitempty"`
}

// keyedOrder names its task with a task-id field.
type keyedOrder struct {
	ID  string `json:"id"`
	Key string `cloudtasks:"task-id"`
}

// routedOrder carries its own URL and headers.
type routedOrder struct {
	ID      string            `json:"id"`
	URL     string            `cloudtasks:"url"`
	Headers map[string]string `cloudtasks:"headers"`
}

// routedFromID makes a routedOrder with a per-element URL and a trace header.
func routedFromID(id string) routedOrder {
	return routedOrder{ID: id, URL: "https://example.com/orders/" + id, Headers: map[string]string{"x-trace": "abc"}}
}

// appEngineOrder carries App Engine routing.
type appEngineOrder struct {
	ID      string  `json:"id"`
	Service *string `cloudtasks:"app-engine-service"`
}

// formOrder has only string body fields.
type formOrder struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
}

// queueByRegion sends orders of region "eu" to queue q-eu and the rest to q; region "bad" is an
// error, and regions "invalid" and "invalid-location" invalid queues.
func queueByRegion(o order) (cloudtasksio.Queue, error) {
	switch o.Region {
	case "eu":
		return cloudtasksio.NewQueue("p", "l", "q-eu")
	case "bad":
		return cloudtasksio.Queue{}, errors.New("no queue for region bad")
	case "invalid":
		return cloudtasksio.Queue{Project: "p", Location: "l", Name: "q_invalid"}, nil
	case "invalid-location":
		return cloudtasksio.Queue{Project: "p", Location: "us_central1", Name: "q"}, nil
	}
	return cloudtasksio.NewQueue("p", "l", "q")
}

// serializeOrder builds an HTTP task by hand; it skips orders with amount 0 and fails those
// with a negative amount.
func serializeOrder(o order) (*cloudtaskspb.Task, error) {
	switch {
	case o.Amount == 0:
		return nil, nil
	case o.Amount < 0:
		return nil, errors.New("negative amount")
	}
	return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
		Url: "https://example.com/orders/" + o.ID, HttpMethod: cloudtaskspb.HttpMethod_PUT, Body: []byte(o.ID)}}}, nil
}

// keyOfOrder is a TaskIDFn: the order id, failing for id "nokey" and empty for id "empty".
func keyOfOrder(o order) (string, error) {
	switch o.ID {
	case "nokey":
		return "", errors.New("no key")
	case "empty":
		return "", nil
	}
	return "order-" + o.ID, nil
}

func keyOfKeyedOrder(o keyedOrder) (string, error) { return o.Key, nil }

func deadLetterOf(task *cloudtaskspb.Task) deadletter.FailedElement {
	fe := deadletter.FailedElement{Connector: cloudtasksio.Connector, Destination: testQueue.Path(), Code: cloudtasksio.CodeSerialization}
	if task != nil {
		fe.Code = cloudtasksio.CodeInvalidArgument
		fe.Payload, _ = proto.Marshal(task)
	}
	return fe
}

// serializeKeyedOrder is a serializer for an element type that carries struct tags.
func serializeKeyedOrder(o keyedOrder) (*cloudtaskspb.Task, error) {
	return serializeOrder(order{ID: o.ID, Amount: 1})
}

// serializeNamed wrongly names its task.
func serializeNamed(o order) (*cloudtaskspb.Task, error) {
	task, err := serializeOrder(o)
	if task != nil {
		task.Name = testQueue.Path() + "/tasks/" + o.ID
	}
	return task, err
}

// describeDeadLetter renders a dead letter as "CODE connector destination body", where body is
// the HTTP body of the task it carries or <no task>.
func describeDeadLetter(fe deadletter.FailedElement) string {
	body := "<no task>"
	if task, err := cloudtasksio.FailedTask(fe); err == nil {
		body = string(task.GetHttpRequest().GetBody())
	}
	return fe.Code + " " + fe.Connector + " " + fe.Destination + " " + body
}

func protoSize(m proto.Message) int { return proto.Size(m) }
