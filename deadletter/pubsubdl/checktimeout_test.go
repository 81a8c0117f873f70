package pubsubdl

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two ToPubSub steps writing to one topic with the same client setting and different
// FlushTimeouts: each step's topic check is bounded by its own FlushTimeout, not by the one of
// whichever step's StartBundle came first.
func TestTopicCheckIsBoundedByTheCallingStepsFlushTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saved := newPublisher
		t.Cleanup(func() { newPublisher = saved })
		// A Pub/Sub that never answers: the check ends when its timeout does.
		newPublisher = func(_ context.Context, _ clientKey, checkTimeout time.Duration) (*sharedPublisher, error) {
			time.Sleep(checkTimeout)
			return nil, errors.New("checking that Topic exists: context deadline exceeded")
		}
		key := clientKey{topic: "projects/p/topics/two-timeouts", endpoint: "two-timeouts.invalid:1"}
		var stepA sync.WaitGroup
		stepA.Go(func() { _, _ = getPublisher(context.Background(), key, time.Hour) })
		synctest.Wait()
		start := time.Now()
		_, err := getPublisher(context.Background(), key, 10*time.Second) // step B
		require.Error(t, err)
		assert.Equal(t, 10*time.Second, time.Since(start), "step B waits for its own check, bounded by its FlushTimeout of 10s")
		stepA.Wait()
	})
}

// A check that timed out under one step's short FlushTimeout is not remembered as the failure
// of a step whose FlushTimeout is long enough for the service's answer.
func TestTopicCheckTimeoutOfOneStepDoesNotFailAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saved := newPublisher
		t.Cleanup(func() { newPublisher = saved })
		const answer = 2 * time.Second // the service answers GetTopic in 2 s
		checks := 0
		newPublisher = func(_ context.Context, _ clientKey, checkTimeout time.Duration) (*sharedPublisher, error) {
			checks++
			if checkTimeout < answer {
				time.Sleep(checkTimeout)
				return nil, errors.New("checking that Topic exists: context deadline exceeded")
			}
			time.Sleep(answer)
			return &sharedPublisher{}, nil
		}
		key := clientKey{topic: "projects/p/topics/short-and-long", endpoint: "short-and-long.invalid:1"}
		_, err := getPublisher(context.Background(), key, time.Second) // step A, 1 s
		require.Error(t, err, "step A's check times out")
		_, err = getPublisher(context.Background(), key, time.Minute) // step B, 1 min
		assert.NoError(t, err, "step B checks under its own FlushTimeout")
		assert.Equal(t, 2, checks)
	})
}
