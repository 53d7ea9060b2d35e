package routesim

import (
	"container/list"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// sharedTier models the remote tier (package remotetier) the replicas
// share: every block a replica caches is written through to it, and a
// request's prompt continuing past what its replica holds takes the
// blocks the tier holds from there on, in an unbroken run. It keeps block
// fingerprints only, within a capacity in blocks by least-recent use and
// each until its expiry (the store's TTL from the last write or fetch). It
// assumes every fetch beats recomputing, as the fetch rule measured on a
// CPU replica (BENCHMARKS.md).
type sharedTier struct {
	capacity int
	ttl      time.Duration
	byFP     map[kvcache.Fingerprint]*list.Element // of *sharedBlock
	lru      list.List                             // most recent at the front
}

type sharedBlock struct {
	fp      kvcache.Fingerprint
	expires time.Duration
}

func newSharedTier(capacity int, ttl time.Duration) *sharedTier {
	return &sharedTier{capacity: capacity, ttl: ttl, byFP: map[kvcache.Fingerprint]*list.Element{}}
}

// has reports whether the tier holds fp at now, refreshing it if so.
func (t *sharedTier) has(fp kvcache.Fingerprint, now time.Duration) bool {
	el, ok := t.byFP[fp]
	if !ok {
		return false
	}
	b := el.Value.(*sharedBlock)
	if b.expires <= now {
		t.lru.Remove(el)
		delete(t.byFP, fp)
		return false
	}
	b.expires = now + t.ttl
	t.lru.MoveToFront(el)
	return true
}

// put writes fp at now, evicting the least recently used block beyond the
// capacity.
func (t *sharedTier) put(fp kvcache.Fingerprint, now time.Duration) {
	if t.has(fp, now) {
		return
	}
	t.byFP[fp] = t.lru.PushFront(&sharedBlock{fp: fp, expires: now + t.ttl})
	if t.lru.Len() > t.capacity {
		last := t.lru.Back()
		t.lru.Remove(last)
		delete(t.byFP, last.Value.(*sharedBlock).fp)
	}
}

// serve accounts one request's use of the tier: fps are the fingerprints
// of the whole blocks the request looked up, local how many of them its
// replica held (or took from the tier: none before this call), cached
// how many it now caches. It returns the blocks the tier served beyond
// local, then writes the cached ones through.
func (t *sharedTier) serve(fps []kvcache.Fingerprint, local, cached int, now time.Duration) int {
	n := 0
	for local+n < len(fps) && t.has(fps[local+n], now) {
		n++
	}
	for _, fp := range fps[:min(cached, len(fps))] {
		t.put(fp, now)
	}
	return n
}
