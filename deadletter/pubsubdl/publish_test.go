package pubsubdl

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter"
	"github.com/beam-cloudtasks/beam-cloudtasks/internal/gcpconn"
)

const testTopic = "projects/test-project/topics/dead-letters"

// newPubSub starts a pstest server with testTopic created (unless withTopic is false).
func newPubSub(t *testing.T, withTopic bool, opts ...pstest.ServerReactorOption) *pstest.Server {
	t.Helper()
	srv := pstest.NewServer(opts...)
	t.Cleanup(func() { srv.Close() })
	if withTopic {
		_, err := srv.GServer.CreateTopic(t.Context(), &pubsubpb.Topic{Name: testTopic})
		require.NoError(t, err)
	}
	return srv
}

// runBundle drives fn through one bundle of elems, all at event time et.
func runBundle(ctx context.Context, fn *publishFn, et mtime.Time, elems ...deadletter.FailedElement) error {
	if err := fn.StartBundle(ctx); err != nil {
		return err
	}
	for _, fe := range elems {
		if err := fn.ProcessElement(ctx, et, fe); err != nil {
			return err
		}
	}
	return fn.FinishBundle(ctx)
}

func numbered(n int) []deadletter.FailedElement {
	out := make([]deadletter.FailedElement, n)
	for i := range out {
		out[i] = deadletter.FailedElement{Connector: "cloudtasks", Code: "INVALID_ARGUMENT", Payload: fmt.Appendf(nil, "payload-%03d", i)}
	}
	return out
}

func TestPublishRoundTripsPayloadAndAttributes(t *testing.T) {
	srv := newPubSub(t, true)
	task := &cloudtaskspb.Task{
		MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{
			Url:        "https://example.com/hook",
			HttpMethod: cloudtaskspb.HttpMethod_POST,
			Headers:    map[string]string{"Content-Type": "application/json"},
			Body:       []byte(`{"order":42}`),
		}},
	}
	payload, err := proto.Marshal(task)
	require.NoError(t, err)
	longErr := "INVALID_ARGUMENT: header too long: " + strings.Repeat("h", 2000)
	fe := deadletter.FailedElement{
		Connector:   "cloudtasks",
		Destination: "projects/p/locations/l/queues/q",
		Payload:     payload,
		Code:        "INVALID_ARGUMENT",
		Error:       longErr,
	}
	et := mtime.FromTime(time.Date(2026, 3, 4, 5, 6, 7, 89e6, time.UTC))
	fn := &publishFn{Topic: testTopic, MaxInFlightMessages: 1000, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
	require.NoError(t, runBundle(t.Context(), fn, et, fe))

	msgs := srv.Messages()
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, testTopic, m.Topic)

	var got cloudtaskspb.Task
	require.NoError(t, proto.Unmarshal(m.Data, &got))
	assert.True(t, proto.Equal(task, &got), "task survives the round trip")

	a := m.Attributes
	assert.Equal(t, "cloudtasks", a[AttrConnector])
	assert.Equal(t, "projects/p/locations/l/queues/q", a[AttrDestination])
	assert.Equal(t, "INVALID_ARGUMENT", a[AttrCode])
	assert.Len(t, a[AttrError], MaxAttributeBytes)
	assert.True(t, strings.HasPrefix(a[AttrError], "INVALID_ARGUMENT: header too long: hhh"))
	assert.True(t, strings.HasSuffix(a[AttrError], TruncatedMarker))
	assert.Equal(t, "2026-03-04T05:06:07.089Z", a[AttrEventTime])
	parsed, err := time.Parse(time.RFC3339Nano, a[AttrEventTime])
	require.NoError(t, err)
	assert.Equal(t, et.ToTime().UTC(), parsed.UTC())
	assert.Equal(t, workerID(), a[AttrWorker])
	assert.Len(t, a[AttrBundle], 16)
	assert.Len(t, a, 7)
}

func TestEmptyPayloadPublishesEmptyData(t *testing.T) {
	srv := newPubSub(t, true)
	fn := &publishFn{Topic: testTopic, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
	fe := deadletter.FailedElement{Connector: "cloudtasks", Destination: "projects/p/locations/l/queues/q", Code: "SERIALIZATION", Error: "json: unsupported type"}
	require.NoError(t, runBundle(t.Context(), fn, mtime.FromMilliseconds(1000), fe))
	msgs := srv.Messages()
	require.Len(t, msgs, 1)
	assert.Empty(t, msgs[0].Data)
	assert.Equal(t, "SERIALIZATION", msgs[0].Attributes[AttrCode])
	assert.Equal(t, "1970-01-01T00:00:01Z", msgs[0].Attributes[AttrEventTime])
}

func TestEveryInFlightModePublishesEachElementOnce(t *testing.T) {
	for _, limit := range []int{-1, 0, 1000, 2} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			srv := newPubSub(t, true)
			fn := &publishFn{Topic: testTopic, MaxInFlightMessages: limit, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
			elems := numbered(9)
			require.NoError(t, runBundle(t.Context(), fn, 0, elems[:5]...))
			require.NoError(t, runBundle(t.Context(), fn, 0, elems[5:]...))

			var got, want []string
			bundles := map[string]bool{}
			for _, m := range srv.Messages() {
				got = append(got, string(m.Data))
				bundles[m.Attributes[AttrBundle]] = true
			}
			for _, fe := range elems {
				want = append(want, string(fe.Payload))
			}
			sort.Strings(got)
			assert.Equal(t, want, got, "every element exactly once")
			assert.Len(t, bundles, 2, "each bundle has its own id")
		})
	}
}

func TestInjectedPublishErrorFailsTheBundle(t *testing.T) {
	for _, limit := range []int{-1, 0, 2} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			srv := newPubSub(t, true, pstest.WithErrorInjection("Publish", codes.PermissionDenied, "caller may not publish"))
			fn := &publishFn{Topic: testTopic, MaxInFlightMessages: limit, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
			err := runBundle(t.Context(), fn, 0, numbered(3)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), testTopic)
			assert.Contains(t, err.Error(), "caller may not publish")
			assert.Empty(t, srv.Messages())
		})
	}
}

func TestMissingTopicFailsWithItsName(t *testing.T) {
	srv := newPubSub(t, false)
	fn := &publishFn{Topic: testTopic, MaxInFlightMessages: 1000, FlushTimeout: time.Minute, EmulatorEndpoint: srv.Addr}
	err := runBundle(t.Context(), fn, 0, numbered(1)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), testTopic)
	assert.Contains(t, err.Error(), "does not exist")

	// The topic was not created. A bundle retried at once fails the same way without another
	// check; the check is made again after gcpconn.FailureTTL
	// (TestATopicCheckIsSharedAndItsFailureRememberedForFailureTTL).
	_, err = srv.GServer.GetTopic(t.Context(), &pubsubpb.GetTopicRequest{Topic: testTopic})
	require.Error(t, err)
	_, err = srv.GServer.CreateTopic(t.Context(), &pubsubpb.Topic{Name: testTopic})
	require.NoError(t, err)
	err = runBundle(t.Context(), fn, 0, numbered(1)...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist", "remembered")
	assert.Empty(t, srv.Messages())
}

func TestATopicCheckIsSharedAndItsFailureRememberedForFailureTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const checkTime = 200 * time.Millisecond
		var checks atomic.Int64
		var topicExists atomic.Bool
		saved := newPublisher
		t.Cleanup(func() { newPublisher = saved })
		newPublisher = func(context.Context, clientKey, time.Duration) (*sharedPublisher, error) {
			checks.Add(1)
			time.Sleep(checkTime)
			if !topicExists.Load() {
				return nil, errors.New("Topic does not exist")
			}
			return &sharedPublisher{}, nil
		}
		key := clientKey{topic: "projects/p/topics/shared-check", endpoint: "shared-check.invalid:1"}
		startTogether := func() (longest time.Duration, failed int) {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					start := time.Now()
					_, err := getPublisher(context.Background(), key, time.Minute)
					mu.Lock()
					defer mu.Unlock()
					longest = max(longest, time.Since(start))
					if err != nil {
						failed++
					}
				})
			}
			wg.Wait()
			return longest, failed
		}

		longest, failed := startTogether()
		t.Logf("the last of 64 StartBundle calls waited %v behind one topic check of %v", longest, checkTime)
		assert.Equal(t, checkTime, longest, "64 instances starting together wait for one check")
		assert.Equal(t, 64, failed)
		assert.Equal(t, int64(1), checks.Load())

		topicExists.Store(true) // the operator creates the topic
		longest, failed = startTogether()
		assert.Zero(t, longest, "the failure is remembered: every bundle meanwhile fails at once")
		assert.Equal(t, 64, failed)
		assert.Equal(t, int64(1), checks.Load())

		time.Sleep(gcpconn.FailureTTL)
		longest, failed = startTogether()
		assert.Equal(t, checkTime, longest)
		assert.Zero(t, failed, "after FailureTTL one check finds the topic")
		assert.Equal(t, int64(2), checks.Load())
	})
}

func TestPublishersAreSharedPerSetting(t *testing.T) {
	srv := newPubSub(t, true)
	key := clientKey{topic: testTopic, endpoint: srv.Addr}
	a, err := getPublisher(t.Context(), key, time.Minute)
	require.NoError(t, err)
	b, err := getPublisher(t.Context(), key, time.Minute)
	require.NoError(t, err)
	assert.Same(t, a, b)

	other := "projects/test-project/topics/other-dead-letters"
	_, err = srv.GServer.CreateTopic(t.Context(), &pubsubpb.Topic{Name: other})
	require.NoError(t, err)
	c, err := getPublisher(t.Context(), clientKey{topic: other, endpoint: srv.Addr}, time.Minute)
	require.NoError(t, err)
	assert.NotSame(t, a, c)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.json")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// testServiceAccountKey is a freshly generated key in the service-account JSON layout. It is
// not a Google credential and is never used to call anything.
func testServiceAccountKey(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	b, err := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     "test-project",
		"private_key_id": "0123456789abcdef",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "dead-letters@test-project.iam.gserviceaccount.com",
		"client_id":      "1234567890",
		"token_uri":      "https://oauth2.googleapis.com/token",
	})
	require.NoError(t, err)
	return string(b)
}

func TestServiceAccountKeyFileIsLoaded(t *testing.T) {
	opts, err := clientOptions(clientKey{topic: testTopic, keyFile: writeFile(t, testServiceAccountKey(t))})
	require.NoError(t, err)
	assert.True(t, hasOption(opts, option.WithAuthCredentials(nil)), "the key's credentials")
}

func TestServiceAccountKeyFileErrorsRevealNoContent(t *testing.T) {
	const secret = "s3cr3t-client-secret-value"
	cases := map[string]struct{ content, want string }{
		"authorized user":  {`{"type":"authorized_user","client_id":"id","client_secret":"` + secret + `","refresh_token":"` + secret + `"}`, "not a service-account key"},
		"external account": {`{"type":"external_account","audience":"` + secret + `","subject_token_type":"x","token_url":"https://sts.googleapis.com/v1/token","credential_source":{"file":"/x"}}`, "not a service-account key"},
		"not json":         {`private_key=` + secret, "not a JSON key"},
		"no type":          {`{"private_key":"` + secret + `"}`, "not a service-account key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			_, err := clientOptions(clientKey{topic: testTopic, keyFile: path})
			require.Error(t, err)
			msg := err.Error()
			assert.Contains(t, msg, "ServiceAccountKeyFile")
			assert.Contains(t, msg, tc.want)
			assert.NotContains(t, msg, path)
			assert.NotContains(t, msg, secret)
			assert.NotContains(t, msg, "credentials:", "the parser's own message is not passed on")
		})
	}

	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.json")
		_, err := clientOptions(clientKey{topic: testTopic, keyFile: path})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "ServiceAccountKeyFile")
		assert.Contains(t, err.Error(), "does not exist")
	})
}

// hasOption reports whether opts holds an option of the same kind as want.
func hasOption(opts []option.ClientOption, want option.ClientOption) bool {
	for _, o := range opts {
		if reflect.TypeOf(o) == reflect.TypeOf(want) {
			return true
		}
	}
	return false
}

func TestEmulatorOptionsCarryNoCredentials(t *testing.T) {
	opts, err := clientOptions(clientKey{topic: testTopic, endpoint: "localhost:8085"})
	require.NoError(t, err)
	assert.True(t, hasOption(opts, option.WithoutAuthentication()))
	assert.True(t, hasOption(opts, option.WithEndpoint("x")))
	assert.False(t, hasOption(opts, option.WithAuthCredentials(nil)))

	opts, err = clientOptions(clientKey{topic: testTopic, keyFile: writeFile(t, testServiceAccountKey(t))})
	require.NoError(t, err)
	assert.True(t, hasOption(opts, option.WithAuthCredentials(nil)))
	assert.False(t, hasOption(opts, option.WithoutAuthentication()))
}
