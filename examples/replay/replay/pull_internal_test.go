package replay

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beam-cloudtasks/beam-cloudtasks/cloudtasksio"
	"github.com/beam-cloudtasks/beam-cloudtasks/deadletter/pubsubdl"
)

// fakeSubscriber is a subscription that behaves like the gcloud Pub/Sub emulator: a pull that
// finds nothing is held for hold before it answers, unless its context ends first. It hands
// out each message once and records what is done to them.
type fakeSubscriber struct {
	hold time.Duration

	mu       sync.Mutex
	waiting  []*pubsubpb.ReceivedMessage
	pulls    int
	modacks  map[string][]int32 // ack id -> deadlines set, in order
	acked    map[string]bool
	closedAt int
}

func newFakeSubscriber(n int, hold time.Duration) *fakeSubscriber {
	f := &fakeSubscriber{hold: hold, modacks: map[string][]int32{}, acked: map[string]bool{}}
	for i := range n {
		f.waiting = append(f.waiting, &pubsubpb.ReceivedMessage{AckId: fmt.Sprint("ack-", i), Message: &pubsubpb.PubsubMessage{
			MessageId: fmt.Sprint("m-", i), Data: []byte("task"),
			Attributes: map[string]string{pubsubdl.AttrConnector: cloudtasksio.Connector, pubsubdl.AttrCode: cloudtasksio.CodeInvalidArgument}}})
	}
	return f
}

func (f *fakeSubscriber) dial(context.Context) (subscriber, error) { return f, nil }

func (f *fakeSubscriber) Pull(ctx context.Context, req *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error) {
	f.mu.Lock()
	f.pulls++
	got := f.waiting[:min(len(f.waiting), int(req.GetMaxMessages()))]
	f.waiting = f.waiting[len(got):]
	f.mu.Unlock()
	if len(got) > 0 {
		return &pubsubpb.PullResponse{ReceivedMessages: got}, nil
	}
	select {
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	case <-time.After(f.hold):
		return &pubsubpb.PullResponse{}, nil
	}
}

func (f *fakeSubscriber) ModifyAckDeadline(_ context.Context, req *pubsubpb.ModifyAckDeadlineRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range req.GetAckIds() {
		f.modacks[id] = append(f.modacks[id], req.GetAckDeadlineSeconds())
	}
	return nil
}

func (f *fakeSubscriber) Acknowledge(_ context.Context, req *pubsubpb.AcknowledgeRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range req.GetAckIds() {
		f.acked[id] = true
	}
	return nil
}

func (f *fakeSubscriber) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closedAt++
	return nil
}

// The emulator the docs name holds an empty synchronous pull for about 90 s, and the reader
// stops only after EmptyPulls empty pulls in a row: a replay of three dead letters took more
// than three minutes. Each pull's wait is bounded by PullWait, and a pull that the bound
// ends counts as empty.
func TestAnEmptyPullWaitsAtMostPullWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeSubscriber(3, 90*time.Second)
		f := &pullFn{Subscription: testSub, EmptyPulls: DefaultEmptyPulls, PullWait: DefaultPullWait, connect: fake.dial}
		ctx, counters := metricsContext()
		start := time.Now()
		var got []pulled
		require.NoError(t, f.ProcessElement(ctx, nil, func(_ beam.EventTime, p pulled) { got = append(got, p) }))
		took := time.Since(start)
		assert.Len(t, got, 3)
		assert.Equal(t, int64(3), counters()[MetricRead])
		assert.Equal(t, 1+DefaultEmptyPulls, fake.pulls, "one pull with the messages, then the empty ones")
		assert.LessOrEqual(t, took, DefaultEmptyPulls*DefaultPullWait, "each empty pull waits at most PullWait")
		assert.GreaterOrEqual(t, took, DefaultEmptyPulls*DefaultPullWait, "and the bound is the wait of a pull, not a failure")
	})
}

// A pull answered with an error that is not the bound's own still fails the read.
func TestAPullErrorOtherThanTheWaitsBoundFailsTheRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &pullFn{Subscription: testSub, EmptyPulls: DefaultEmptyPulls, PullWait: DefaultPullWait,
			connect: func(context.Context) (subscriber, error) { return failingPull{newFakeSubscriber(0, time.Hour)}, nil }}
		ctx, _ := metricsContext()
		err := f.ProcessElement(ctx, nil, func(beam.EventTime, pulled) {})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "PermissionDenied")
	})
}

type failingPull struct{ *fakeSubscriber }

func (failingPull) Pull(context.Context, *pubsubpb.PullRequest) (*pubsubpb.PullResponse, error) {
	return nil, status.Error(codes.PermissionDenied, "no subscriber role")
}
