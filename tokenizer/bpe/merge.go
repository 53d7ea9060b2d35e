package bpe

import "github.com/prefixd/prefixd/internal/minheap"

// work is one Encode call's scratch space, pooled so that encoding
// allocates little beyond its result.
type work struct {
	words      []string
	buf        []byte
	syms       []int32
	start      []int32 // the byte of the word where each merged symbol starts
	next, prev []int32
	heap       minheap.Heap[candidate]
}

// candidate is a possible merge of the symbols at left and right (indices
// into the word's bytes) while they hold lid and rid.
type candidate struct {
	rank, left, right int32
	lid, rid, id      int32
}

func lessCandidate(a, b candidate) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

// dead marks a symbol merged into its left neighbour; no candidate holds
// it, so candidates naming it are recognised as stale.
const dead = -2

// merge applies the merges to syms (one symbol per byte of the word, -1
// for a byte without a token) and returns the merged symbols, with
// w.start[i] the byte where symbol i starts. The lowest-ranked adjacent
// pair merges first, the leftmost among equals, as in llama.cpp and
// Hugging Face tokenizers; a heap of candidates over a linked list of
// symbols makes it O(n log n), so a long pre-token (a page of CJK text is
// one) costs no more than its size.
func (t *Tokenizer) merge(w *work, syms []int32) []int32 {
	n := int32(len(syms))
	w.next, w.prev = grow(w.next, n), grow(w.prev, n)
	next, prev := w.next, w.prev
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	h := &w.heap
	h.Reset()
	h.Less = lessCandidate
	offer := func(l, r int32) {
		if l < 0 || r >= n {
			return
		}
		if m, ok := t.merges[pairKey(syms[l], syms[r])]; ok {
			h.Push(candidate{rank: m.rank, left: l, right: r, lid: syms[l], rid: syms[r], id: m.id})
		}
	}
	for i := int32(0); i+1 < n; i++ {
		offer(i, i+1)
	}
	for h.Len() > 0 {
		c := h.Pop()
		if syms[c.left] != c.lid || syms[c.right] != c.rid || next[c.left] != c.right {
			continue // a side has merged with another neighbour since
		}
		syms[c.left], syms[c.right] = c.id, dead
		next[c.left] = next[c.right]
		if next[c.left] < n {
			prev[next[c.left]] = c.left
		}
		offer(prev[c.left], c.left)
		offer(c.left, next[c.left])
	}
	w.start = w.start[:0]
	out := syms[:0]
	for i := int32(0); i < n; i = next[i] {
		out = append(out, syms[i])
		w.start = append(w.start, i)
	}
	return out
}

// grow returns s with length n, reallocating only when its capacity is
// short.
func grow(s []int32, n int32) []int32 {
	if int(n) <= cap(s) {
		return s[:n]
	}
	return make([]int32, n)
}
