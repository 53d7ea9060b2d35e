package engine

import (
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// maxPrefetches bounds the prefetches running at once; a request that
// finds them all busy is not prefetched (its admission reads what it
// needs from the disk tier itself).
const maxPrefetches = 4

// prefetch starts reading, in the background, the blocks of the prompt
// of req that the disk tier holds into the host tier, so that its admission
// promotes them from host memory instead of reading the disk on the
// scheduler goroutine: the disk tier's reads are asynchronous, as the
// host tier's promotions already were. It needs both tiers, and reads
// only the run of blocks that continues from the prompt's start (what
// admission can use); blocks the host tier holds are skipped.
// tokens is what admission looks up: the prompt but its last token.
func (e *Engine) prefetch(req *Request, tokens []int32) {
	if e.disk == nil || e.host == nil || e.cfg.DisablePrefixCache || req.Cache.Disabled {
		return
	}
	select {
	case e.reads <- struct{}{}:
	default:
		return
	}
	ns := req.Namespace
	go func() {
		defer func() { <-e.reads }()
		bs := e.cfg.BlockSize
		fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, bs)
		now := e.cfg.Clock.Now().UnixNano()
		for i, fp := range fps {
			blk := tokens[i*bs : (i+1)*bs]
			if e.host.Has(ns, fp, blk, now) {
				continue
			}
			b, ok := e.disk.Get(ns, fp, blk, now)
			if !ok {
				return
			}
			// The block's own deadline may have passed (the disk keeps
			// records longer); in host memory it waits for admission.
			ttl := time.Duration(e.maxTTL.Load())
			b.Expires = max(b.Expires, now+int64(ttl))
			e.host.Put(ns, fp, blk, b, ttl)
		}
	}()
}
