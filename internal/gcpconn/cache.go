package gcpconn

import "sync"

// Cache keeps one value of type V per key for the life of the process: the clients (and
// publishers) that every DoFn instance of a worker shares, because portable runners never
// call Teardown and a client per instance would leak connections. Its lock only guards the
// map: each key has an entry with a lock of its own, held while that key's value is created,
// so a slow creation (a key file on a network file system, a topic check) holds up the
// callers of its own key and nobody else. A failed creation is not kept: the next caller
// tries again (a key file may appear, a transient error pass). The zero Cache is ready to
// use; values are never closed.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*cacheEntry[V]
}

// cacheEntry is the value of one key, once created.
type cacheEntry[V any] struct {
	mu    sync.Mutex
	value V
	ok    bool
}

// Get returns the value for key, calling create for it on first use or after a failure.
func (c *Cache[K, V]) Get(key K, create func() (V, error)) (V, error) {
	c.mu.Lock()
	e, found := c.entries[key]
	if !found {
		if c.entries == nil {
			c.entries = map[K]*cacheEntry[V]{}
		}
		e = &cacheEntry[V]{}
		c.entries[key] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ok {
		return e.value, nil
	}
	v, err := create()
	if err != nil {
		var zero V
		return zero, err
	}
	e.value, e.ok = v, true
	return v, nil
}
