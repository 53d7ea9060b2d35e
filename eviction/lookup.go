package eviction

import (
	"math"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// Hit is the result of Admit: the cached prefix of a prompt, pinned until
// Release.
type Hit struct {
	// Blocks holds the prefix's K/V in logical order: device hits first,
	// then blocks promoted from lower tiers. The caller's block table
	// adopts them (taking its own references).
	Blocks []blockstore.BlockID
	// Tokens counts the prompt tokens served by each tier; their sum is
	// len(Blocks) * block size.
	Tokens [kvcache.NumTiers]int
	// Handle pins the prefix in the tree; pass it to Release.
	Handle radix.Handle
}

// Cached returns the sum of Tokens.
func (h Hit) Cached() int {
	n := 0
	for _, t := range h.Tokens {
		n += t
	}
	return n
}

// Peeked is Peek's answer: how many leading tokens of a prompt each tier
// holds, in whole blocks, the lower tiers counted from where the device's
// run ends.
type Peeked struct {
	Tokens [kvcache.NumTiers]int
}

// Cached returns the sum of Tokens.
func (p Peeked) Cached() int { return Hit{Tokens: p.Tokens}.Cached() }

// Peek reports how many leading tokens of tokens namespace ns holds in
// each tier, in whole blocks, for admission decisions (which request to
// admit first, whether to wait for a leader's prefill). It changes nothing
// the cache reports: no pin outlives it, no use is recorded, no hit is
// counted, no hit age is sampled, nothing is promoted.
func (m *Manager) Peek(ns string, tokens []int32) Peeked {
	var p Peeked
	var h radix.Handle
	m.blockBuf, h = m.tree.Match(ns, tokens, m.blockBuf[:0])
	dev := len(m.blockBuf)
	p.Tokens[kvcache.TierDevice] = dev * m.bsize
	if len(m.tiers) > 0 {
		fp := lastFingerprint(h.Node())
		salt := kvcache.NamespaceSalt(ns)
		now := m.now()
		for i := dev; (i+1)*m.bsize <= len(tokens); i++ {
			blk := tokens[i*m.bsize : (i+1)*m.bsize]
			fp = kvcache.Chain(fp, salt, blk)
			t := m.holder(ns, fp, blk, now)
			if t == nil {
				break
			}
			p.Tokens[t.Medium()] += m.bsize
		}
	}
	m.tree.Release(h)
	return p
}

// Cached returns how many leading tokens of tokens namespace ns holds on
// the device, in whole blocks: Peek's device count.
func (m *Manager) Cached(ns string, tokens []int32) int {
	var h radix.Handle
	m.blockBuf, h = m.tree.Match(ns, tokens, m.blockBuf[:0])
	m.tree.Release(h)
	return len(m.blockBuf) * m.bsize
}

// holder returns the first lower tier that holds the block, or nil.
func (m *Manager) holder(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) Tier {
	for _, t := range m.tiers {
		if t.Has(ns, fp, tokens, now) {
			return t
		}
	}
	return nil
}

// lastFingerprint is the fingerprint of the last block on n's path, the
// zero Fingerprint for none.
func lastFingerprint(n *radix.Node) kvcache.Fingerprint {
	if n == nil || n.IsRoot() {
		return kvcache.Fingerprint{}
	}
	fps := n.Fingerprints()
	return fps[len(fps)-1]
}

// Admission is what a request asks of the cache when the scheduler tries
// to admit it.
type Admission struct {
	Namespace string
	// Tokens are looked up in whole blocks; nil for a request that does
	// not read the cache (it still needs room).
	Tokens []int32
	Use    Use
	// Blocks is the number of blocks the request's table needs in all,
	// its cached prefix included.
	Blocks int
}

// Admit is the one admission step the engine and the simulators share. It
// finds the longest cached prefix of a.Tokens and makes sure the pool has
// the blocks the request needs beyond it, evicting (Reclaim) if it must,
// with the prefix pinned so that the eviction cannot take it. If the room
// is not there it returns how many blocks it lacked, holding nothing and
// recording nothing of the request: a request that waits and is looked up
// again at every scheduler step adds no hit, no use and no hit-age sample
// until it is admitted. Otherwise it commits the use: it promotes the
// blocks lower tiers hold that continue the prefix, refreshes the prefix
// for use (its TTL deadline, last use and priority), counts one hit unless
// a.Use.Readmit, samples each hit's age, and returns the Hit with its
// prefix pinned: the caller must Release (or Done) its Handle. dst is
// reused for Hit.Blocks. A use's TTL is cut to the current maximum.
func (m *Manager) Admit(a Admission, dst []blockstore.BlockID) (hit Hit, short int) {
	blocks, h := m.tree.Match(a.Namespace, a.Tokens, dst[:0])
	if need := a.Blocks - len(blocks); m.pool.NumFree() < need && m.Reclaim(need) != nil {
		m.Release(h)
		return Hit{Blocks: blocks[:0]}, need - m.pool.NumFree()
	}
	now := m.now()
	hit = Hit{Blocks: blocks, Handle: h}
	hit.Tokens[kvcache.TierDevice] = len(blocks) * m.bsize
	if m.samp.HitAge != nil && !a.Use.Readmit {
		for n := h.Node(); n != nil && !n.IsRoot(); n = n.Parent() {
			m.samp.HitAge(kvcache.TierDevice, time.Duration(now-n.Meta.LastAccess), len(n.Tokens()))
		}
	}
	if len(m.tiers) > 0 {
		hit = m.promote(a.Namespace, a.Tokens, hit, now, !a.Use.Readmit)
	}
	for _, bp := range a.Use.Breakpoints {
		m.tree.SplitAt(hit.Handle, bp.Tokens/m.bsize*m.bsize)
	}
	m.touch(hit.Handle.Node(), nil, now, a.Use, !a.Use.Readmit)
	return hit, 0
}

// promote extends hit with blocks found in the lower tiers, re-inserting
// them into the tree and re-pinning the longer path. sample says whether
// to sample the hits' ages (not for a readmitted request).
func (m *Manager) promote(ns string, tokens []int32, hit Hit, now int64, sample bool) Hit {
	salt := kvcache.NamespaceSalt(ns)
	dev := len(hit.Blocks)
	fp := lastFingerprint(hit.Handle.Node())
	var expires int64
	for i := dev; (i+1)*m.bsize <= len(tokens); i++ {
		blk := tokens[i*m.bsize : (i+1)*m.bsize]
		fp = kvcache.Chain(fp, salt, blk)
		t, sb, ok := m.get(ns, fp, blk, now)
		if !ok {
			break
		}
		id, err := m.pool.Alloc()
		if err != nil {
			break // no room to promote into; what is promoted stays useful
		}
		if err := m.pool.WriteFull(id, sb.Data); err != nil {
			m.pool.Release(id)
			break
		}
		t.Delete(ns, fp, blk)
		hit.Blocks = append(hit.Blocks, id)
		hit.Tokens[t.Medium()] += m.bsize
		expires = max(expires, sb.Expires)
		if sample && m.samp.HitAge != nil {
			m.samp.HitAge(t.Medium(), time.Duration(now-sb.LastUsed), m.bsize)
		}
	}
	promoted := len(hit.Blocks) - dev
	if promoted == 0 {
		return hit
	}
	m.promoted.Add(uint64(promoted))
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

// get returns the block from the first lower tier that has it.
func (m *Manager) get(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) (Tier, StoredBlock, bool) {
	for _, t := range m.tiers {
		if b, ok := t.Get(ns, fp, tokens, now); ok {
			return t, b, true
		}
	}
	return nil, StoredBlock{}, false
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
// from the sequence's Handle h (an Admit's, or the previous Extend's) and
// refreshes only the nodes below it. It releases h and returns a Handle
// pinning all of tokens; pass the last one to Done.
// REQUIRES: tokens[:h.Tokens()] is the path h pins in namespace ns.
func (m *Manager) Extend(ns string, h radix.Handle, tokens []int32, blocks []blockstore.BlockID, use Use) (existing int, nh radix.Handle, err error) {
	stop, old := h.Node(), h.Tokens()
	existing, nh, err = m.tree.Extend(ns, h, tokens, blocks)
	if err != nil {
		return 0, nh, err
	}
	for _, id := range blocks[existing:] {
		m.pool.RetainCache(id)
	}
	now := m.now()
	m.touch(nh.Node(), stop, now, use, true)
	if len(use.Breakpoints) > 0 {
		m.breakpointDeadlines(nh, old, max(old, existing*m.bsize), now, use)
	}
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
// in the path's hits by Admit and Extend already.
func (m *Manager) Done(h radix.Handle, use Use) {
	m.touch(h.Node(), nil, m.now(), use, false)
	m.tree.Trim(h)
	m.Release(h)
}

// Release unpins an Admit's prefix. Nodes of it that expired while pinned
// and are now unpinned leaves leave at once.
func (m *Manager) Release(h radix.Handle) {
	n := h.Node()
	m.tree.Release(h)
	if n != nil {
		m.expireUpward(n, m.now())
	}
}

// breakpointDeadlines splits the path nh pins at each of use's
// breakpoints at or deeper than old, the depth of the handle Extend grew from,
// and sets the deadlines of the nodes deeper than old: a running
// sequence's leaf grows in place, so the blocks it added share the leaf's
// Meta until the split, and those past a breakpoint would keep its longer
// TTL. A node that starts at fresh or deeper holds only blocks this Extend
// added (Admit split the prefix it matched), so its deadline is this
// use's alone; any other keeps the later of its own and this use's.
func (m *Manager) breakpointDeadlines(nh radix.Handle, old, fresh int, now int64, use Use) {
	for _, bp := range use.Breakpoints {
		// At old too: a leaf that ended there has grown past it in place.
		if b := bp.Tokens / m.bsize * m.bsize; b >= old {
			m.tree.SplitAt(nh, b)
		}
	}
	for n := nh.Node(); n != nil && !n.IsRoot() && n.Depth() > old; n = n.Parent() {
		d := m.deadline(n, now, use)
		if n.Depth()-len(n.Tokens()) < fresh {
			d = max(d, n.Meta.Deadline)
		}
		if d == n.Meta.Deadline {
			continue
		}
		earlier := d < n.Meta.Deadline
		n.Meta.Deadline = d
		if earlier || !n.Meta.Queued {
			// An earlier deadline needs an entry of its own: the queue
			// pops n at its old one otherwise.
			n.Meta.Queued = true
			m.expiry.Push(expiryEntry{deadline: d, node: n})
		}
	}
}

// deadline is when use, at now, keeps n until: its TTL, or the longest
// TTL of its breakpoints whose whole blocks hold all of n's.
func (m *Manager) deadline(n *radix.Node, now int64, use Use) int64 {
	d := addTTL(now, m.ttlFor(use.TTL))
	for _, bp := range use.Breakpoints {
		if n.Depth() <= bp.Tokens/m.bsize*m.bsize {
			d = max(d, addTTL(now, m.ttlFor(bp.TTL)))
		}
	}
	return d
}

// touch records a use at now by a request with use's TTL, breakpoints and
// priority on n and its ancestors up to, not including, stop (nil: the
// root), and counts it in their hits if hit is set. A request's Admit
// counts the path it matched and each Extend the nodes below its previous
// handle, so every request that used a node counts once. A node within a
// breakpoint's whole blocks gets the breakpoint's TTL if longer.
func (m *Manager) touch(n, stop *radix.Node, now int64, use Use, hit bool) {
	for ; n != nil && n != stop && !n.IsRoot(); n = n.Parent() {
		deadline := m.deadline(n, now, use)
		meta := &n.Meta
		if meta.Created == 0 {
			meta.Created = now
		}
		meta.LastAccess = now
		if hit {
			meta.Hits++
		}
		notePriority(meta, use.Priority, now, deadline)
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
