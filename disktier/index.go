package disktier

import (
	"fmt"
	"slices"
	"sync"

	"github.com/prefixd/prefixd/kvcache"
)

// entry is what the index keeps of a record: enough to answer Has and to
// keep the budget without reading the file.
type entry struct {
	fp, parent kvcache.Fingerprint
	ns         string
	tokens     []int32
	expiry     int64 // when the record leaves the tier, Unix ns
	size       int64 // the record's bytes on disk

	prev, next *entry // the LRU list, most recent first
}

// index maps fingerprints to records, in least-recent-use order. It is
// safe for concurrent use.
type index struct {
	mu    sync.Mutex
	m     map[kvcache.Fingerprint]*entry
	lru   entry // sentinel
	bytes int64
}

func (x *index) init() {
	x.m = map[kvcache.Fingerprint]*entry{}
	x.lru.prev, x.lru.next = &x.lru, &x.lru
}

func (x *index) unlink(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (x *index) pushFront(e *entry) {
	e.prev, e.next = &x.lru, x.lru.next
	x.lru.next.prev = e
	x.lru.next = e
}

// has reports whether the record of exactly this block is indexed and
// unexpired at now.
func (x *index) has(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[fp]
	return e != nil && e.ns == ns && e.expiry > now && slices.Equal(e.tokens, tokens)
}

// refresh marks fp's record used, its expiry at least expiry.
func (x *index) refresh(fp kvcache.Fingerprint, expiry int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.m[fp]; e != nil {
		e.expiry = max(e.expiry, expiry)
		x.unlink(e)
		x.pushFront(e)
	}
}

// insert indexes e as the most recently used record and reports whether
// it is new; an entry already there for e.fp (the same file, rewritten
// after it expired) is kept and made the most recently used.
func (x *index) insert(e *entry) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.m[e.fp]; old != nil {
		old.expiry = max(old.expiry, e.expiry)
		x.unlink(old)
		x.pushFront(old)
		return false
	}
	x.m[e.fp] = e
	x.pushFront(e)
	x.bytes += e.size
	return true
}

// insertOld indexes e, found by the scan, as the least recently used
// record, unless the index has one for e.fp already.
func (x *index) insertOld(e *entry) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m[e.fp] != nil {
		return false
	}
	x.m[e.fp] = e
	e.next, e.prev = &x.lru, x.lru.prev
	x.lru.prev.next = e
	x.lru.prev = e
	x.bytes += e.size
	return true
}

// remove drops fp's entry and returns it, or nil.
func (x *index) remove(fp kvcache.Fingerprint) *entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[fp]
	if e != nil {
		x.drop(e)
	}
	return e
}

// drop removes e. REQUIRES: mu held.
func (x *index) drop(e *entry) {
	delete(x.m, e.fp)
	x.unlink(e)
	x.bytes -= e.size
}

// removeIf drops and returns every entry sel selects.
func (x *index) removeIf(sel func(*entry) bool) []*entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*entry
	for _, e := range x.m {
		if sel(e) {
			x.drop(e)
			out = append(out, e)
		}
	}
	return out
}

// evict drops and returns the entries expired at now at the cold end of
// the LRU list, then the least recently used until bytes fit capacity.
func (x *index) evict(capacity, now int64) []*entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*entry
	for e := x.lru.prev; e != &x.lru && (x.bytes > capacity || e.expiry <= now); e = x.lru.prev {
		x.drop(e)
		out = append(out, e)
	}
	return out
}

// stats returns the block and byte counts.
func (x *index) stats() kvcache.TierStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return kvcache.TierStats{Blocks: len(x.m), Bytes: x.bytes}
}

// check verifies the LRU list against the map and the byte count.
func (x *index) check() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	n, bytes := 0, int64(0)
	for e := x.lru.next; e != &x.lru; e = e.next {
		if n++; n > len(x.m) {
			return fmt.Errorf("the LRU list is longer than the %d entries", len(x.m))
		}
		if x.m[e.fp] != e || e.next.prev != e || e.prev.next != e {
			return fmt.Errorf("LRU entry %d is not the map's or is mislinked", n)
		}
		if e.size <= 0 {
			return fmt.Errorf("an entry of %d bytes", e.size)
		}
		bytes += e.size
	}
	if n != len(x.m) || bytes != x.bytes {
		return fmt.Errorf("LRU list of %d entries and %d bytes, index %d and %d", n, bytes, len(x.m), x.bytes)
	}
	return nil
}
