package radix

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
)

// mkey names a cached prefix of whole blocks in a namespace.
type mkey struct {
	ns     string
	prefix string // the tokens' bytes
}

func keyOf(ns string, prefix []int32) mkey { return mkey{ns, string(asBytes(prefix))} }

// model is the naive reference: every cached prefix of k whole blocks maps
// to the block holding its k-th block.
type model map[mkey]blockstore.BlockID

func (m model) match(ns string, tokens []int32) []blockstore.BlockID {
	var out []blockstore.BlockID
	for k := 1; k*bs <= len(tokens); k++ {
		id, ok := m[keyOf(ns, tokens[:k*bs])]
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
		m[keyOf(ns, tokens[:k*bs])] = blocks[k-1]
	}
	return existing
}

// flush drops every prefix of ns that no live handle's path contains.
func (m model) flush(ns string, handles []pinned) {
	keep := map[mkey]bool{}
	for _, h := range handles {
		for k := 1; h.ns == ns && k*bs <= len(h.tokens); k++ {
			keep[keyOf(ns, h.tokens[:k*bs])] = true
		}
	}
	maps.DeleteFunc(m, func(k mkey, _ blockstore.BlockID) bool { return k.ns == ns && !keep[k] })
}

// contents lists what the tree caches in the model's terms.
func contents(tr *Tree) model {
	out := model{}
	tr.Walk(func(n *Node) bool {
		path := n.Path(nil)
		first := len(path)/bs - len(n.Blocks())
		for i, id := range n.Blocks() {
			out[keyOf(n.Namespace(), path[:(first+i+1)*bs])] = id
		}
		return true
	})
	return out
}

type pinned struct {
	ns     string
	tokens []int32 // the matched whole blocks
	h      Handle
}

// decoder turns fuzz bytes into operands; past the end it yields zeros.
type decoder struct {
	data    []byte
	prompts [][]int32 // earlier prompts, for new ones to share prefixes with
}

func (d *decoder) next() int {
	if len(d.data) == 0 {
		return 0
	}
	b := d.data[0]
	d.data = d.data[1:]
	return int(b)
}

// prompt decodes up to 23 tokens over the vocabulary {0, 1, 2}: a prefix
// of an earlier prompt (cut anywhere, so prompts diverge inside blocks as
// well as at their edges) followed by a pattern drawn from one byte.
func (d *decoder) prompt() []int32 {
	n := d.next() % (6 * bs)
	var p []int32
	if src := d.next(); len(d.prompts) > 0 {
		from := d.prompts[src%len(d.prompts)]
		p = slices.Clone(from[:min(d.next()%(n+1), len(from))])
	}
	pat := d.next()
	for j := len(p); j < n; j++ {
		p = append(p, int32((pat>>(j%7))%3))
	}
	if len(d.prompts) < 16 {
		d.prompts = append(d.prompts, p)
	}
	return p
}

// maxSteps bounds the operations one input decodes into: each step checks
// the whole tree, so longer inputs would cost quadratic time and stall the
// fuzzer without finding new shapes.
const maxSteps = 300

// runOps decodes ops into a sequence of Insert, Match (keeping the pin),
// Release, Extend, RemoveLeaf and RemoveNamespace over three namespaces,
// and after each step compares the tree with the naive model (contents,
// results, stats, every node's pins), runs Check, and compares the model
// with what an Observer rebuilt from the tree's reports.
func runOps(t testing.TB, ops []byte) {
	tr := newTree(t)
	obs := newMirror()
	tr.SetObserver(obs)
	ref := model{}
	var handles []pinned
	next := blockstore.BlockID(0)
	newBlocks := func(n int) []blockstore.BlockID {
		out := make([]blockstore.BlockID, n)
		for j := range out {
			out[j] = next
			next++
		}
		return out
	}
	nss := []string{"a", "b", "c"}
	d := &decoder{data: ops}
	for step := 0; len(d.data) > 0 && step < maxSteps; step++ {
		op := d.next() % 8
		ns := nss[d.next()%len(nss)]
		p := d.prompt()
		whole := p[:len(p)/bs*bs]
		arg := d.next()
		switch op {
		case 0, 1:
			blocks := newBlocks(len(whole) / bs)
			got, err := tr.Insert(ns, whole, blocks)
			if want := ref.insert(ns, whole, blocks); err != nil || got != want {
				t.Fatalf("step %d: Insert(%s, %v) = %d, %v; model %d", step, ns, whole, got, err, want)
			}
		case 2, 3:
			got, h := tr.Match(ns, p, nil)
			if want := ref.match(ns, p); !slices.Equal(got, want) {
				t.Fatalf("step %d: Match(%s, %v) = %v, model %v", step, ns, p, got, want)
			}
			if h.Tokens() != len(got)*bs || h.Blocks() != len(got) || (h == Handle{}) != (len(got) == 0) {
				t.Fatalf("step %d: handle pins %d tokens, matched %d blocks", step, h.Tokens(), len(got))
			}
			handles = append(handles, pinned{ns, p[:len(got)*bs], h})
		case 4:
			if len(handles) > 0 {
				j := arg % len(handles)
				tr.Release(handles[j].h)
				handles = slices.Delete(handles, j, j+1)
			}
		case 5: // a running sequence extends its pinned path
			if len(handles) == 0 {
				break
			}
			j := arg % len(handles)
			hp := handles[j]
			ext := append(slices.Clone(hp.tokens), whole...)
			blocks := newBlocks(len(ext) / bs)
			want := ref.insert(hp.ns, ext, blocks)
			got, nh, err := tr.Extend(hp.ns, hp.h, ext, blocks)
			if err != nil || got != want || nh.Tokens() != len(ext) {
				t.Fatalf("step %d: Extend = %d (%d tokens), %v; model %d", step, got, nh.Tokens(), err, want)
			}
			handles[j] = pinned{hp.ns, ext, nh}
		case 6: // remove a leaf, pinned or not
			var leaves []*Node
			tr.Leaves(func(n *Node) bool { leaves = append(leaves, n); return true })
			if len(leaves) == 0 {
				break
			}
			n := leaves[arg%len(leaves)]
			path := n.Path(nil)
			freed, err := tr.RemoveLeaf(n, nil)
			if n.Pins() > 0 {
				if err == nil {
					t.Fatalf("step %d: removed a pinned leaf", step)
				}
				break
			}
			if err != nil || !slices.Equal(freed, n.Blocks()) {
				t.Fatalf("step %d: RemoveLeaf freed %v, %v", step, freed, err)
			}
			for k := len(path)/bs - len(n.Blocks()) + 1; k <= len(path)/bs; k++ {
				delete(ref, keyOf(n.Namespace(), path[:k*bs]))
			}
		case 7:
			before := maps.Clone(ref)
			freed := tr.RemoveNamespace(ns, nil)
			ref.flush(ns, handles)
			var want []blockstore.BlockID
			for k, id := range before {
				if _, ok := ref[k]; !ok {
					want = append(want, id)
				}
			}
			if slices.Sort(want); !slices.Equal(sorted(freed), want) {
				t.Fatalf("step %d: RemoveNamespace(%s) freed %v, model %v", step, ns, sorted(freed), want)
			}
		}
		compare(t, step, tr, ref, handles)
		if obs.bad != "" || !maps.Equal(obs.got, ref) {
			t.Fatalf("step %d: the observer's mirror holds %d prefixes, the model %d (%s)", step, len(obs.got), len(ref), obs.bad)
		}
	}
	for _, h := range handles {
		tr.Release(h.h)
	}
	if err := tr.Check(); err != nil {
		t.Fatalf("after releasing every handle: %v", err)
	}
	tr.Walk(func(n *Node) bool {
		if n.Pins() != 0 {
			t.Fatalf("node at depth %d keeps %d pins after every release", n.Depth(), n.Pins())
		}
		return true
	})
}

// compare checks the tree against the model and the live handles.
func compare(t testing.TB, step int, tr *Tree, ref model, handles []pinned) {
	t.Helper()
	if err := tr.Check(); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if got := contents(tr); !maps.Equal(got, ref) {
		t.Fatalf("step %d: tree holds %d prefixes, model %d, or they differ", step, len(got), len(ref))
	}
	perNS := map[string]int{}
	for k := range ref {
		perNS[k.ns]++
	}
	for _, ns := range []string{"a", "b", "c"} {
		if got := tr.Stats(ns).Blocks; got != perNS[ns] {
			t.Fatalf("step %d: Stats(%s) has %d blocks, model %d", step, ns, got, perNS[ns])
		}
	}
	want := map[*Node]int{}
	for _, h := range handles {
		if n := h.h.Node(); n != nil && (n.Removed() || n.Depth() != len(h.tokens) || n.Namespace() != h.ns) {
			t.Fatalf("step %d: a pinned node was removed or changed", step)
		}
		for n := h.h.Node(); n != nil && !n.IsRoot(); n = n.Parent() {
			want[n]++
		}
	}
	tr.Walk(func(n *Node) bool {
		if n.Pins() != want[n] {
			t.Fatalf("step %d: node at depth %d has %d pins, %d handles pass through it", step, n.Depth(), n.Pins(), want[n])
		}
		return true
	})
}

// FuzzTree checks random operation sequences against the naive model; see
// runOps for the decoding.
func FuzzTree(f *testing.F) {
	f.Add([]byte{0, 0, 12, 0, 0, 9, 0, 2, 0, 8, 0, 0, 0, 9})
	f.Add([]byte{0, 1, 16, 0, 0, 5, 0, 0, 1, 12, 0, 16, 3, 0, 2, 1, 16, 0, 16, 5, 0, 6, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 20, 0, 0, 3, 0, 0, 0, 20, 0, 20, 3, 0, 2, 0, 8, 0, 0, 3, 0, 7, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0, 2, 200, 0, 0, 100, 1, 2, 250, 0, 200, 9, 3, 5, 2, 9, 1, 0, 6, 6, 1, 3, 0, 0, 2, 7, 2})
	f.Fuzz(func(t *testing.T, ops []byte) { runOps(t, ops) })
}

// TestTreeAgainstModel is the property test: seeded random operation
// sequences, long enough to grow trees of dozens of nodes.
func TestTreeAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	runs := 300
	if testing.Short() {
		runs = 30
	}
	ops := make([]byte, 400)
	for range runs {
		for i := range ops {
			ops[i] = byte(r.Uint32())
		}
		runOps(t, ops)
	}
}
