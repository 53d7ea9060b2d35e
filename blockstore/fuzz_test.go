package blockstore

import (
	"errors"
	"testing"
)

// FuzzTables drives random operations on a small pool with several tables
// and a set of cache references, and after every step checks the pool's
// invariants, each table's content against a naive byte model (so any
// copy-on-write slip shows), and every refcount against a recount.
func FuzzTables(f *testing.F) {
	f.Add([]byte{0, 5, 1, 0, 0, 3, 2, 0, 4, 1})
	f.Add([]byte{0, 17, 2, 0, 0, 1, 3, 1, 6, 1, 0, 2, 7, 0, 5, 0})
	f.Add([]byte{8, 11, 0, 16, 2, 0, 0, 1, 9, 0, 4, 2, 6, 1, 3, 1, 0, 7})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const blocks, blockSize = 12, 3
		p, st := newStoredPool(t, blocks, blockSize)
		var seqs []*seq
		cached := map[BlockID]bool{}
		next := byte(1)
		arg := func(i int) int {
			if i < len(ops) {
				return int(ops[i])
			}
			return 0
		}
		pick := func(i int) *seq {
			if len(seqs) == 0 {
				return nil
			}
			return seqs[arg(i)%len(seqs)]
		}
		for i := 0; i < len(ops); i += 3 {
			switch op := ops[i] % 9; op {
			case 0: // new table
				if len(seqs) < 6 {
					seqs = append(seqs, &seq{t: p.NewTable()})
				}
			case 1, 2: // append 1..8 tokens
				s := pick(i + 1)
				if s == nil {
					continue
				}
				vals := make([]byte, 1+arg(i+2)%8)
				for j := range vals {
					vals[j] = next
					next++
				}
				free := p.NumFree()
				need := s.t.BlocksNeeded(len(vals))
				err := s.write(st, vals...)
				if err == nil && free-p.NumFree() != need {
					t.Fatalf("Append took %d blocks, BlocksNeeded said %d", free-p.NumFree(), need)
				}
				if err != nil {
					if !errors.Is(err, ErrPoolExhausted) && !errors.Is(err, ErrTableFull) {
						t.Fatal(err)
					}
					if p.NumFree() != free {
						t.Fatalf("failed Append changed free count %d -> %d", free, p.NumFree())
					}
				}
			case 3: // fork
				if s := pick(i + 1); s != nil && len(seqs) < 6 {
					seqs = append(seqs, s.fork())
				}
			case 4: // truncate
				if s := pick(i + 1); s != nil {
					n := arg(i+2) % (s.t.Len() + 1)
					s.t.Truncate(n)
					s.want = s.want[:n]
				}
			case 5: // release and drop a table
				if s := pick(i + 1); s != nil {
					s.t.Release()
					k := arg(i+1) % len(seqs)
					seqs = append(seqs[:k], seqs[k+1:]...)
				}
			case 6: // cache a full block of a table
				if s := pick(i + 1); s != nil && s.t.Len() >= blockSize {
					full := s.t.Len() / blockSize
					if s.t.Reserved() {
						continue
					}
					id := s.t.Blocks()[arg(i+2)%full]
					if !cached[id] {
						p.RetainCache(id)
						cached[id] = true
					}
				}
			case 7: // evict a cached block
				for id := range cached {
					p.ReleaseCache(id)
					delete(cached, id)
					break
				}
			case 8: // contiguous table, or adopt cached blocks into a new one
				if len(seqs) >= 6 {
					continue
				}
				s := &seq{t: p.NewTable()}
				if arg(i+1)%2 == 0 {
					if err := s.t.Reserve(arg(i+2) % 16); err != nil && !errors.Is(err, ErrPoolExhausted) {
						t.Fatal(err)
					}
				} else if src := pick(i + 2); src != nil && !src.t.Reserved() {
					full := src.t.Len() / blockSize
					if err := s.t.Adopt(src.t.Blocks()[:full]); err != nil {
						t.Fatal(err)
					}
					s.want = append(s.want, src.want[:full*blockSize]...)
				}
				seqs = append(seqs, s)
			}
			// Invariants after every step.
			tables := make([]*Table, len(seqs))
			want := make([]int, blocks)
			for j, s := range seqs {
				tables[j] = s.t
				s.verify(t, st)
				for _, id := range s.t.Blocks() {
					want[id]++
				}
			}
			for id := range cached {
				want[id]++
			}
			for id, w := range want {
				if p.RefCount(BlockID(id)) != w {
					t.Fatalf("step %d: block %d refcount %d, recount %d", i/3, id, p.RefCount(BlockID(id)), w)
				}
			}
			mustCheck(t, p, tables...)
		}
		for _, s := range seqs {
			s.t.Release()
		}
		for id := range cached {
			p.ReleaseCache(id)
		}
		mustCheck(t, p)
		if p.NumFree() != blocks {
			t.Fatalf("leak: %d of %d free after releasing everything", p.NumFree(), blocks)
		}
	})
}
