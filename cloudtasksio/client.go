package cloudtasksio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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
		return []option.ClientOption{
			option.WithEndpoint(spec.EmulatorEndpoint),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		}, nil
	}
	var opts []option.ClientOption
	if spec.ChannelPoolSize > 0 {
		opts = append(opts, option.WithGRPCConnectionPool(spec.ChannelPoolSize))
	}
	if spec.ServiceAccountKeyFile != "" {
		creds, err := loadServiceAccountKey(spec.ServiceAccountKeyFile, cloudtasks.DefaultAuthScopes())
		if err != nil {
			return nil, err
		}
		opts = append(opts, option.WithAuthCredentials(creds))
	}
	return opts, nil
}

// errKeyFile is the prefix of every key-file error. The errors deliberately carry neither the
// path nor anything read from the file nor the parser's own message, any of which could
// expose key material in job logs.
const errKeyFile = "cloudtasksio: ServiceAccountKeyFile"

// loadServiceAccountKey reads a service-account JSON key and refuses every other credential
// type (user credentials, external accounts, impersonation configs).
func loadServiceAccountKey(path string, scopes []string) (*auth.Credentials, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errors.New(errKeyFile + ": the file does not exist on this worker")
	case errors.Is(err, fs.ErrPermission):
		return nil, errors.New(errKeyFile + ": the file is not readable by this worker")
	case err != nil:
		return nil, errors.New(errKeyFile + ": the file could not be read")
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &head) != nil {
		return nil, errors.New(errKeyFile + ": the file is not a JSON key")
	}
	if head.Type != string(credentials.ServiceAccount) {
		return nil, errors.New(errKeyFile + ": the file is not a service-account key (its \"type\" is not \"service_account\")")
	}
	creds, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, data, &credentials.DetectOptions{Scopes: scopes})
	if err != nil {
		return nil, errors.New(errKeyFile + ": the service-account key could not be parsed")
	}
	return creds, nil
}
