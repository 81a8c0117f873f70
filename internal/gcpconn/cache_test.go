package gcpconn

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCacheKeepsOneValuePerKey(t *testing.T) {
	var c Cache[string, *int]
	calls := 0
	create := func() (*int, error) { calls++; v := calls; return &v, nil }
	a, err := c.Get("a", create)
	require.NoError(t, err)
	again, err := c.Get("a", create)
	require.NoError(t, err)
	b, err := c.Get("b", create)
	require.NoError(t, err)
	assert.Same(t, a, again, "one value per key")
	assert.NotSame(t, a, b)
	assert.Equal(t, 2, calls)
}

func TestCacheDoesNotKeepAFailure(t *testing.T) {
	var c Cache[string, int]
	_, err := c.Get("k", func() (int, error) { return 0, errors.New("the key file is not there yet") })
	require.Error(t, err)
	v, err := c.Get("k", func() (int, error) { return 7, nil })
	require.NoError(t, err, "the next caller tries again")
	assert.Equal(t, 7, v)
}

func TestCreatingAValueDoesNotHoldTheCacheLock(t *testing.T) {
	var c Cache[string, string]
	var lockHeld bool
	var other string
	var otherErr error
	_, err := c.Get("slow", func() (string, error) {
		// A slow or blocking creation must not hold up every other key of the worker: the
		// shared lock is free while the value is created...
		if !c.mu.TryLock() {
			lockHeld = true
			return "", errors.New("stopped: the shared lock is held during the creation")
		}
		c.mu.Unlock()
		// ...so another key gets its value meanwhile.
		other, otherErr = c.Get("fast", func() (string, error) { return "fast client", nil })
		return "", errors.New("the test's key cannot be read")
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the test's key cannot be read")
	assert.False(t, lockHeld, "the value was created under the lock every key of the worker shares")
	require.NoError(t, otherErr)
	assert.Equal(t, "fast client", other)
}
