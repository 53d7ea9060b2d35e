package radix

import (
	"fmt"
	"slices"
	"testing"

	"prefixd/blockstore"
)

// model is the naive reference: every cached prefix of k whole blocks,
// keyed by namespace and tokens, maps to the block holding its k-th block.
type model map[string]blockstore.BlockID

func key(ns string, prefix []int32) string { return fmt.Sprint(ns, prefix) }

func (m model) match(ns string, tokens []int32) []blockstore.BlockID {
	var out []blockstore.BlockID
	for k := 1; k*bs <= len(tokens); k++ {
		id, ok := m[key(ns, tokens[:k*bs])]
		if !ok {
			break
		}
		out = append(out, id)
	}
	return out
}

func (m model) insert(ns string, tokens []int32, blocks []blockstore.BlockID) int {
	existing := len(m.match(ns, tokens))
	for k := existing + 1; k <= len(blocks); k++ {
		m[key(ns, tokens[:k*bs])] = blocks[k-1]
	}
	return existing
}

type pinned struct {
	ns     string
	tokens []int32 // the matched whole blocks
	h      Handle
}

// FuzzTree decodes bytes into operations (insert, match-and-pin, release,
// remove a leaf) over three namespaces and a three-token vocabulary, so
// prefixes collide and diverge mid-block often, and after each step
// compares the tree with the naive model and runs Check.
func FuzzTree(f *testing.F) {
	f.Add([]byte{0, 0, 9, 1, 0, 9, 2, 0, 3, 0})
	f.Add([]byte{0, 1, 12, 0, 1, 7, 1, 1, 12, 3, 0, 0, 4, 0, 2, 1})
	f.Add([]byte{0, 2, 200, 0, 2, 100, 1, 2, 250, 1, 2, 9, 3, 1, 3, 0, 2, 0, 3, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tr := newTree(t)
		ref := model{}
		var handles []pinned
		next := blockstore.BlockID(0)
		nss := []string{"a", "b", "c"}
		for i := 0; i+2 < len(ops); i += 3 {
			ns := nss[int(ops[i+1])%3]
			// A prompt of up to 5 blocks over tokens {0,1,2}, from a seed byte.
			seed := int(ops[i+2])
			p := make([]int32, (seed%6)*bs+seed%3)
			for j := range p {
				p[j] = int32((seed >> (j % 7)) % 3)
			}
			switch ops[i] % 5 {
			case 0: // insert whole blocks
				n := len(p) / bs
				blocks := make([]blockstore.BlockID, n)
				for j := range blocks {
					blocks[j] = next
					next++
				}
				got, err := tr.Insert(ns, p[:n*bs], blocks)
				if err != nil {
					t.Fatal(err)
				}
				if want := ref.insert(ns, p[:n*bs], blocks); got != want {
					t.Fatalf("Insert(%s, %v) existing = %d, model %d", ns, p, got, want)
				}
			case 1: // match and keep the pin
				got, h := tr.Match(ns, p, nil)
				if want := ref.match(ns, p); !slices.Equal(got, want) {
					t.Fatalf("Match(%s, %v) = %v, model %v", ns, p, got, want)
				}
				if h.Tokens() != len(got)*bs {
					t.Fatalf("handle pins %d tokens, matched %d blocks", h.Tokens(), len(got))
				}
				handles = append(handles, pinned{ns, p[:len(got)*bs], h})
			case 2: // release a pin
				if len(handles) > 0 {
					j := seed % len(handles)
					tr.Release(handles[j].h)
					handles = slices.Delete(handles, j, j+1)
				}
			case 4: // a running sequence extends its pinned path
				if len(handles) == 0 {
					continue
				}
				j := seed % len(handles)
				hp := handles[j]
				ext := append(append([]int32(nil), hp.tokens...), p[:len(p)/bs*bs]...)
				blocks := make([]blockstore.BlockID, len(ext)/bs)
				for k := range blocks {
					blocks[k] = next
					next++
				}
				want := ref.insert(hp.ns, ext, blocks)
				got, nh, err := tr.Extend(hp.ns, hp.h, ext, blocks)
				if err != nil || got != want {
					t.Fatalf("Extend = %d, %v; model %d", got, err, want)
				}
				if nh.Tokens() != len(ext) {
					t.Fatalf("Extend handle pins %d tokens, want %d", nh.Tokens(), len(ext))
				}
				handles[j] = pinned{hp.ns, ext, nh}
			case 3: // remove an unpinned leaf (and try a pinned one)
				var leaves []*Node
				tr.Leaves(func(n *Node) bool { leaves = append(leaves, n); return true })
				if len(leaves) == 0 {
					continue
				}
				n := leaves[seed%len(leaves)]
				path := n.Path(nil)
				_, err := tr.RemoveLeaf(n, nil)
				if n.Pins() > 0 {
					if err == nil {
						t.Fatal("removed a pinned leaf")
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				for k := len(path)/bs - len(n.Blocks()) + 1; k <= len(path)/bs; k++ {
					delete(ref, key(n.Namespace(), path[:k*bs]))
				}
			}
			if err := tr.Check(); err != nil {
				t.Fatalf("after op %d: %v", i/3, err)
			}
			for _, h := range handles {
				if n := h.h.Node(); n != nil && (n.Removed() || n.Depth() != len(h.tokens)) {
					t.Fatal("a pinned node was removed or changed length")
				}
				if got := ref.match(h.ns, h.tokens); len(got)*bs != len(h.tokens) {
					t.Fatalf("pinned prefix of %d tokens has only %d cached", len(h.tokens), len(got)*bs)
				}
			}
		}
		// Every namespace agrees with the model in both directions.
		blocks := 0
		for range ref {
			blocks++
		}
		if tr.Total().Blocks != blocks {
			t.Fatalf("tree holds %d blocks, model %d", tr.Total().Blocks, blocks)
		}
	})
}
