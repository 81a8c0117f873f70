package cloudtasksio

import (
	"context"
	"fmt"
	"sync"

	"cloud.google.com/go/auth"
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
	// Settings are Config.Client, checked: each distinct setting has a client of its own.
	Settings gcpconn.ClientSettings
}

// clientCache keeps one client of type C per clientSpec for the life of the process. Its lock
// only guards the map: each setting has an entry with a lock of its own, held while that
// setting's client is created (which reads the key file), so a slow key file holds up the
// callers of its own setting and nobody else.
type clientCache[C any] struct {
	mu      sync.Mutex
	entries map[clientSpec]*cacheEntry[C]
	dial    func(context.Context, ...option.ClientOption) (C, error)
	what    string // the client's name in errors
}

// cacheEntry is the client of one setting, once created. A failure is not kept: the next
// bundle tries again (a key file may appear, a transient error pass).
type cacheEntry[C any] struct {
	mu     sync.Mutex
	client C
	ok     bool
}

// get returns the process-wide client for spec, creating it on first use.
func (c *clientCache[C]) get(spec clientSpec) (C, error) {
	c.mu.Lock()
	e, found := c.entries[spec]
	if !found {
		if c.entries == nil {
			c.entries = map[clientSpec]*cacheEntry[C]{}
		}
		e = &cacheEntry[C]{}
		c.entries[spec] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok {
		return e.client, nil
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
	e.client, e.ok = client, true
	return client, nil
}

// loadKey reads a service-account key file; tests replace it to watch when it runs.
var loadKey = gcpconn.LoadServiceAccountKey

var v2Clients = clientCache[*cloudtasks.Client]{dial: cloudtasks.NewClient, what: "Cloud Tasks"}

// sharedClient returns the process-wide Cloud Tasks client for spec.
func sharedClient(spec clientSpec) (*cloudtasks.Client, error) { return v2Clients.get(spec) }

// options translates spec into client options. With an emulator the connection is plaintext
// and carries no credentials at all: a token must never travel unencrypted.
func (spec clientSpec) options() ([]option.ClientOption, error) {
	if spec.EmulatorEndpoint != "" {
		opts := gcpconn.EmulatorOptions(spec.EmulatorEndpoint)
		if spec.Settings.DisableTelemetry {
			opts = append(opts, option.WithTelemetryDisabled())
		}
		return opts, nil
	}
	var opts []option.ClientOption
	if spec.ChannelPoolSize > 0 {
		opts = append(opts, option.WithGRPCConnectionPool(spec.ChannelPoolSize))
	}
	var creds *auth.Credentials
	if spec.ServiceAccountKeyFile != "" {
		var err error
		creds, err = loadKey(spec.ServiceAccountKeyFile, cloudtasks.DefaultAuthScopes())
		if err != nil {
			return nil, fmt.Errorf("cloudtasksio: Config.ServiceAccountKeyFile: %w", err)
		}
	}
	more, err := spec.Settings.Options(cloudtasks.DefaultAuthScopes(), creds)
	if err != nil {
		return nil, fmt.Errorf("cloudtasksio: Config.Client.ImpersonateServiceAccount: %w", err)
	}
	return append(opts, more...), nil
}
