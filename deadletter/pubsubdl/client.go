package pubsubdl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clientKey is one client setting: every DoFn instance of a worker process that publishes
// with the same key shares one client and publisher. checkTimeout, the step's FlushTimeout,
// bounds the topic check and is part of the key: two steps writing to one topic with different
// FlushTimeouts each check it under their own bound, and a check that timed out under a short
// one is not remembered as the other step's failure.
type clientKey struct {
	topic, endpoint, keyFile string
	settings                 gcpconn.ClientSettings
	checkTimeout             time.Duration
}

// sharedPublisher is the per-process publisher of one clientKey. The topic has been checked
// to exist once it is in the cache.
type sharedPublisher struct {
	client *pubsub.Client
	pub    *pubsub.Publisher
}

// publishers keeps one publisher per client setting for the life of the process, in a
// gcpconn.Cache: the instances that start at once wait for one topic check, and a slow check
// for one setting does not hold up another. Its keys come from the pipeline's configuration,
// not from the data, so it needs no bound, and its clients are never closed.
var publishers gcpconn.Cache[clientKey, *sharedPublisher]

// getPublisher returns the process's publisher for key, creating the client and checking the
// topic on first use; ctx bounds the wait for a check another instance started. A failure is
// remembered for gcpconn.FailureTTL, during which every bundle gets it at once, and then
// checked again, so a topic created after the pipeline started is picked up. checkTimeout
// bounds the topic check.
//
// Clients are never closed: portable runners do not call Teardown, and a worker process
// lives as long as its pipeline.
func getPublisher(ctx context.Context, key clientKey, checkTimeout time.Duration) (*sharedPublisher, error) {
	key.checkTimeout = checkTimeout
	return publishers.Get(ctx, key, func() (*sharedPublisher, error) {
		// The creation outlives the bundle that started it and serves them all: it runs
		// on a context of its own.
		ctx := context.Background()
		sp, err := newPublisher(ctx, key, checkTimeout)
		if err != nil {
			return nil, err
		}
		infof(ctx, "worker %s publishes dead letters to topic %s", workerID(), key.topic)
		return sp, nil
	})
}

// newPublisher creates a client and publisher and checks the topic; tests replace it.
var newPublisher = newSharedPublisher

func newSharedPublisher(ctx context.Context, key clientKey, checkTimeout time.Duration) (*sharedPublisher, error) {
	topic, err := parseTopic(key.topic)
	if err != nil {
		return nil, err
	}
	opts, err := clientOptions(key)
	if err != nil {
		return nil, err
	}
	client, err := pubsub.NewClient(ctx, topic.project, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the Pub/Sub client for topic %q: %w", key.topic, err)
	}
	noRetryOfSizeRefusals(client)
	if err := checkTopic(ctx, client, key.topic, checkTimeout); err != nil {
		client.Close()
		return nil, err
	}
	return &sharedPublisher{client: client, pub: client.Publisher(key.topic)}, nil
}

// noRetryOfSizeRefusals keeps the client's retries of a publish but for a request the server
// refused for its size (RESOURCE_EXHAUSTED "received message larger than max", the gRPC
// transport's answer before any handler, as an emulator's 4 MiB limit gives): sent again, it
// is refused again until FlushTimeout ends the wait with no word of the size. Not retried,
// the publish fails at once with the server's text, which gives the size and the limit.
func noRetryOfSizeRefusals(client *pubsub.Client) {
	opts := client.TopicAdminClient.CallOptions
	var settings gax.CallSettings
	for _, o := range opts.Publish {
		o.Resolve(&settings)
	}
	retry := settings.Retry
	opts.Publish = append(slices.Clone(opts.Publish), gax.WithRetry(func() gax.Retryer {
		var r gax.Retryer
		if retry != nil {
			r = retry()
		}
		return sizeRefusalRetryer{r}
	}))
}

// sizeRefusalRetryer is r, which may be nil (no retries), with size refusals not retried.
type sizeRefusalRetryer struct{ r gax.Retryer }

func (s sizeRefusalRetryer) Retry(err error) (time.Duration, bool) {
	if s.r == nil || refusedForSize(err) {
		return 0, false
	}
	return s.r.Retry(err)
}

// refusedForSize reports whether err is a server's refusal of a request over its receive
// limit.
func refusedForSize(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.ResourceExhausted && strings.Contains(s.Message(), "larger than max")
}

// checkTopic fails unless the topic exists. It never creates one: a dead-letter topic made on
// the fly would have no subscription, so nothing would read what lands there.
func checkTopic(ctx context.Context, client *pubsub.Client, topic string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: topic})
	switch {
	case err == nil:
		return nil
	case status.Code(err) == codes.NotFound:
		//lint:ignore ST1005 the error names the field Topic; the package prefix comes before it (withPrefix)
		return fmt.Errorf("Topic %q does not exist; create it (and a subscription that reads it) before running the pipeline, ToPubSub never creates topics", topic)
	default:
		return fmt.Errorf("checking that Topic %q exists: %w", topic, err)
	}
}

// clientOptions selects the transport and credentials of key: an emulator gets plaintext and
// no credentials, a key file gets its service-account credentials, otherwise the client
// library's application-default credentials apply; the client settings come on top (on an
// emulator only the telemetry switch, the rest having been refused at construction).
func clientOptions(key clientKey) ([]option.ClientOption, error) {
	conn := gcpconn.Connection{Emulator: key.endpoint, KeyFile: key.keyFile, Settings: key.settings}
	opts, err := conn.Options(clientFieldNames, []string{pubsub.ScopePubSub}, nil)
	if err != nil {
		return nil, err
	}
	if key.endpoint != "" {
		opts = append(opts, option.WithGRPCConnectionPool(1))
	}
	return opts, nil
}

var (
	workerOnce sync.Once
	workerName string
)

// workerID names this worker process for AttrWorker: its host name and random hex, so two
// processes on one host differ.
func workerID() string {
	workerOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "worker"
		}
		if len(host) > 64 {
			host = host[:64]
		}
		workerName = host + "-" + randomHex(4)
	})
	return workerName
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
