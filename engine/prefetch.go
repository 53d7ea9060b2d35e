package engine

import (
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// maxPrefetches bounds the prefetches running at once; a request that
// finds them all busy is not prefetched (its admission reads what it
// needs from the disk tier itself).
const maxPrefetches = 4

// prefetch starts reading, in the background, the blocks of s's prompt
// that the disk tier holds past the run the device holds: into the host
// tier when there is one, else into the disk tier's own read-ahead, so
// that s's admission, if s waits at all, promotes them from memory instead
// of reading the disk on the scheduler goroutine. It reads only the run
// that continues the prompt's cached prefix (what admission can use). It
// runs on the scheduler goroutine, as s enters the waiting queue: the
// device's run is looked up there (the disk keeps the records of blocks
// promoted to the device, which must not be read again).
func (e *Engine) prefetch(s *seq) {
	if e.disk == nil || !e.sched.cacheOn(s) {
		return
	}
	bs := e.cfg.BlockSize
	ns, tokens := s.req.Namespace, s.tokens[:len(s.tokens)-1] // what admission looks up
	from := e.cache.Cached(ns, tokens) / bs
	if from == len(tokens)/bs {
		return
	}
	select {
	case e.reads <- struct{}{}:
	default:
		return
	}
	now := e.cfg.Clock.Now().UnixNano()
	ttl := time.Duration(e.maxTTL.Load())
	go func() {
		defer func() { <-e.reads }()
		fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, bs)
		for i := from; i < len(fps); i++ {
			fp, blk := fps[i], tokens[i*bs:(i+1)*bs]
			if e.host == nil {
				if !e.disk.ReadAhead(ns, fp, blk, now) {
					return
				}
				continue
			}
			if e.host.Has(ns, fp, blk, now) {
				continue
			}
			b, ok := e.disk.Get(ns, fp, blk, now)
			if !ok {
				return
			}
			// The block's own deadline may have passed (the disk keeps
			// records longer); in host memory it waits for admission.
			b.Expires = max(b.Expires, now+int64(ttl))
			e.host.Put(ns, fp, blk, b, ttl)
		}
	}()
}
