package exec

import (
	"time"

	"rsql/sql"
)

// lookupCache remembers what a lookup join found for a key: the table's rows with that key,
// or none (a negative entry, so an absent key does not reach the database every batch).
// An entry expires ttl after it was stored; at most max entries are kept, the least
// recently used going first when a new one needs room. A ttl of 0 disables the cache: get
// never finds anything and put keeps nothing.
//
// It is used by its operator's stage goroutine only: no locks. The rows it hands out are
// never modified, so a caller may keep them after the entry is evicted.
type lookupCache struct {
	ttl time.Duration
	max int
	m   map[string]*cacheEntry
	// The entries in use order: head.next is the most recently used, head.prev the least.
	head cacheEntry
}

type cacheEntry struct {
	key        string
	rows       []sql.Row
	expires    int64 // unix nanoseconds
	prev, next *cacheEntry
}

func newLookupCache(ttl time.Duration, max int) *lookupCache {
	c := &lookupCache{ttl: ttl, max: max, m: map[string]*cacheEntry{}}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *lookupCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
}

func (c *lookupCache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.head, c.head.next
	c.head.next.prev = e
	c.head.next = e
}

// get returns the rows of key (nil for a key known to be absent) when the cache holds an
// entry for it that has not expired at now; an expired entry is dropped.
func (c *lookupCache) get(key []byte, now time.Time) ([]sql.Row, bool) {
	e, ok := c.m[string(key)]
	if !ok {
		return nil, false
	}
	if now.UnixNano() >= e.expires {
		c.unlink(e)
		delete(c.m, e.key)
		return nil, false
	}
	if c.head.next != e {
		c.unlink(e)
		c.pushFront(e)
	}
	return e.rows, true
}

// put stores the rows of key (nil: the key is absent), valid until now + ttl, evicting
// the least recently used entries beyond max.
func (c *lookupCache) put(key string, rows []sql.Row, now time.Time) {
	if c.ttl <= 0 || c.max <= 0 {
		return
	}
	exp := now.Add(c.ttl).UnixNano()
	if e, ok := c.m[key]; ok {
		e.rows, e.expires = rows, exp
		c.unlink(e)
		c.pushFront(e)
		return
	}
	for len(c.m) >= c.max {
		old := c.head.prev
		c.unlink(old)
		delete(c.m, old.key)
	}
	e := &cacheEntry{key: key, rows: rows, expires: exp}
	c.m[key] = e
	c.pushFront(e)
}

// len is the number of entries held (expired ones included until they are asked for or
// evicted).
func (c *lookupCache) len() int { return len(c.m) }
