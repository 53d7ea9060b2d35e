package minheap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHeapSortsLikeSlicesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 10, 257} {
		h := Heap[int]{Less: func(a, b int) bool { return a < b }}
		var want []int
		for range n {
			v := r.IntN(50)
			h.Push(v)
			want = append(want, v)
		}
		slices.Sort(want)
		var got []int
		for h.Len() > 0 {
			if h.Peek() != h.items[0] {
				t.Fatal("Peek differs from the top")
			}
			got = append(got, h.Pop())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: popped %v, want %v", n, got, want)
		}
	}
}

func TestHeapInterleaved(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := Heap[int]{Less: func(a, b int) bool { return a < b }}
	var model []int
	for range 2000 {
		if r.IntN(3) > 0 || len(model) == 0 {
			v := r.IntN(1000)
			h.Push(v)
			model = append(model, v)
			continue
		}
		i := slices.Index(model, slices.Min(model))
		want := model[i]
		model = slices.Delete(model, i, i+1)
		if got := h.Pop(); got != want {
			t.Fatalf("Pop = %d, want %d", got, want)
		}
	}
	h.Reset()
	if h.Len() != 0 {
		t.Fatal("Reset left elements")
	}
}
