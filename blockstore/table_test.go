package blockstore

import (
	"errors"
	"testing"
)

// seq pairs a Table with the bytes its positions must hold, so tests can
// tell a copy-on-write bug (one sequence's write showing up in another's
// view) from correct sharing.
type seq struct {
	t    *Table
	want []byte
}

func newStoredPool(t testing.TB, blocks, blockSize int) (*Pool, *MemStorage) {
	t.Helper()
	st, err := NewMemStorage(blocks, blockSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{NumBlocks: blocks, BlockSize: blockSize, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	return p, st
}

// write appends vals to s, storing each in its slot as a model would.
func (s *seq) write(st *MemStorage, vals ...byte) error {
	start := s.t.Len()
	if err := s.t.Append(len(vals)); err != nil {
		return err
	}
	for i, v := range vals {
		id, off := s.t.Slot(start + i)
		st.Slot(id, off)[0] = v
	}
	s.want = append(s.want, vals...)
	return nil
}

func (s *seq) verify(t testing.TB, st *MemStorage) {
	t.Helper()
	if s.t.Len() != len(s.want) {
		t.Fatalf("table len %d, want %d", s.t.Len(), len(s.want))
	}
	for pos, v := range s.want {
		id, off := s.t.Slot(pos)
		if got := st.Slot(id, off)[0]; got != v {
			t.Fatalf("position %d (block %d slot %d) holds %d, want %d", pos, id, off, got, v)
		}
	}
}

func (s *seq) fork() *seq {
	return &seq{t: s.t.Fork(), want: append([]byte(nil), s.want...)}
}

func TestAppendAndSlot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		appends    []int
		wantBlocks int
	}{
		{"empty", nil, 0},
		{"shorter than a block", []int{3}, 1},
		{"exact block", []int{4}, 1},
		{"exact multiple", []int{8}, 2},
		{"one past a block", []int{5}, 2},
		{"token by token", []int{1, 1, 1, 1, 1}, 2},
		{"zero-length append", []int{0, 2, 0}, 1},
		{"mixed chunks", []int{3, 6, 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := newStoredPool(t, 8, 4)
			s := &seq{t: p.NewTable()}
			v := byte(1)
			for _, k := range tc.appends {
				vals := make([]byte, k)
				for i := range vals {
					vals[i] = v
					v++
				}
				if err := s.write(st, vals...); err != nil {
					t.Fatal(err)
				}
				mustCheck(t, p, s.t)
			}
			if len(s.t.Blocks()) != tc.wantBlocks {
				t.Fatalf("%d blocks, want %d", len(s.t.Blocks()), tc.wantBlocks)
			}
			s.verify(t, st)
			if got := p.Stats().SlotsUsed; got != s.t.Len() {
				t.Fatalf("SlotsUsed %d, want %d", got, s.t.Len())
			}
			s.t.Release()
			mustCheck(t, p, s.t)
			if p.NumFree() != 8 {
				t.Fatalf("free %d after release, want 8", p.NumFree())
			}
		})
	}
}

func TestAppendExhaustedChangesNothing(t *testing.T) {
	p, st := newStoredPool(t, 2, 4)
	s := &seq{t: p.NewTable()}
	if err := s.write(st, 1, 2, 3, 4, 5, 6); err != nil {
		t.Fatal(err)
	}
	if err := s.t.Append(3); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Append past the pool: %v, want ErrPoolExhausted", err)
	}
	if err := s.t.Append(-1); err == nil {
		t.Fatal("negative Append accepted")
	}
	mustCheck(t, p, s.t)
	s.verify(t, st)
	// The shared last block needs a copy too: with the pool full, a fork
	// cannot write, and neither table changes.
	c := s.fork()
	if err := c.write(st, 9); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("copy-on-write with no free block: %v", err)
	}
	mustCheck(t, p, s.t, c.t)
	s.verify(t, st)
	c.verify(t, st)
}

func TestForkCopyOnWrite(t *testing.T) {
	p, st := newStoredPool(t, 16, 4)
	parent := &seq{t: p.NewTable()}
	if err := parent.write(st, 1, 2, 3, 4, 5, 6); err != nil { // one full block, one half
		t.Fatal(err)
	}
	before := p.NumFree()
	child := parent.fork()
	if p.NumFree() != before {
		t.Fatalf("fork allocated %d blocks; it must copy nothing", before-p.NumFree())
	}
	for _, id := range parent.t.Blocks() {
		if p.RefCount(id) != 2 {
			t.Fatalf("block %d refcount %d after fork, want 2", id, p.RefCount(id))
		}
	}
	mustCheck(t, p, parent.t, child.t)

	// The child writes into the shared half block: it gets a private copy
	// holding the two written slots; the full block stays shared.
	if err := child.write(st, 70); err != nil {
		t.Fatal(err)
	}
	if p.NumFree() != before-1 {
		t.Fatalf("copy-on-write used %d blocks, want 1", before-p.NumFree())
	}
	if parent.t.Blocks()[0] != child.t.Blocks()[0] || parent.t.Blocks()[1] == child.t.Blocks()[1] {
		t.Fatalf("after CoW parent %v child %v: want first shared, second private", parent.t.Blocks(), child.t.Blocks())
	}
	// The parent, now sole owner of its half block, writes in place.
	if err := parent.write(st, 80, 81); err != nil {
		t.Fatal(err)
	}
	if p.NumFree() != before-1 {
		t.Fatalf("parent write copied although it owned the block")
	}
	mustCheck(t, p, parent.t, child.t)
	parent.verify(t, st)
	child.verify(t, st)

	parent.t.Release()
	child.t.Release()
	mustCheck(t, p)
	if p.NumFree() != 16 {
		t.Fatalf("leak: %d free of 16", p.NumFree())
	}
}

func TestTruncate(t *testing.T) {
	p, st := newStoredPool(t, 8, 4)
	s := &seq{t: p.NewTable()}
	if err := s.write(st, 1, 2, 3, 4, 5, 6, 7, 8, 9); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{9, 8, 5, 4, 1, 0} {
		s.t.Truncate(n)
		s.want = s.want[:n]
		mustCheck(t, p, s.t)
		s.verify(t, st)
		if want := 8 - (n+3)/4; p.NumFree() != want {
			t.Fatalf("Truncate(%d): free %d, want %d", n, p.NumFree(), want)
		}
		if p.Stats().SlotsUsed != n {
			t.Fatalf("Truncate(%d): SlotsUsed %d", n, p.Stats().SlotsUsed)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Truncate past the end did not panic")
			}
		}()
		s.t.Truncate(1)
	}()
}

func TestTruncateIntoSharedBlockCopiesOnWrite(t *testing.T) {
	p, st := newStoredPool(t, 8, 4)
	a := &seq{t: p.NewTable()}
	if err := a.write(st, 1, 2, 3, 4, 5, 6, 7, 8); err != nil {
		t.Fatal(err)
	}
	b := a.fork()
	b.t.Truncate(6)
	b.want = b.want[:6]
	if err := b.write(st, 60, 61); err != nil { // rewrites slots a still reads
		t.Fatal(err)
	}
	mustCheck(t, p, a.t, b.t)
	a.verify(t, st)
	b.verify(t, st)
}

func TestAdoptSharesCachedPrefix(t *testing.T) {
	p, st := newStoredPool(t, 8, 4)
	a := &seq{t: p.NewTable()}
	if err := a.write(st, 1, 2, 3, 4, 5, 6, 7, 8, 9); err != nil {
		t.Fatal(err)
	}
	prefix := append([]BlockID(nil), a.t.Blocks()[:2]...)
	for _, id := range prefix {
		p.RetainCache(id) // the radix tree keeps the two full blocks
	}
	a.t.Release()
	if s := p.Stats(); s.CachedOnly != 2 || s.InUse != 0 {
		t.Fatalf("after release: %+v, want 2 cached-only", s)
	}
	b := &seq{t: p.NewTable(), want: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	if err := b.t.Adopt(prefix); err != nil {
		t.Fatal(err)
	}
	if err := b.write(st, 90); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, p, b.t)
	b.verify(t, st)
	if err := b.t.Adopt(prefix); err == nil {
		t.Fatal("Adopt onto a partial block accepted")
	}
	b.t.Release()
	for _, id := range prefix {
		p.ReleaseCache(id)
	}
	mustCheck(t, p)
	if p.NumFree() != 8 {
		t.Fatalf("leak: %d free of 8", p.NumFree())
	}
}

func TestContiguousReservation(t *testing.T) {
	p, st := newStoredPool(t, 10, 4)
	s := &seq{t: p.NewTable()}
	if err := s.t.Reserve(10); err != nil { // ceil(10/4) = 3 blocks now
		t.Fatal(err)
	}
	if p.NumFree() != 7 || !s.t.Reserved() {
		t.Fatalf("Reserve(10): free %d reserved %v", p.NumFree(), s.t.Reserved())
	}
	if err := s.write(st, 1, 2, 3, 4, 5); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.SlotsAllocated != 12 || st.SlotsUsed != 5 {
		t.Fatalf("contiguous stats %+v, want 12 allocated 5 used", st)
	}
	if p.NumFree() != 7 {
		t.Fatalf("a contiguous write allocated")
	}
	if err := s.write(st, 6, 7, 8, 9, 10, 11, 12, 13); !errors.Is(err, ErrTableFull) {
		t.Fatalf("write past reservation: %v, want ErrTableFull", err)
	}
	s.t.Truncate(2)
	s.want = s.want[:2]
	if p.NumFree() != 7 {
		t.Fatalf("contiguous Truncate released its reservation")
	}
	mustCheck(t, p, s.t)
	s.verify(t, st)
	big := p.NewTable()
	if err := big.Reserve(100); !errors.Is(err, ErrPoolExhausted) || p.NumFree() != 7 {
		t.Fatalf("oversized Reserve: %v, free %d", err, p.NumFree())
	}
	s.t.Release()
	mustCheck(t, p)
}

func TestForkContiguous(t *testing.T) {
	p, st := newStoredPool(t, 10, 4)
	a := &seq{t: p.NewTable()}
	if err := a.t.Reserve(8); err != nil {
		t.Fatal(err)
	}
	if err := a.write(st, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	b := a.fork()
	if err := b.write(st, 40, 41, 42); err != nil { // spans both reserved blocks, both shared
		t.Fatal(err)
	}
	if err := a.write(st, 50); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, p, a.t, b.t)
	a.verify(t, st)
	b.verify(t, st)
	a.t.Release()
	b.t.Release()
	mustCheck(t, p)
	if p.NumFree() != 10 {
		t.Fatalf("leak: %d free", p.NumFree())
	}
}

func TestMemStorageBytes(t *testing.T) {
	st, err := NewMemStorage(2, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	src := []byte{1, 2, 3, 4, 5, 6}
	if err := st.WriteBlock(1, src); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, st.BlockBytes())
	if err := st.ReadBlock(1, got); err != nil || string(got) != string(src) {
		t.Fatalf("ReadBlock = %v, %v; want %v", got, err, src)
	}
	if err := st.CopyBlocks([]BlockCopy{{Src: 1, Dst: 0, Slots: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.ReadBlock(0, got); err != nil || string(got) != string([]byte{1, 2, 3, 0, 0, 0}) {
		t.Fatalf("after 1-slot copy block 0 = %v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"read out of range", st.ReadBlock(2, got)},
		{"read wrong size", st.ReadBlock(0, got[:2])},
		{"write negative id", st.WriteBlock(-1, got)},
		{"copy too many slots", st.CopyBlocks([]BlockCopy{{Src: 0, Dst: 1, Slots: 3}})},
		{"copy bad dst", st.CopyBlocks([]BlockCopy{{Src: 0, Dst: 7, Slots: 1}})},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := NewMemStorage(0, 1, 1); err == nil {
		t.Error("NewMemStorage with zero blocks accepted")
	}
}

// TestReplaceSharesAFullBlock swaps a table's full block for another
// holding the same K/V (the cache's copy): the duplicate is freed, the
// shared block gains the table's reference, and CheckRefs recounts both.
func TestReplaceSharesAFullBlock(t *testing.T) {
	p, _ := newStoredPool(t, 8, 4)
	cache := p.NewTable()
	if err := cache.Append(8); err != nil {
		t.Fatal(err)
	}
	cached := cache.Blocks()[1]
	p.RetainCache(cached)
	tb := p.NewTable()
	if err := tb.Append(10); err != nil { // blocks 0 and 1 full, 2 partial
		t.Fatal(err)
	}
	dup := tb.Blocks()[1]
	if err := p.CheckRefs([]*Table{cache, tb}); err != nil {
		t.Fatal(err)
	}
	tb.Replace(1, cached)
	if tb.Blocks()[1] != cached || p.RefCount(dup) != 0 || p.RefCount(cached) != 3 {
		t.Fatalf("after Replace: block %d, dup refs %d, shared refs %d", tb.Blocks()[1], p.RefCount(dup), p.RefCount(cached))
	}
	if err := p.CheckRefs([]*Table{cache, tb}); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckRefs([]*Table{tb}); err == nil {
		t.Fatal("CheckRefs missed a table holding blocks")
	}
	for _, tt := range []*Table{tb, cache} {
		if err := tt.Check(); err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Replace of the partial block did not panic")
			}
		}()
		tb.Replace(2, cached)
	}()
	tb.Release()
	cache.Release()
	p.ReleaseCache(cached)
	if err := p.Check(); err != nil || p.NumFree() != 8 {
		t.Fatalf("after release: %v, %d free", err, p.NumFree())
	}
}
