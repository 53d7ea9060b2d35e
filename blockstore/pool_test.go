package blockstore

import (
	"errors"
	"testing"
)

func newPool(t testing.TB, blocks int) *Pool {
	t.Helper()
	p, err := New(Config{NumBlocks: blocks, BlockSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustCheck(t testing.TB, p *Pool, tables ...*Table) {
	t.Helper()
	if err := p.Check(); err != nil {
		t.Fatalf("pool invariant: %v", err)
	}
	for i, tb := range tables {
		if err := tb.Check(); err != nil {
			t.Fatalf("table %d invariant: %v", i, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero blocks", Config{NumBlocks: 0}, false},
		{"negative blocks", Config{NumBlocks: -3}, false},
		{"negative block size", Config{NumBlocks: 4, BlockSize: -1}, false},
		{"default block size", Config{NumBlocks: 4}, true},
		{"explicit block size", Config{NumBlocks: 4, BlockSize: 32}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New(%+v) error = %v, want ok=%v", tc.cfg, err, tc.ok)
			}
			if err == nil {
				want := tc.cfg.BlockSize
				if want == 0 {
					want = DefaultBlockSize
				}
				if p.BlockSize() != want || p.NumFree() != tc.cfg.NumBlocks {
					t.Fatalf("BlockSize %d free %d, want %d and %d", p.BlockSize(), p.NumFree(), want, tc.cfg.NumBlocks)
				}
				mustCheck(t, p)
			}
		})
	}
}

func TestAllocRelease(t *testing.T) {
	p := newPool(t, 3)
	var ids []BlockID
	for range 3 {
		id, err := p.Alloc()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		mustCheck(t, p)
	}
	if _, err := p.Alloc(); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Alloc on empty pool: %v, want ErrPoolExhausted", err)
	}
	p.Retain(ids[1])
	p.Release(ids[1])
	if p.RefCount(ids[1]) != 1 || p.NumFree() != 0 {
		t.Fatalf("after retain+release: refs %d free %d", p.RefCount(ids[1]), p.NumFree())
	}
	for _, id := range ids {
		p.Release(id)
		mustCheck(t, p)
	}
	if p.NumFree() != 3 {
		t.Fatalf("free %d after releasing all, want 3", p.NumFree())
	}
}

func TestAllocNAllOrNothing(t *testing.T) {
	p := newPool(t, 5)
	got, err := p.AllocN(nil, 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("AllocN(3) = %v, %v", got, err)
	}
	got2, err := p.AllocN(got, 3)
	if !errors.Is(err, ErrPoolExhausted) || len(got2) != 3 || p.NumFree() != 2 {
		t.Fatalf("AllocN(3) with 2 free: len %d err %v free %d; want nothing allocated", len(got2), err, p.NumFree())
	}
	mustCheck(t, p)
}

func TestCacheReferences(t *testing.T) {
	p := newPool(t, 4)
	id, _ := p.Alloc()
	p.RetainCache(id)
	if s := p.Stats(); s.InUse != 1 || s.CachedOnly != 0 {
		t.Fatalf("table+cache: %+v, want InUse 1 CachedOnly 0", s)
	}
	p.Release(id) // the table lets go; the cache keeps it
	if s := p.Stats(); s.InUse != 0 || s.CachedOnly != 1 || s.Free != 3 {
		t.Fatalf("cache only: %+v", s)
	}
	mustCheck(t, p)
	p.Retain(id) // a new request adopts the cached block
	if s := p.Stats(); s.InUse != 1 || s.CachedOnly != 0 {
		t.Fatalf("re-adopted: %+v", s)
	}
	p.ReleaseCache(id) // evicted while in use: stays allocated
	if p.RefCount(id) != 1 || p.Cached(id) {
		t.Fatalf("after eviction: refs %d cached %v", p.RefCount(id), p.Cached(id))
	}
	p.Release(id)
	if s := p.Stats(); s.Free != 4 {
		t.Fatalf("after all released: %+v", s)
	}
	mustCheck(t, p)
}

func TestMisusePanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(p *Pool, id BlockID)
	}{
		{"release free block", func(p *Pool, id BlockID) { p.Release(id); p.Release(id) }},
		{"retain free block", func(p *Pool, id BlockID) { p.Release(id); p.Retain(id) }},
		{"cache twice", func(p *Pool, id BlockID) { p.RetainCache(id); p.RetainCache(id) }},
		{"release cache of uncached", func(p *Pool, id BlockID) { p.ReleaseCache(id) }},
		{"table release of cache-only", func(p *Pool, id BlockID) { p.RetainCache(id); p.Release(id); p.Release(id) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, 2)
			id, _ := p.Alloc()
			defer func() {
				if recover() == nil {
					t.Fatal("misuse did not panic")
				}
			}()
			tc.op(p, id)
		})
	}
}

func TestBlocksFor(t *testing.T) {
	for _, c := range []struct{ tokens, size, want int }{
		{0, 16, 0}, {1, 16, 1}, {15, 16, 1}, {16, 16, 1}, {17, 16, 2}, {512, 16, 32}, {513, 16, 33}, {5, 1, 5},
	} {
		if got := BlocksFor(c.tokens, c.size); got != c.want {
			t.Errorf("BlocksFor(%d, %d) = %d, want %d", c.tokens, c.size, got, c.want)
		}
	}
}

// TestWriteFullFillsTheBlock writes a whole block from another tier: its
// bytes land in the storage and the pool counts its slots as used.
func TestWriteFullFillsTheBlock(t *testing.T) {
	st, err := NewMemStorage(2, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{NumBlocks: 2, BlockSize: 4, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := p.Alloc()
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := p.WriteFull(id, data); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := st.ReadBlock(id, got); err != nil || string(got) != string(data) {
		t.Fatalf("read back %v, %v", got, err)
	}
	if s := p.Stats(); s.SlotsUsed != 4 {
		t.Fatalf("%d slots used, want 4", s.SlotsUsed)
	}
	if err := p.WriteFull(id, data[:3]); err == nil {
		t.Fatal("a short block was written")
	}
	p.Release(id)
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
