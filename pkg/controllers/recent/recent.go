// Package recent remembers what a controller created a moment ago, before its informer
// cache shows it. During a registration a Cluster changes several times within a
// second; without this, each change that reads the cache before it catches up would
// create the same object again and get a 409 for it.
package recent

import (
	"sync"
	"time"
)

// Trust is how long a creation is trusted without the cache showing the object. It is
// far longer than an informer lags on an idle hub because a busy one lags far more:
// with 1,000 clusters registering at once on 2 cores, the hub's namespace cache was
// more than 10 s behind its creates (make bench: with a 10 s Trust, half the
// namespaces were created twice). Users of Created Forget a key when its object is
// deleted, so a deleted object is created anew at once, not after Trust.
const Trust = time.Minute

// Created holds, by key, when an object was created, and serializes the creations of
// one key so that two workers do not both try.
type Created struct {
	at    sync.Map // key → time.Time
	locks sync.Map // key → *sync.Mutex
}

// Lock serializes callers for key; call the returned function to unlock.
func (c *Created) Lock(key string) (unlock func()) {
	m, _ := c.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Has says whether key was created within Trust.
func (c *Created) Has(key string) bool {
	at, ok := c.at.Load(key)
	return ok && time.Since(at.(time.Time)) < Trust
}

// Mark records that key was created (or found to exist) now.
func (c *Created) Mark(key string) { c.at.Store(key, time.Now()) }

// Forget drops key, once the cache shows the object.
func (c *Created) Forget(key string) {
	c.at.Delete(key)
	c.locks.Delete(key)
}
