package cloudtasksio

import (
	"errors"
	"fmt"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
)

// Connector is the deadletter.FailedElement.Connector of every dead letter this sink produces.
const Connector = "cloudtasks"

// Codes of deadletter.FailedElement.Code for the three failures that reach the failure
// policy. Every other failure fails the bundle and produces no dead letter.
const (
	// CodeSerialization: the task could not be built for the element (the Serializer, the
	// body format or the struct-tag metadata failed). The dead letter carries no Payload.
	CodeSerialization = "SERIALIZATION"
	// CodeTaskID: the TaskIDFn failed for the element. Payload is the unnamed task.
	CodeTaskID = "TASK_ID"
	// CodeInvalidArgument: the task is invalid, found by the sink before sending it or
	// answered INVALID_ARGUMENT by Cloud Tasks. Payload is the task.
	CodeInvalidArgument = "INVALID_ARGUMENT"
)

// FailedTask recovers the task carried by a dead letter this sink produced, for inspection or
// replay. It fails when the dead letter comes from another connector, or carries no task
// because building the task was what failed (CodeSerialization): the element itself is
// then the only record, and it is not part of the dead letter.
func FailedTask(fe deadletter.FailedElement) (*cloudtaskspb.Task, error) {
	if fe.Connector != Connector {
		return nil, fmt.Errorf("cloudtasksio: the dead letter comes from connector %q, not %q", fe.Connector, Connector)
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
