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

// parseEndpoint is the form the option-key parser calls; it is being folded into
// checkEndpoint.
func parseEndpoint(field, endpoint string) (string, int, error) {
	return "", 0, checkEndpoint(field, endpoint)
}
