package radix

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
)

const bs = 4

func newTree(t testing.TB) *Tree {
	t.Helper()
	tr, err := New(bs)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func check(t testing.TB, tr *Tree) {
	t.Helper()
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

// ids returns n block IDs starting at first.
func ids(first, n int) []blockstore.BlockID {
	out := make([]blockstore.BlockID, n)
	for i := range out {
		out[i] = blockstore.BlockID(first + i)
	}
	return out
}

func toks(vals ...int32) []int32 { return vals }

func seq(start int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = start + int32(i)
	}
	return out
}

func TestNewRejectsBadBlockSize(t *testing.T) {
	if _, err := New(0); err == nil {
		t.Fatal("block size 0 accepted")
	}
}

func TestMatch(t *testing.T) {
	base := seq(1, 12) // 3 blocks
	for _, tc := range []struct {
		name   string
		query  []int32
		blocks []blockstore.BlockID
	}{
		{"empty prompt", nil, nil},
		{"shorter than a block", base[:3], nil},
		{"exactly one block", base[:4], ids(100, 1)},
		{"block and a half", base[:6], ids(100, 1)},
		{"exact multiple", base, ids(100, 3)},
		{"longer than cached", append(slices.Clone(base), 50, 51, 52, 53, 54), ids(100, 3)},
		{"diverges in block 0", toks(1, 2, 9, 4, 5, 6, 7, 8), nil},
		{"diverges inside block 1", toks(1, 2, 3, 4, 5, 6, 99, 8), ids(100, 1)},
		{"diverges at block 2", append(slices.Clone(base[:8]), 0, 0, 0, 0), ids(100, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			if n, err := tr.Insert("a", base, ids(100, 3)); err != nil || n != 0 {
				t.Fatalf("Insert = %d, %v", n, err)
			}
			got, h := tr.Match("a", tc.query, nil)
			if !slices.Equal(got, tc.blocks) || h.Tokens() != len(tc.blocks)*bs {
				t.Fatalf("Match = %v (handle %d tokens), want %v", got, h.Tokens(), tc.blocks)
			}
			check(t, tr)
			tr.Release(h)
			check(t, tr)
			// The split a partial match made keeps the full path intact.
			if full, h := tr.Match("a", base, nil); !slices.Equal(full, ids(100, 3)) {
				t.Fatalf("after a split, full match = %v", full)
			} else {
				tr.Release(h)
			}
			if s := tr.Stats("a"); s.Blocks != 3 || s.Tokens != 12 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestInsertReportsExisting(t *testing.T) {
	tr := newTree(t)
	a := seq(1, 16)
	if n, _ := tr.Insert("a", a[:8], ids(0, 2)); n != 0 {
		t.Fatalf("first insert existing = %d", n)
	}
	if n, _ := tr.Insert("a", a[:8], ids(50, 2)); n != 2 {
		t.Fatalf("re-insert existing = %d, want 2", n)
	}
	if n, _ := tr.Insert("a", a, ids(60, 4)); n != 2 {
		t.Fatalf("extension existing = %d, want 2", n)
	}
	got, h := tr.Match("a", a, nil)
	tr.Release(h)
	// The tree kept its own first two blocks and took the caller's last two.
	if want := []blockstore.BlockID{0, 1, 62, 63}; !slices.Equal(got, want) {
		t.Fatalf("blocks %v, want %v", got, want)
	}
	// Divergence mid-block: shares the first 5 tokens but not block 1.
	b := append(slices.Clone(a[:5]), 70, 71, 72)
	if n, _ := tr.Insert("a", b, ids(80, 2)); n != 1 {
		t.Fatalf("divergent insert existing = %d, want 1", n)
	}
	got, h = tr.Match("a", b, nil)
	tr.Release(h)
	if want := []blockstore.BlockID{0, 81}; !slices.Equal(got, want) {
		t.Fatalf("divergent blocks %v, want %v", got, want)
	}
	// Two children of one node that share their first token.
	c := append(slices.Clone(a[:4]), a[4], 99, 98, 97)
	tr.Insert("a", c, ids(90, 2))
	check(t, tr)
	if s := tr.Stats("a"); s.Blocks != 6 {
		t.Fatalf("stats %+v, want 6 blocks", s)
	}
	if _, err := tr.Insert("a", a[:7], ids(0, 2)); !errors.Is(err, ErrLength) {
		t.Fatal("Insert of a partial block accepted")
	}
	if n, err := tr.Insert("a", nil, nil); n != 0 || err != nil {
		t.Fatalf("empty insert: %d %v", n, err)
	}
}

func TestNamespacesAreSeparate(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 8)
	tr.Insert("a", p, ids(0, 2))
	if got, _ := tr.Match("b", p, nil); len(got) != 0 {
		t.Fatalf("namespace b saw a's blocks %v", got)
	}
	tr.Insert("b", p, ids(10, 2))
	ga, ha := tr.Match("a", p, nil)
	gb, hb := tr.Match("b", p, nil)
	tr.Release(ha)
	tr.Release(hb)
	if !slices.Equal(ga, ids(0, 2)) || !slices.Equal(gb, ids(10, 2)) {
		t.Fatalf("a %v b %v", ga, gb)
	}
	if ns := tr.Namespaces(); !slices.Equal(ns, []string{"a", "b"}) {
		t.Fatalf("Namespaces = %v", ns)
	}
	check(t, tr)
}

func TestPinsSurviveSplits(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 16)
	tr.Insert("a", p, ids(0, 4))
	_, whole := tr.Match("a", p, nil)
	_, half := tr.Match("a", p[:8], nil) // splits the pinned edge
	check(t, tr)
	n := whole.Node()
	// The upper node inherited the whole-prompt handle's pin and counts the
	// half handle's too; both handles still name the blocks they matched.
	if n.Pins() != 1 || n.Parent().Pins() != 2 || half.Node() != n.Parent() {
		t.Fatalf("pins lower %d upper %d, want 1 and 2", n.Pins(), n.Parent().Pins())
	}
	if whole.Blocks() != 4 || half.Blocks() != 2 || whole.Tokens() != 16 || half.Tokens() != 8 {
		t.Fatalf("handles pin %d and %d blocks, want 4 and 2", whole.Blocks(), half.Blocks())
	}
	if _, err := tr.RemoveLeaf(n, nil); !errors.Is(err, ErrPinned) {
		t.Fatalf("RemoveLeaf of a pinned leaf: %v", err)
	}
	tr.Release(whole)
	tr.Release(half)
	check(t, tr)
	if n.Pins() != 0 || n.Parent().Pins() != 0 {
		t.Fatal("pins left after releasing both handles")
	}
	tr.Release(Handle{}) // no-op
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("double Release did not panic")
			}
		}()
		tr.Release(whole)
	}()
}

func TestRemoveLeafCascade(t *testing.T) {
	tr := newTree(t)
	sys := seq(1, 8)
	q1 := append(slices.Clone(sys), 20, 21, 22, 23)
	q2 := append(slices.Clone(sys), 30, 31, 32, 33)
	tr.Insert("a", q1, ids(0, 3))
	tr.Insert("a", q2, []blockstore.BlockID{0, 1, 5})
	var leaves []*Node
	tr.Leaves(func(n *Node) bool { leaves = append(leaves, n); return true })
	if len(leaves) != 2 {
		t.Fatalf("%d leaves, want 2", len(leaves))
	}
	parent := leaves[0].Parent()
	if _, err := tr.RemoveLeaf(parent, nil); !errors.Is(err, ErrNotLeaf) {
		t.Fatalf("RemoveLeaf of an inner node: %v", err)
	}
	var freed []blockstore.BlockID
	for _, l := range leaves {
		var err error
		if freed, err = tr.RemoveLeaf(l, freed); err != nil {
			t.Fatal(err)
		}
		check(t, tr)
	}
	if !parent.IsLeaf() {
		t.Fatal("parent did not become a leaf")
	}
	if freed, _ = tr.RemoveLeaf(parent, freed); !slices.Equal(sorted(freed), []blockstore.BlockID{0, 1, 2, 5}) {
		t.Fatalf("freed %v", freed)
	}
	if _, err := tr.RemoveLeaf(parent, nil); !errors.Is(err, ErrNotLeaf) {
		t.Fatalf("second removal: %v", err)
	}
	if tr.Total() != (Stats{}) || len(tr.Namespaces()) != 0 {
		t.Fatalf("tree not empty: %+v %v", tr.Total(), tr.Namespaces())
	}
	check(t, tr)
}

func sorted(s []blockstore.BlockID) []blockstore.BlockID {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestPathAndWalk(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 12)
	tr.Insert("a", p, ids(0, 3))
	_, h := tr.Match("a", p[:8], nil) // split after 2 blocks
	tr.Release(h)
	var paths [][]int32
	tr.Walk(func(n *Node) bool { paths = append(paths, n.Path(nil)); return true })
	if len(paths) != 2 || !slices.Equal(paths[0], p[:8]) || !slices.Equal(paths[1], p) {
		t.Fatalf("walk paths %v", paths)
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 64)
	tr.Insert("a", p, ids(0, 16))
	dst := make([]blockstore.BlockID, 0, 16)
	if n := testing.AllocsPerRun(100, func() {
		_, h := tr.Match("a", p, dst[:0])
		tr.Release(h)
	}); n != 0 {
		t.Fatalf("Match allocates %.1f times", n)
	}
}

func TestExtendFollowsAHandle(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 24) // 6 blocks
	tr.Insert("a", p[:8], ids(0, 2))
	_, h := tr.Match("a", p, nil)
	if h.Tokens() != 8 {
		t.Fatalf("matched %d tokens", h.Tokens())
	}
	// A sequence offers its blocks as they fill: 3, then 6.
	n, h, err := tr.Extend("a", h, p[:12], ids(0, 3))
	if err != nil || n != 2 || h.Tokens() != 12 {
		t.Fatalf("Extend to 12 = %d, %d tokens, %v", n, h.Tokens(), err)
	}
	n, h, err = tr.Extend("a", h, p, ids(0, 6))
	if err != nil || n != 3 || h.Tokens() != 24 {
		t.Fatalf("Extend to 24 = %d, %d tokens, %v", n, h.Tokens(), err)
	}
	check(t, tr)
	if _, err := tr.RemoveLeaf(h.Node(), nil); !errors.Is(err, ErrPinned) {
		t.Fatalf("the extended tail is not pinned: %v", err)
	}
	got, h2 := tr.Match("a", p, nil)
	tr.Release(h2)
	if !slices.Equal(got, ids(0, 6)) {
		t.Fatalf("blocks %v", got)
	}
	if _, _, err := tr.Extend("a", h, p[:8], ids(0, 2)); !errors.Is(err, ErrHandle) {
		t.Fatalf("Extend to fewer tokens than the handle pins: %v", err)
	}
	if _, _, err := tr.Extend("b", h, p, ids(0, 6)); !errors.Is(err, ErrHandle) {
		t.Fatalf("Extend of a handle into another namespace: %v", err)
	}
	tr.Release(h)
	// From the zero handle Extend is Insert in a new namespace.
	if n, h, err := tr.Extend("b", Handle{}, p[:4], ids(9, 1)); err != nil || n != 0 || h.Tokens() != 4 {
		t.Fatalf("Extend from zero handle = %d, %v", n, err)
	} else {
		tr.Release(h)
	}
	check(t, tr)
}

// pinsOnPath returns the pins of every node from n up to its root's child.
func pinsOnPath(n *Node) []int {
	var out []int
	for ; n != nil && !n.IsRoot(); n = n.Parent() {
		out = append(out, n.Pins())
	}
	return out
}

func TestHandlePinsItsWholePath(t *testing.T) {
	tr := newTree(t)
	sys := seq(1, 8)
	q1 := append(slices.Clone(sys), 20, 21, 22, 23)
	q2 := append(slices.Clone(sys), 30, 31, 32, 33)
	tr.Insert("a", q1, ids(0, 3))
	tr.Insert("a", q2, ids(10, 3))
	_, h1 := tr.Match("a", q1, nil)
	_, h2 := tr.Match("a", q2, nil)
	check(t, tr)
	if got := pinsOnPath(h1.Node()); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("pins leaf to root %v, want [1 2]", got)
	}
	tr.Release(h1)
	if got := pinsOnPath(h2.Node()); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("after one release pins %v, want [1 1]", got)
	}
	tr.Release(h2)
	if got := pinsOnPath(h2.Node()); !slices.Equal(got, []int{0, 0}) {
		t.Fatalf("after both releases pins %v", got)
	}
	check(t, tr)
}

func TestRemoveNamespace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pin      []int32 // matched in "a" and held across the flush
		freed    []blockstore.BlockID
		leftInA  Stats
		leftPath []int32
	}{
		{"nothing pinned", nil, []blockstore.BlockID{0, 1, 2, 10}, Stats{}, nil},
		{"a pinned branch stays", toks(1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23),
			[]blockstore.BlockID{10}, Stats{Nodes: 2, Blocks: 3, Tokens: 12}, toks(1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23)},
		{"a pinned prefix splits and stays", toks(1, 2, 3, 4),
			[]blockstore.BlockID{1, 2, 10}, Stats{Nodes: 1, Blocks: 1, Tokens: 4}, toks(1, 2, 3, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			tr.Insert("a", toks(1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23), ids(0, 3))
			tr.Insert("a", toks(1, 2, 3, 4, 5, 6, 7, 8, 30, 31, 32, 33), []blockstore.BlockID{0, 1, 10})
			tr.Insert("b", toks(1, 2, 3, 4), ids(50, 1))
			_, h := tr.Match("a", tc.pin, nil)
			freed := tr.RemoveNamespace("a", nil)
			check(t, tr)
			if !slices.Equal(sorted(freed), tc.freed) {
				t.Fatalf("freed %v, want %v", sorted(freed), tc.freed)
			}
			if s := tr.Stats("a"); s != tc.leftInA {
				t.Fatalf("left in a: %+v, want %+v", s, tc.leftInA)
			}
			var paths [][]int32
			tr.NamespaceLeaves("a", func(n *Node) bool { paths = append(paths, n.Path(nil)); return true })
			if tc.leftPath != nil && (len(paths) != 1 || !slices.Equal(paths[0], tc.leftPath)) {
				t.Fatalf("leaves left in a %v, want %v", paths, tc.leftPath)
			}
			if got, hb := tr.Match("b", toks(1, 2, 3, 4), nil); !slices.Equal(got, ids(50, 1)) {
				t.Fatalf("namespace b lost its blocks: %v", got)
			} else {
				tr.Release(hb)
			}
			tr.Release(h)
			freed = tr.RemoveNamespace("a", freed)
			check(t, tr)
			if !slices.Equal(sorted(freed), []blockstore.BlockID{0, 1, 2, 10}) {
				t.Fatalf("after release, freed %v", sorted(freed))
			}
			if ns := tr.Namespaces(); !slices.Equal(ns, []string{"b"}) {
				t.Fatalf("namespaces %v, want [b]", ns)
			}
			if tr.Total() != (Stats{Nodes: 1, Blocks: 1, Tokens: 4}) {
				t.Fatalf("total %+v", tr.Total())
			}
		})
	}
}

func TestLeavesPerNamespace(t *testing.T) {
	tr := newTree(t)
	tr.Insert("a", seq(1, 8), ids(0, 2))
	tr.Insert("b", seq(1, 8), ids(10, 2))
	tr.Insert("a", seq(100, 4), ids(20, 1))
	var all, onlyB []blockstore.BlockID
	tr.Leaves(func(n *Node) bool { all = append(all, n.Blocks()...); return true })
	tr.NamespaceLeaves("b", func(n *Node) bool { onlyB = append(onlyB, n.Blocks()...); return true })
	if want := []blockstore.BlockID{0, 1, 20, 10, 11}; !slices.Equal(all, want) {
		t.Fatalf("all leaves' blocks %v, want %v", all, want)
	}
	if !slices.Equal(onlyB, ids(10, 2)) {
		t.Fatalf("b's leaves' blocks %v", onlyB)
	}
	stops := 0
	tr.Leaves(func(*Node) bool { stops++; return false })
	if stops != 1 {
		t.Fatalf("Leaves went on after fn returned false: %d calls", stops)
	}
}

// TestCheckCatchesCorruption breaks one invariant at a time in a small
// tree and expects Check to notice.
func TestCheckCatchesCorruption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(tr *Tree, leaf *Node)
	}{
		{"edge not whole blocks", func(_ *Tree, n *Node) { n.tokens = n.tokens[:len(n.tokens)-1] }},
		{"wrong depth", func(_ *Tree, n *Node) { n.depth++ }},
		{"wrong parent", func(_ *Tree, n *Node) { n.parent = &n.sp.root }},
		{"children unsorted", func(_ *Tree, n *Node) {
			p := n.parent
			p.children[0], p.children[1] = p.children[1], p.children[0]
		}},
		{"stale first token", func(_ *Tree, n *Node) { n.parent.firsts[0]++ }},
		{"child pinned more than parent", func(_ *Tree, n *Node) { n.pins = 1 }},
		{"negative pins", func(_ *Tree, n *Node) { n.pins, n.parent.pins = -1, -1 }},
		{"leaf off the list", func(_ *Tree, n *Node) { unlist(n) }},
		{"inner node on the list", func(_ *Tree, n *Node) { list(n.parent) }},
		{"node counter", func(tr *Tree, n *Node) { n.sp.stats.Nodes++ }},
		{"total counter", func(tr *Tree, _ *Node) { tr.total.Blocks++ }},
		{"node in another namespace", func(tr *Tree, n *Node) { n.sp = tr.spaces["b"] }},
		{"removed node linked", func(_ *Tree, n *Node) { n.removed = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(t)
			tr.Insert("a", toks(1, 2, 3, 4, 5, 6, 7, 8), ids(0, 2))
			tr.Insert("a", toks(1, 2, 3, 4, 9, 9, 9, 9), ids(2, 2))
			tr.Insert("b", toks(1, 2, 3, 4), ids(9, 1))
			check(t, tr)
			var leaf *Node
			tr.NamespaceLeaves("a", func(n *Node) bool { leaf = n; return false })
			tc.corrupt(tr, leaf)
			if err := tr.Check(); err == nil {
				t.Fatal("Check passed a broken tree")
			}
		})
	}
}

// TestReserveLetsALeafGrowInPlace: after Reserve, the Extends that grow a
// sequence's own leaf block by block allocate nothing, and a split of the
// reserved leaf keeps both halves right.
func TestReserveLetsALeafGrowInPlace(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 64) // 16 blocks
	blocks := ids(0, 16)
	_, h, err := tr.Extend("a", Handle{}, p[:4], blocks[:1])
	if err != nil {
		t.Fatal(err)
	}
	tr.Reserve(h, 124) // room for 128 tokens; it stops at 64
	// As testing.AllocsPerRun does (which would round 7 allocations in 14
	// calls down to 0), count at GOMAXPROCS 1, so other goroutines'
	// allocations do not run during the count.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for full := 2; full <= 16; full++ {
		if _, h, err = tr.Extend("a", h, p[:full*4], blocks[:full]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n != 0 {
		t.Fatalf("growing a reserved leaf by 15 blocks allocates %d times", n)
	}
	check(t, tr)
	reserved := cap(h.Node().Tokens())
	tr.Trim(h)
	if c := cap(h.Node().Tokens()); c >= reserved || c < 64 {
		t.Fatalf("Trim left a capacity of %d for 64 tokens (reserved %d)", c, reserved)
	}
	got, h2 := tr.Match("a", p[:20], nil) // splits the reserved edge
	tr.Release(h2)
	tr.Release(h)
	check(t, tr)
	if !slices.Equal(got, blocks[:5]) {
		t.Fatalf("after a split: blocks %v", got)
	}
	got, h2 = tr.Match("a", p, nil)
	tr.Release(h2)
	if !slices.Equal(got, blocks) {
		t.Fatalf("after a split: blocks %v", got)
	}
	// Reserve leaves alone a node it does not own alone.
	_, h2 = tr.Match("a", p[:20], nil)
	capBefore := cap(h2.Node().Tokens())
	tr.Reserve(h2, 400)
	if cap(h2.Node().Tokens()) != capBefore {
		t.Fatal("Reserve grew an inner node")
	}
	tr.Release(h2)
}

// TestSplitAt: SplitAt makes a node of a handle's path end at a block
// boundary inside an edge, once, and ignores depths that are not block
// boundaries, already end a node, or lie outside the path; the handle
// still pins the whole path.
func TestSplitAt(t *testing.T) {
	tr := newTree(t)
	p := seq(1, 16)
	if _, err := tr.Insert("a", p, ids(1, 4)); err != nil {
		t.Fatal(err)
	}
	_, h := tr.Match("a", p, nil)
	for _, c := range []struct {
		depth int
		split bool
	}{{8, true}, {8, false}, {6, false}, {0, false}, {16, false}, {20, false}, {4, true}, {12, true}} {
		up := tr.SplitAt(h, c.depth)
		if (up != nil) != c.split || (up != nil && up.Depth() != c.depth) {
			t.Fatalf("SplitAt(%d) = %v, want a split: %v", c.depth, up, c.split)
		}
		check(t, tr)
	}
	depths := []int{}
	for n := h.Node(); !n.IsRoot(); n = n.Parent() {
		depths = append(depths, n.Depth())
		if n.Pins() != 1 {
			t.Fatalf("node at %d has %d pins, want the handle's 1", n.Depth(), n.Pins())
		}
	}
	if fmt.Sprint(depths) != "[16 12 8 4]" {
		t.Fatalf("path nodes end at %v", depths)
	}
	tr.Release(h)
	check(t, tr)
}
