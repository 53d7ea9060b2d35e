package blockstore

import "testing"

func BenchmarkAllocRelease(b *testing.B) {
	p := newPool(b, 1024)
	b.ReportAllocs()
	for b.Loop() {
		id, err := p.Alloc()
		if err != nil {
			b.Fatal(err)
		}
		p.Release(id)
	}
}

// BenchmarkAppendToken measures the per-token cost of growing a paged table
// (a block allocated every BlockSize tokens), the scheduler's hot path.
func BenchmarkAppendToken(b *testing.B) {
	p := newPool(b, 4096)
	t := p.NewTable()
	b.ReportAllocs()
	for b.Loop() {
		if t.Len() == 4096*p.BlockSize() {
			t.Truncate(0)
		}
		if err := t.Append(1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForkWrite measures a beam fork of a 2,048-token table followed by
// the copy-on-write of its shared last block.
func BenchmarkForkWrite(b *testing.B) {
	p, _ := newStoredPool(b, 1024, 16)
	parent := p.NewTable()
	if err := parent.Append(2048 - 5); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := parent.Fork()
		if err := c.Append(1); err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	p := newPool(t, 64)
	tb := p.NewTable()
	if err := tb.Reserve(64 * 4); err != nil { // warm the block slice's capacity
		t.Fatal(err)
	}
	tb.Release()
	for name, fn := range map[string]func(){
		"alloc+release": func() {
			id, _ := p.Alloc()
			p.Release(id)
		},
		"append token": func() {
			if tb.Len() == 64*4 {
				tb.Truncate(0)
			}
			if err := tb.Append(1); err != nil {
				t.Fatal(err)
			}
		},
		"stats": func() { _ = p.Stats() },
	} {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s allocates %.1f times per run", name, n)
		}
	}
}
