package cloudtasksio

import (
	"fmt"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// checkEndpoint validates an emulator endpoint ("host:port") and names field in its error.
func checkEndpoint(field, endpoint string) error {
	if err := gcpconn.CheckEndpoint(endpoint); err != nil {
		return fmt.Errorf("cloudtasksio: %s %w", field, err)
	}
	return nil
}
