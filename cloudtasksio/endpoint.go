package cloudtasksio

import (
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// checkEndpoint validates an emulator endpoint ("host:port") as the Config field at path.
func checkEndpoint(path, endpoint string) error {
	if err := gcpconn.CheckEndpoint(endpoint); err != nil {
		return errField(path, "%v", err)
	}
	return nil
}
