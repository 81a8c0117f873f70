package cloudtasksio

import (
	"errors"
	"fmt"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// FailedTask recovers the task carried by a dead letter this sink produced, for inspection or
// replay. It fails when the dead letter comes from another connector, or carries no task
// because building the task was what failed (Code "SERIALIZATION"): the element itself is
// then the only record, and it is not part of the dead letter.
func FailedTask(fe deadletter.FailedElement) (*cloudtaskspb.Task, error) {
	if fe.Connector != connectorName {
		return nil, fmt.Errorf("cloudtasksio: the dead letter comes from connector %q, not %q", fe.Connector, connectorName)
	}
	if len(fe.Payload) == 0 {
		return nil, fmt.Errorf("cloudtasksio: the dead letter (code %s) carries no task: building the task failed", fe.Code)
	}
	task := new(cloudtaskspb.Task)
	if err := proto.Unmarshal(fe.Payload, task); err != nil {
		return nil, errors.New("cloudtasksio: the dead letter's payload is not a Cloud Tasks task")
	}
	return task, nil
}
