package eviction

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/radix"
)

// pinKey identifies a pin by namespace and whole-block tokens.
func pinKey(ns string, tokens []int32) string {
	var b []byte
	if len(tokens) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens))
	}
	return ns + "\x00" + string(b)
}

// Pin keeps the cached prefix tokens of namespace ns (whole blocks; a
// trailing partial block is ignored) through TTL expiry and pressure until
// Unpin or a flush. The prefix must be cached in full (ErrNotCached), and
// the blocks pinned by operators may not exceed the configured fraction of
// the pool (ErrPinBudget). Pinning a prefix already pinned is a no-op.
func (m *Manager) Pin(ns string, tokens []int32) (kvcache.PinInfo, error) {
	tokens = tokens[:len(tokens)/m.bsize*m.bsize]
	if len(tokens) == 0 {
		return kvcache.PinInfo{}, fmt.Errorf("%w: a pin needs at least one whole block (%d tokens)", kvcache.ErrNotCached, m.bsize)
	}
	key := pinKey(ns, tokens)
	if _, ok := m.pins[key]; ok {
		return kvcache.PinInfo{Namespace: ns, Tokens: len(tokens)}, nil
	}
	var h radix.Handle
	m.blockBuf, h = m.tree.Match(ns, tokens, m.blockBuf[:0])
	if got := len(m.blockBuf) * m.bsize; got < len(tokens) {
		m.tree.Release(h)
		return kvcache.PinInfo{}, fmt.Errorf("%w: %d of %d tokens are cached", kvcache.ErrNotCached, got, len(tokens))
	}
	added := 0
	for _, id := range m.blockBuf {
		if m.pinned[id] == 0 {
			added++
		}
	}
	if len(m.pinned)+added > m.pinBudget {
		m.tree.Release(h)
		return kvcache.PinInfo{}, fmt.Errorf("%w: pinning %d more blocks would hold %d, budget %d",
			kvcache.ErrPinBudget, added, len(m.pinned)+added, m.pinBudget)
	}
	for _, id := range m.blockBuf {
		m.pinned[id]++
	}
	m.pins[key] = &operatorPin{ns: ns, tokens: slices.Clone(tokens), blocks: slices.Clone(m.blockBuf), h: h}
	return kvcache.PinInfo{Namespace: ns, Tokens: len(tokens)}, nil
}

// Unpin removes the operator pin of exactly this prefix (whole blocks).
// It reports whether there was one.
func (m *Manager) Unpin(ns string, tokens []int32) bool {
	tokens = tokens[:len(tokens)/m.bsize*m.bsize]
	key := pinKey(ns, tokens)
	p, ok := m.pins[key]
	if ok {
		m.dropPin(key, p)
	}
	return ok
}

// dropPin releases one operator pin and lets what expired under it go.
func (m *Manager) dropPin(key string, p *operatorPin) {
	m.unpin(key, p)
	m.expireUpward(p.h.Node(), m.now())
}

// unpin forgets one operator pin and unpins its path in the tree, leaving
// what expired under it in place.
func (m *Manager) unpin(key string, p *operatorPin) {
	delete(m.pins, key)
	for _, id := range p.blocks {
		if m.pinned[id]--; m.pinned[id] == 0 {
			delete(m.pinned, id)
		}
	}
	m.tree.Release(p.h)
}

// Pins lists the operator pins.
func (m *Manager) Pins() []kvcache.PinInfo {
	out := make([]kvcache.PinInfo, 0, len(m.pins))
	for _, p := range m.pins {
		out = append(out, kvcache.PinInfo{Namespace: p.ns, Tokens: len(p.tokens)})
	}
	return out
}

// PinnedBlocks returns the blocks held by operator pins and the budget.
func (m *Manager) PinnedBlocks() (pinned, budget int) { return len(m.pinned), m.pinBudget }
