package cloudtasksio

import (
	"context"
	"fmt"
	"sync"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"google.golang.org/api/option"

	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

// clientSpec is everything that selects a Cloud Tasks client. Workers share one client per
// distinct clientSpec for the life of the process: portable runners never call Teardown, so
// a client per DoFn instance would leak connections.
type clientSpec struct {
	EmulatorEndpoint      string `json:",omitempty"`
	ServiceAccountKeyFile string `json:",omitempty"`
	ChannelPoolSize       int    `json:",omitempty"`
}

var (
	clientsMu sync.Mutex
	clients   = map[clientSpec]*cloudtasks.Client{}
)

// sharedClient returns the process-wide client for spec, creating it on first use.
func sharedClient(spec clientSpec) (*cloudtasks.Client, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[spec]; ok {
		return c, nil
	}
	opts, err := spec.options()
	if err != nil {
		return nil, err
	}
	// The client outlives any one bundle, so it must not be bound to a bundle's context.
	c, err := cloudtasks.NewClient(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("cloudtasksio: creating the Cloud Tasks client: %w", err)
	}
	clients[spec] = c
	return c, nil
}

// options translates spec into client options. With an emulator the connection is plaintext
// and carries no credentials at all: a token must never travel unencrypted.
func (spec clientSpec) options() ([]option.ClientOption, error) {
	if spec.EmulatorEndpoint != "" {
		return gcpconn.EmulatorOptions(spec.EmulatorEndpoint), nil
	}
	var opts []option.ClientOption
	if spec.ChannelPoolSize > 0 {
		opts = append(opts, option.WithGRPCConnectionPool(spec.ChannelPoolSize))
	}
	if spec.ServiceAccountKeyFile != "" {
		creds, err := gcpconn.LoadServiceAccountKey(spec.ServiceAccountKeyFile, cloudtasks.DefaultAuthScopes())
		if err != nil {
			return nil, fmt.Errorf("cloudtasksio: Config.ServiceAccountKeyFile: %w", err)
		}
		opts = append(opts, option.WithAuthCredentials(creds))
	}
	return opts, nil
}
