package eviction

import (
	"math"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/radix"
)

// Hit is the result of Lookup: the cached prefix of a prompt, pinned until
// Release.
type Hit struct {
	// Blocks holds the prefix's K/V in logical order: device hits first,
	// then blocks promoted from the host tier. The caller's block table
	// adopts them (taking its own references).
	Blocks []blockstore.BlockID
	// DeviceTokens and HostTokens count the prompt tokens served by each
	// tier; their sum is len(Blocks) * block size.
	DeviceTokens, HostTokens int
	// Handle pins the prefix in the tree; pass it to Release.
	Handle radix.Handle
}

// Lookup finds the longest cached prefix of tokens in namespace ns, in
// whole blocks: first in the device tree, then, block by block along the
// fingerprint chain, in the host tier, promoting each host hit into a fresh
// device block. The prefix is refreshed for use (its TTL deadline, last use
// and priority) and pinned: the caller must Release the returned Handle
// when it no longer needs the blocks. dst is reused for Hit.Blocks. A use's
// TTL is cut to the current maximum (callers check requests against it with
// ResolveTTL when they accept them; the maximum may be lowered later).
func (m *Manager) Lookup(ns string, tokens []int32, use Use, dst []blockstore.BlockID) Hit {
	ttl := m.ttlFor(use.TTL)
	now := m.now()
	blocks, h := m.tree.Match(ns, tokens, dst[:0])
	hit := Hit{Blocks: blocks, DeviceTokens: len(blocks) * m.bsize, Handle: h}
	if m.samp.HitAge != nil {
		for n := h.Node(); n != nil && !n.IsRoot(); n = n.Parent() {
			m.samp.HitAge(TierDevice, time.Duration(now-n.Meta.LastAccess), len(n.Tokens()))
		}
	}
	if m.host != nil {
		hit = m.promote(ns, tokens, hit, now)
	}
	m.touch(hit.Handle.Node(), nil, now, ttl, use.Priority, !use.Readmit)
	return hit
}

// promote extends hit with blocks found in the host tier, re-inserting them
// into the tree and re-pinning the longer path.
func (m *Manager) promote(ns string, tokens []int32, hit Hit, now int64) Hit {
	salt := NamespaceSalt(ns)
	dev := len(hit.Blocks)
	fp := ChainPrefix(salt, tokens, m.bsize, dev)
	var expires int64
	for i := dev; (i+1)*m.bsize <= len(tokens); i++ {
		blk := tokens[i*m.bsize : (i+1)*m.bsize]
		fp = Chain(fp, salt, blk)
		hb, ok := m.host.Get(ns, fp, blk, now)
		if !ok {
			break
		}
		id, err := m.pool.Alloc()
		if err != nil {
			break // no room to promote into; what is promoted stays useful
		}
		if err := m.pool.WriteFull(id, hb.Data); err != nil {
			m.pool.Release(id)
			break
		}
		m.host.Delete(ns, fp, blk)
		hit.Blocks = append(hit.Blocks, id)
		expires = max(expires, hb.Expires)
		if m.samp.HitAge != nil {
			m.samp.HitAge(TierHost, time.Duration(now-hb.LastUsed), m.bsize)
		}
	}
	promoted := len(hit.Blocks) - dev
	if promoted == 0 {
		return hit
	}
	m.promoted.Add(uint64(promoted))
	hit.HostTokens = promoted * m.bsize
	n := dev + promoted
	existing, err := m.tree.Insert(ns, tokens[:n*m.bsize], hit.Blocks)
	if err != nil {
		panic("eviction: re-inserting promoted blocks: " + err.Error())
	}
	for _, id := range hit.Blocks[existing:] {
		m.pool.RetainCache(id)
	}
	for _, id := range hit.Blocks[dev:] {
		m.pool.Release(id) // the tree's reference keeps it
	}
	m.tree.Release(hit.Handle)
	blocks, h := m.tree.Match(ns, tokens[:n*m.bsize], hit.Blocks[:0])
	hit.Blocks, hit.Handle = blocks, h
	for nd := h.Node(); nd != nil && !nd.IsRoot() && nd.Meta.Deadline < expires; nd = nd.Parent() {
		nd.Meta.Deadline = expires
	}
	return hit
}

// Insert adds the whole blocks of tokens to the cache and refreshes their
// path for use. The tree takes a cache reference to each block it did not
// already hold; for the leading blocks it already held (existing of them)
// it keeps its own, which may differ from the caller's.
func (m *Manager) Insert(ns string, tokens []int32, blocks []blockstore.BlockID, use Use) (existing int, err error) {
	existing, h, err := m.Extend(ns, radix.Handle{}, tokens, blocks, use)
	m.tree.Release(h)
	return existing, err
}

// Extend is Insert for a running sequence that offers its blocks as they
// fill, so prompts still being prefilled are shareable at once: it walks
// from the sequence's Handle h (a Lookup's, or the previous Extend's) and
// refreshes only the nodes below it. It releases h and returns a Handle
// pinning all of tokens; pass the last one to Done.
// REQUIRES: tokens[:h.Tokens()] is the path h pins in namespace ns.
func (m *Manager) Extend(ns string, h radix.Handle, tokens []int32, blocks []blockstore.BlockID, use Use) (existing int, nh radix.Handle, err error) {
	stop := h.Node()
	existing, nh, err = m.tree.Extend(ns, h, tokens, blocks)
	if err != nil {
		return 0, nh, err
	}
	for _, id := range blocks[existing:] {
		m.pool.RetainCache(id)
	}
	m.touch(nh.Node(), stop, m.now(), m.ttlFor(use.TTL), use.Priority, true)
	return existing, nh, nil
}

// Reserve makes room in the tree for a running sequence to offer tokens
// more tokens through Extend from its Handle h without reallocating (see
// radix.Tree.Reserve): a sequence calls it with what it may still offer,
// so its iterations allocate nothing as its blocks fill.
func (m *Manager) Reserve(h radix.Handle, tokens int) { m.tree.Reserve(h, tokens) }

// Done ends a request's use of its cached path: it refreshes the whole
// path (the TTL counts from the last use), gives back the room Reserve
// made that the request did not fill, and releases h. The use was counted
// in the path's hits by Lookup and Extend already.
func (m *Manager) Done(h radix.Handle, use Use) {
	m.touch(h.Node(), nil, m.now(), m.ttlFor(use.TTL), use.Priority, false)
	m.tree.Trim(h)
	m.Release(h)
}

// Release unpins a Lookup's prefix. Nodes of it that expired while pinned
// and are now unpinned leaves leave at once.
func (m *Manager) Release(h radix.Handle) {
	n := h.Node()
	m.tree.Release(h)
	if n != nil {
		m.expireUpward(n, m.now())
	}
}

// touch records a use at now by a request with ttl and priority on n and
// its ancestors up to, not including, stop (nil: the root), and counts it
// in their hits if hit is set. A request's Lookup counts the path it
// matched and each Extend the nodes below its previous handle, so every
// request that used a node counts once.
func (m *Manager) touch(n, stop *radix.Node, now int64, ttl time.Duration, prio int32, hit bool) {
	deadline := addTTL(now, ttl)
	for ; n != nil && n != stop && !n.IsRoot(); n = n.Parent() {
		meta := &n.Meta
		if meta.Created == 0 {
			meta.Created = now
		}
		meta.LastAccess = now
		if hit {
			meta.Hits++
		}
		notePriority(meta, prio, now, deadline)
		if deadline > meta.Deadline {
			meta.Deadline = deadline
		}
		if !meta.Queued {
			meta.Queued = true
			m.expiry.Push(expiryEntry{deadline: meta.Deadline, node: n})
		}
	}
}

// addTTL returns the deadline now + ttl, saturated at the largest time a
// deadline holds: a TTL of years (any valid Duration) must not wrap into
// the past and expire at once.
func addTTL(now int64, ttl time.Duration) int64 {
	if int64(ttl) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(ttl)
}

// notePriority records a use of priority prio whose TTL runs to deadline.
// A prefix's priority is the highest among uses whose TTL has not run out;
// once the TTL of the use that set it has, it is the latest use's (see
// priority). So a high-priority request protects a prefix for as long as
// it asked the prefix be kept, not for good.
func notePriority(meta *radix.Meta, prio int32, now, deadline int64) {
	switch {
	case prio > meta.Priority || now >= meta.PriorityUntil:
		meta.Priority, meta.PriorityUntil = prio, deadline
	case prio == meta.Priority:
		meta.PriorityUntil = max(meta.PriorityUntil, deadline)
	}
	meta.LastPriority = prio
}

// priority is n's priority at now (see notePriority).
func priority(n *radix.Node, now int64) int32 {
	if now < n.Meta.PriorityUntil {
		return n.Meta.Priority
	}
	return n.Meta.LastPriority
}

// Cached returns how many leading tokens of tokens namespace ns holds on
// the device, in whole blocks, without refreshing or pinning anything.
func (m *Manager) Cached(ns string, tokens []int32) int {
	var h radix.Handle
	m.blockBuf, h = m.tree.Match(ns, tokens, m.blockBuf[:0])
	m.tree.Release(h)
	return len(m.blockBuf) * m.bsize
}
