package gcpconn

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// FailureTTL is how long a Cache remembers a failed creation: every caller of the key during
// that time gets the same error at once, without a network call, and the first caller after
// it tries again. It keeps a failing read (a queue the sink may not read, a missing
// dead-letter topic, a key file that is not there) from being repeated by every DoFn instance
// on every bundle, and lets a fix be picked up within half a minute. A failure marked
// Transient is not remembered.
const FailureTTL = 30 * time.Second

// Transient marks err, returned by a Cache's create, as a failure of the moment (a service
// overloaded or out of reach, a read that timed out): the callers waiting for that creation
// get it, but the Cache does not remember it, so the next caller of the key creates the value
// again. Remembering it would fail every caller for FailureTTL on the strength of one answer
// that the next try may not give. The result wraps err (errors.Is, errors.As and status.Code
// see through it) and has its text; Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Cache keeps one value of type V per key for a worker process: the clients and publishers
// that every DoFn instance of a worker shares (portable runners never call Teardown, so a
// client per instance would leak connections), and what the first-use checks found out about
// each queue or topic.
//
// Each key is created by one call of create at a time, and that call's result is shared with
// every caller that asks for the key meanwhile: with 64 DoFn instances starting together and a
// read that takes 200 ms, every instance has its answer after about 200 ms, not the last one
// after 64 reads. No lock is held while create runs, so a slow key holds up nobody else. Each
// caller waits on its own context: a caller whose context ends gets the context's error, and
// the creation goes on for the others. create runs on a goroutine of its own and gets no
// caller's context: a bundle's context is for that bundle's goroutine (Beam's is not safe for
// concurrent use) and may end before the creation does, so create bounds its own time and
// logs without a bundle's context. A failed creation is remembered for FailureTTL, unless
// create marked the failure Transient: the callers that waited for it get it all the same, and
// the next caller creates again.
//
// IdleTTL and MaxEntries bound the cache for keys that come from the data (one entry per
// queue): an entry nobody asked for during IdleTTL is dropped, and beyond MaxEntries the
// least recently used one is (checked as entries are added and as creations end: creations
// under way are never dropped, so the cache exceeds MaxEntries by at most the creations under
// way at once). A dropped value is created again by the next caller of its key; it is never
// closed, so a value that holds a connection belongs in a cache without bounds, keyed by
// something the pipeline fixes at construction (a client setting). The zero Cache has no
// bounds and is ready to use.
type Cache[K comparable, V any] struct {
	// IdleTTL drops an entry that no caller has asked for during this time; 0 keeps
	// entries for the life of the process.
	IdleTTL time.Duration
	// MaxEntries drops the least recently used entries beyond this many; 0 sets no bound.
	MaxEntries int

	mu      sync.Mutex
	entries map[K]*list.Element // of *cacheEntry[K, V]
	recency list.List           // most recently used first
}

// cacheEntry is one key's value, or the creation of it under way.
type cacheEntry[K comparable, V any] struct {
	key  K
	done chan struct{} // closed when the creation has ended; value and err are set then

	// Guarded by Cache.mu.
	finished bool
	lastUsed time.Time
	retryAt  time.Time // of a failure: when the next caller creates the value again

	// Written before done is closed, read after.
	value V
	err   error
}

// Get returns the value for key, calling create for it on first use, after a remembered
// failure has expired, after a Transient failure, or after the entry was dropped. Callers of the same key wait for one
// creation and share its result; a caller whose ctx ends first gets ctx.Err() and leaves the
// creation running for the others.
func (c *Cache[K, V]) Get(ctx context.Context, key K, create func() (V, error)) (V, error) {
	result, _ := c.Start(key, create)
	return result(ctx)
}

// Start is Get without the wait: it finds key's value or remembered failure, or else starts
// its creation (unless one is under way already), and returns at once. ready says the result
// is at hand; either way result returns it, waiting for the creation Start found or began
// (not for any later one, even if the entry is dropped meanwhile) until ctx ends. A creation
// that has ended gives its result whatever ctx, so a ctx that has ended already makes result
// a poll: the result if the creation has ended, else ctx.Err() at once. Start serves a caller
// that need not have the value to go on.
func (c *Cache[K, V]) Start(key K, create func() (V, error)) (result func(ctx context.Context) (V, error), ready bool) {
	e, ready := c.lookup(key, create)
	if ready {
		// Without touching done: the common case costs no channel operation (and an entry
		// made inside a testing/synctest bubble stays usable outside it).
		v, err := e.value, e.err
		return func(context.Context) (V, error) { return v, err }, true
	}
	return func(ctx context.Context) (V, error) {
		select {
		case <-e.done:
			return e.value, e.err
		default:
		}
		select {
		case <-e.done:
			return e.value, e.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}, false
}

// lookup finds key's entry, or makes one and starts its creation; ready says the entry's
// creation has ended (its value and err are then set and stay so).
func (c *Cache[K, V]) lookup(key K, create func() (V, error)) (e *cacheEntry[K, V], ready bool) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	if el, found := c.entries[key]; found {
		e = el.Value.(*cacheEntry[K, V])
		if e.finished && e.err != nil && !now.Before(e.retryAt) {
			c.removeLocked(el)
			e = nil
		} else {
			e.lastUsed = now
			c.recency.MoveToFront(el)
		}
	}
	if e == nil {
		e = &cacheEntry[K, V]{key: key, done: make(chan struct{}), lastUsed: now}
		if c.entries == nil {
			c.entries = map[K]*list.Element{}
		}
		c.entries[key] = c.recency.PushFront(e)
		c.boundLocked()
		go c.create(e, create)
		return e, false
	}
	return e, e.finished
}

// create runs one creation of e and publishes its result.
func (c *Cache[K, V]) create(e *cacheEntry[K, V], create func() (V, error)) {
	v, err := create()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		var zero V
		v = zero
		e.retryAt = time.Now().Add(FailureTTL)
	}
	e.value, e.err, e.finished = v, err, true
	close(e.done)
	var transient *transientError
	if errors.As(err, &transient) {
		// Forgotten at once: the callers that waited have the failure, the next one reads again.
		if el, ok := c.entries[e.key]; ok && el.Value == e {
			c.removeLocked(el)
		}
	}
	// Creations under way are never dropped, so while many were, the cache may have grown
	// past MaxEntries: back to it as each one ends.
	c.boundLocked()
}

// Len returns the number of entries, creations under way included.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// expireLocked drops the entries idle for IdleTTL and the failures past their retry time,
// oldest first, stopping at the first entry used since (each use moves an entry to the front).
func (c *Cache[K, V]) expireLocked(now time.Time) {
	if c.IdleTTL <= 0 {
		return
	}
	for el := c.recency.Back(); el != nil; {
		e := el.Value.(*cacheEntry[K, V])
		if now.Sub(e.lastUsed) < c.IdleTTL {
			return
		}
		prev := el.Prev()
		if e.finished {
			c.removeLocked(el)
		}
		el = prev
	}
}

// boundLocked drops the least recently used finished entries beyond MaxEntries.
func (c *Cache[K, V]) boundLocked() {
	if c.MaxEntries <= 0 {
		return
	}
	for el := c.recency.Back(); el != nil && len(c.entries) > c.MaxEntries; {
		prev := el.Prev()
		if el.Value.(*cacheEntry[K, V]).finished {
			c.removeLocked(el)
		}
		el = prev
	}
}

func (c *Cache[K, V]) removeLocked(el *list.Element) {
	delete(c.entries, el.Value.(*cacheEntry[K, V]).key)
	c.recency.Remove(el)
}
