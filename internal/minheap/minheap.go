// Package minheap is a small binary min-heap over a slice, generic in its
// element type, for the schedulers and cache sweepers that must not box
// elements the way container/heap does.
package minheap

// Heap is a binary min-heap ordered by Less. The zero value with Less set is
// an empty heap. It is not safe for concurrent use.
type Heap[T any] struct {
	Less  func(a, b T) bool
	items []T
}

// Len is the number of elements.
func (h *Heap[T]) Len() int { return len(h.items) }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.Less(h.items[i], h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

// Peek returns the least element. REQUIRES: Len() > 0.
func (h *Heap[T]) Peek() T { return h.items[0] }

// Pop removes and returns the least element. REQUIRES: Len() > 0.
func (h *Heap[T]) Pop() T {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	var zero T
	h.items[last] = zero // let the GC have what the element points to
	h.items = h.items[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.Less(h.items[l], h.items[m]) {
			m = l
		}
		if r < last && h.Less(h.items[r], h.items[m]) {
			m = r
		}
		if m == i {
			return top
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// Reset empties the heap, keeping its capacity.
func (h *Heap[T]) Reset() {
	clear(h.items)
	h.items = h.items[:0]
}
