package radix

import (
	"slices"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
)

// mirror rebuilds the tree's contents from its Observer calls alone, as an
// event subscriber does: each block's path is its parent's plus its own
// tokens, its parent named by fingerprint, and each fingerprint must be
// the chain of that path.
type mirror struct {
	paths map[blockstore.BlockID]mkey
	byFP  map[kvcache.Fingerprint]mkey
	got   model
	bad   string // the first inconsistency seen
}

func newMirror() *mirror {
	return &mirror{paths: map[blockstore.BlockID]mkey{}, byFP: map[kvcache.Fingerprint]mkey{}, got: model{}}
}

func (m *mirror) Stored(ns string, parent kvcache.Fingerprint, tokens []int32, blocks []blockstore.BlockID, fps []kvcache.Fingerprint) {
	var path []int32
	if parent != (kvcache.Fingerprint{}) {
		p, ok := m.byFP[parent]
		if !ok || p.ns != ns {
			m.fail("a chain hangs under an unknown block")
			return
		}
		path = slices.Clone(tokensOf(p.prefix))
	}
	if len(fps) != len(blocks) {
		m.fail("a chain's fingerprints do not match its blocks")
		return
	}
	for i, id := range blocks {
		path = append(path, tokens[i*bs:(i+1)*bs]...)
		k := keyOf(ns, path)
		if _, dup := m.paths[id]; dup {
			m.fail("a block is stored twice")
		}
		if fps[i] != kvcache.ChainPrefix(kvcache.NamespaceSalt(ns), path, bs, len(path)/bs) {
			m.fail("a block's fingerprint is not its path's chain")
		}
		m.paths[id], m.got[k], m.byFP[fps[i]] = k, id, k
	}
}

func (m *mirror) Removed(ns string, blocks []blockstore.BlockID, fps []kvcache.Fingerprint) {
	for i, id := range blocks {
		k, ok := m.paths[id]
		if !ok || k.ns != ns {
			m.fail("an unknown block is removed")
			continue
		}
		delete(m.paths, id)
		delete(m.got, k)
		delete(m.byFP, fps[i])
	}
}

func (m *mirror) fail(what string) {
	if m.bad == "" {
		m.bad = what
	}
}

// tokensOf turns a key's prefix back into tokens.
func tokensOf(s string) []int32 {
	out := make([]int32, len(s)/4)
	for i := range out {
		b := s[4*i : 4*i+4]
		out[i] = int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	}
	return out
}
