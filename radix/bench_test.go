package radix

import (
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
)

// bigTree builds a tree of block size 16 holding at least 100,000 blocks:
// a target 8,192-token prompt, prompts that share a random prefix of it and
// then diverge, and unrelated prompts, so the target's path branches often.
func bigTree(b *testing.B) (*Tree, []int32) {
	tr, err := New(16)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = r.Int32N(32000)
		}
		return out
	}
	next := blockstore.BlockID(0)
	insert := func(p []int32) {
		blocks := make([]blockstore.BlockID, len(p)/16)
		for i := range blocks {
			blocks[i] = next
			next++
		}
		if _, err := tr.Insert("tenant", p, blocks); err != nil {
			b.Fatal(err)
		}
	}
	target := rnd(8192)
	insert(target)
	for i := 0; tr.Total().Blocks < 100_000; i++ {
		if i%2 == 0 {
			shared := r.IntN(512) * 16
			insert(append(append([]int32(nil), target[:shared]...), rnd(8192-shared)...))
		} else {
			insert(rnd(1024))
		}
	}
	return tr, target
}

func BenchmarkMatch8K(b *testing.B) {
	tr, target := bigTree(b)
	dst := make([]blockstore.BlockID, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		got, h := tr.Match("tenant", target, dst[:0])
		if len(got) != 512 {
			b.Fatalf("matched %d blocks", len(got))
		}
		tr.Release(h)
	}
	reportShape(b, tr, target)
}

// BenchmarkInsert2K inserts 2,048-token prompts whose first 1,024 tokens
// (64 blocks) are cached and whose last 1,024 are new to the tree: each
// Insert walks the shared path and hangs one new 64-block leaf off it. Every
// 256 inserts the timer stops while the new leaves are removed, so the tree
// stays at its size.
func BenchmarkInsert2K(b *testing.B) {
	tr, target := bigTree(b)
	const batch = 256
	prompts := make([][]int32, batch)
	for i := range prompts {
		p := append(append([]int32(nil), target[:1024]...), make([]int32, 1024)...)
		for j := 1024; j < 2048; j++ {
			p[j] = int32(40000 + i*2048 + j)
		}
		prompts[i] = p
	}
	blocks := make([]blockstore.BlockID, 128)
	for i := range blocks {
		blocks[i] = blockstore.BlockID(1_000_000 + i)
	}
	var freed []blockstore.BlockID
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if n, err := tr.Insert("tenant", prompts[i], blocks); err != nil || n != 64 {
			b.Fatalf("existing %d: %v", n, err)
		}
		if i++; i == batch {
			b.StopTimer()
			i = 0
			freed = removeTails(b, tr, prompts, freed)
			b.StartTimer()
		}
	}
	removeTails(b, tr, prompts[:i], freed)
}

// removeTails removes the leaves that hold the prompts' last blocks.
func removeTails(b *testing.B, tr *Tree, prompts [][]int32, freed []blockstore.BlockID) []blockstore.BlockID {
	for _, p := range prompts {
		_, h := tr.Match("tenant", p, nil)
		leaf := h.Node()
		tr.Release(h)
		var err error
		if freed, err = tr.RemoveLeaf(leaf, freed[:0]); err != nil || len(freed) != 64 {
			b.Fatalf("removed %d blocks: %v", len(freed), err)
		}
	}
	return freed
}

// BenchmarkInsertCached2K re-inserts a fully cached 2,048-token prompt, as
// the engine does when a sequence's blocks fill along a cached path.
func BenchmarkInsertCached2K(b *testing.B) {
	tr, target := bigTree(b)
	blocks := make([]blockstore.BlockID, 128)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := tr.Insert("tenant", target[:2048], blocks); err != nil || n != 128 {
			b.Fatalf("existing %d: %v", n, err)
		}
	}
}

// BenchmarkMatch8KFewBranches is the same lookup in a tree of the same size
// shaped like typical serving traffic: many prompts share one of a few
// system prompts (the first 1-4 blocks of the target) and diverge after it.
func BenchmarkMatch8KFewBranches(b *testing.B) {
	tr, err := New(16)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 10))
	next := blockstore.BlockID(0)
	insert := func(p []int32) {
		blocks := make([]blockstore.BlockID, len(p)/16)
		for i := range blocks {
			blocks[i] = next
			next++
		}
		if _, err := tr.Insert("tenant", p, blocks); err != nil {
			b.Fatal(err)
		}
	}
	target := make([]int32, 8192)
	for i := range target {
		target[i] = r.Int32N(32000)
	}
	insert(target)
	for tr.Total().Blocks < 100_000 {
		p := append([]int32(nil), target[:16*(1+r.IntN(4))]...)
		for len(p) < 2048 {
			p = append(p, r.Int32N(32000))
		}
		insert(p)
	}
	dst := make([]blockstore.BlockID, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		got, h := tr.Match("tenant", target, dst[:0])
		if len(got) != 512 {
			b.Fatalf("matched %d blocks", len(got))
		}
		tr.Release(h)
	}
	reportShape(b, tr, target)
}

// reportShape reports the tree's size and how many nodes the target's
// path crosses, the figure a lookup's cost follows.
func reportShape(b *testing.B, tr *Tree, target []int32) {
	_, h := tr.Match("tenant", target, nil)
	nodes := 0
	for n := h.Node(); !n.IsRoot(); n = n.Parent() {
		nodes++
	}
	tr.Release(h)
	b.ReportMetric(float64(tr.Total().Blocks), "tree-blocks")
	b.ReportMetric(float64(nodes), "path-nodes")
}
