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

// clientCache keeps one client of type C per clientSpec for the life of the process.
type clientCache[C any] struct {
	mu      sync.Mutex
	clients map[clientSpec]C
	dial    func(context.Context, ...option.ClientOption) (C, error)
	what    string // the client's name in errors
}

// get returns the process-wide client for spec, creating it on first use.
func (c *clientCache[C]) get(spec clientSpec) (C, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if client, ok := c.clients[spec]; ok {
		return client, nil
	}
	var zero C
	opts, err := spec.options()
	if err != nil {
		return zero, err
	}
	// The client outlives any one bundle, so it must not be bound to a bundle's context.
	client, err := c.dial(context.Background(), opts...)
	if err != nil {
		return zero, fmt.Errorf("cloudtasksio: creating the %s client: %w", c.what, err)
	}
	if c.clients == nil {
		c.clients = map[clientSpec]C{}
	}
	c.clients[spec] = client
	return client, nil
}

var v2Clients = clientCache[*cloudtasks.Client]{dial: cloudtasks.NewClient, what: "Cloud Tasks"}

// sharedClient returns the process-wide Cloud Tasks client for spec.
func sharedClient(spec clientSpec) (*cloudtasks.Client, error) { return v2Clients.get(spec) }

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
