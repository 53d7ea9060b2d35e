package radix

import (
	"slices"

	"github.com/prefixd/prefixd/blockstore"
)

// mirror rebuilds the tree's contents from its Observer calls alone, as an
// event subscriber does: each block's path is its parent's plus its own
// tokens.
type mirror struct {
	paths map[blockstore.BlockID]mkey
	got   model
	bad   string // the first inconsistency seen
}

func newMirror() *mirror { return &mirror{paths: map[blockstore.BlockID]mkey{}, got: model{}} }

func (m *mirror) Stored(ns string, parent blockstore.BlockID, tokens []int32, blocks []blockstore.BlockID) {
	var path []int32
	if parent != NoParent {
		p, ok := m.paths[parent]
		if !ok || p.ns != ns {
			m.fail("a chain hangs under an unknown block")
			return
		}
		path = slices.Clone(tokensOf(p.prefix))
	}
	for i, id := range blocks {
		path = append(path, tokens[i*bs:(i+1)*bs]...)
		k := keyOf(ns, path)
		if _, dup := m.paths[id]; dup {
			m.fail("a block is stored twice")
		}
		m.paths[id], m.got[k] = k, id
	}
}

func (m *mirror) Removed(ns string, blocks []blockstore.BlockID) {
	for _, id := range blocks {
		k, ok := m.paths[id]
		if !ok || k.ns != ns {
			m.fail("an unknown block is removed")
			continue
		}
		delete(m.paths, id)
		delete(m.got, k)
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
