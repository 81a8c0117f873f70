package cloudtasksio

import (
	"context"
	"fmt"

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

// clientCache keeps one client of type C per clientSpec for the life of the process, in a
// gcpconn.Cache: the instances that ask for a setting's client at once wait for one creation,
// a slow key file holds up the callers of its own setting and nobody else, and a failure is
// remembered for gcpconn.FailureTTL, then tried again. The clients are never closed: a client
// may be in use by a bundle of another DoFn instance at any time. The caches of this type,
// v2Clients and betaClients, are declared in caches.go.
type clientCache[C any] struct {
	clients gcpconn.Cache[clientSpec, C]
	dial    func(context.Context, ...option.ClientOption) (C, error)
	what    string // the client's name in errors
}

// get returns the process-wide client for spec, creating it on first use; ctx bounds the wait.
func (c *clientCache[C]) get(ctx context.Context, spec clientSpec) (C, error) {
	return c.clients.Get(ctx, spec, func() (C, error) {
		var zero C
		opts, err := spec.options()
		if err != nil {
			return zero, err
		}
		// The client outlives any one bundle, so it must not be bound to a bundle's context.
		client, err := c.dial(context.Background(), opts...)
		if err != nil {
			return zero, fmt.Errorf("creating the %s client: %w", c.what, err)
		}
		return client, nil
	})
}

// loadKey reads a service-account key file; tests replace it to watch when it runs.
var loadKey = gcpconn.LoadServiceAccountKey

// sharedClient returns the process-wide Cloud Tasks client for spec; ctx bounds the wait.
func sharedClient(ctx context.Context, spec clientSpec) (*cloudtasks.Client, error) {
	return v2Clients.get(ctx, spec)
}

// workerSettingNames name the settings whose failures surface on the worker, when the client
// is created.
var workerSettingNames = gcpconn.SettingNames{KeyFile: "Config.ServiceAccountKeyFile", ImpersonateServiceAccount: "Config.Client.ImpersonateServiceAccount"}

// options translates spec into client options (gcpconn.Connection.Options). With an emulator
// the connection is plaintext and carries no credentials at all: a token must never travel
// unencrypted.
func (spec clientSpec) options() ([]option.ClientOption, error) {
	conn := gcpconn.Connection{Emulator: spec.EmulatorEndpoint, KeyFile: spec.ServiceAccountKeyFile, Settings: spec.Settings}
	opts, err := conn.Options(workerSettingNames, cloudtasks.DefaultAuthScopes(), loadKey)
	if err != nil {
		return nil, err
	}
	if spec.ChannelPoolSize > 0 && spec.EmulatorEndpoint == "" {
		opts = append([]option.ClientOption{option.WithGRPCConnectionPool(spec.ChannelPoolSize)}, opts...)
	}
	return opts, nil
}
