package eviction

import (
	"bytes"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kvcache"
)

// TestSaveAllCoversEveryTier: SaveAll hands over every block of the tree
// and of the host tier once, each with the fingerprint the tree computed,
// its own tokens and the bytes the pool or the host tier holds.
func TestSaveAllCoversEveryTier(t *testing.T) {
	r := newRig(t, 8, true, nil)
	p, q := seqOf(1, 12), seqOf(100, 8)
	_, pb := r.serve("a", p, Use{}, false)
	r.serve("b", q, Use{}, false)
	want := map[kvcache.Fingerprint][]byte{}
	salt := kvcache.NamespaceSalt("a")
	for i, fp := range kvcache.AppendChain(nil, kvcache.Fingerprint{}, salt, p, bs) {
		data := make([]byte, r.st.BlockBytes())
		if err := r.st.ReadBlock(pb[i], data); err != nil {
			t.Fatal(err)
		}
		want[fp] = data
	}
	if err := r.m.Reclaim(8); err != nil { // a's and b's leaves go to the host tier
		t.Fatal(err)
	}
	r.m.tiers[0].Wait()
	r.check()
	got := map[kvcache.Fingerprint]int{}
	saved, err := r.m.SaveAll(func(ns string, fp kvcache.Fingerprint, tokens []int32, b StoredBlock) error {
		got[fp]++
		if ns == "a" {
			i := blockAt(p, tokens)
			if i < 0 || kvcache.ChainPrefix(salt, p, bs, i/bs+1) != fp || !bytes.Equal(b.Data, want[fp]) {
				t.Errorf("block of tokens %v saved with the wrong fingerprint or bytes", tokens)
			}
		}
		return nil
	})
	if err != nil || saved != 5 || len(got) != 5 {
		t.Fatalf("saved %d blocks (%d distinct), err %v; want a's 3 and b's 2", saved, len(got), err)
	}
}

// blockAt returns where block sits in s at a block boundary, or -1.
func blockAt(s, block []int32) int {
	for i := 0; i+bs <= len(s); i += bs {
		if slices.Equal(s[i:i+bs], block) {
			return i
		}
	}
	return -1
}
