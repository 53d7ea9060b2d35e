package disktier

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

var model = ModelFingerprint{0xAB}

type rig struct {
	t   *testing.T
	dir string
	clk *clock.Fake
	obs *observer
}

func newRig(t *testing.T) *rig {
	return &rig{t: t, dir: t.TempDir(), clk: clock.NewFake(time.Unix(1_800_000_000, 0)), obs: &observer{}}
}

// open opens the rig's directory as a tier and waits for its scan.
func (r *rig) open(capacity int64, m ModelFingerprint) *Tier {
	r.t.Helper()
	d, err := New(Config{Dir: r.dir, CapacityBytes: capacity, Model: m, Clock: r.clk, Observer: r.obs, QueueBlocks: 64})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { d.Close() })
	d.WaitScan()
	r.check(d)
	return d
}

func (r *rig) check(d *Tier) {
	r.t.Helper()
	if err := d.Check(); err != nil {
		r.t.Fatal(err)
	}
}

// block is the i-th test block: its tokens, fingerprint and K/V bytes.
func block(ns string, i int) ([]int32, kvcache.Fingerprint, []byte) {
	toks := []int32{int32(i), int32(i + 1), int32(i + 2), int32(i + 3)}
	fp := kvcache.Chain(kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), toks)
	return toks, fp, bytes.Repeat([]byte{byte(i)}, 64)
}

// put writes blocks [from, to) of namespace ns and waits for them.
func (r *rig) put(d *Tier, ns string, from, to int) {
	r.t.Helper()
	now := r.clk.Now().UnixNano()
	for i := from; i < to; i++ {
		toks, fp, data := block(ns, i)
		if !d.Put(ns, fp, toks, eviction.StoredBlock{Data: data, Expires: now + int64(time.Minute), LastUsed: now}, time.Minute) {
			r.t.Fatalf("Put of block %d dropped", i)
		}
	}
	d.Wait()
	r.check(d)
}

// hits reports which of blocks [from, to) of ns the tier returns, checking
// each returned block's bytes.
func (r *rig) hits(d *Tier, ns string, from, to int) int {
	r.t.Helper()
	n := 0
	for i := from; i < to; i++ {
		toks, fp, data := block(ns, i)
		b, ok := d.Get(ns, fp, toks, r.clk.Now().UnixNano())
		if ok {
			if !bytes.Equal(b.Data, data) {
				r.t.Fatalf("block %d read back other bytes", i)
			}
			n++
		}
		if ok != d.Has(ns, fp, toks, r.clk.Now().UnixNano()) && ok {
			r.t.Fatalf("block %d: Get hit but Has says no", i)
		}
	}
	r.check(d)
	return n
}

type observer struct {
	mu              sync.Mutex
	stored, removed int
}

func (o *observer) TierStored(t kvcache.Tier, _ string, _, _ kvcache.Fingerprint, _ []int32) {
	if t != kvcache.TierDisk {
		panic("a disk record reported on " + t.String())
	}
	o.mu.Lock()
	o.stored++
	o.mu.Unlock()
}

func (o *observer) TierRemoved(kvcache.Tier, string, kvcache.Fingerprint) {
	o.mu.Lock()
	o.removed++
	o.mu.Unlock()
}

func (o *observer) Cleared() {}

// TestRestartRecoversHits writes blocks, closes the tier, opens the
// directory again as a new process would: the scan finds every block, and
// each reads back its own bytes; the observer hears of each record on
// both runs.
func TestRestartRecoversHits(t *testing.T) {
	r := newRig(t)
	d := r.open(1<<20, model)
	r.put(d, "a", 0, 20)
	if got := r.hits(d, "a", 0, 20); got != 20 {
		t.Fatalf("%d of 20 blocks hit before the restart", got)
	}
	d.Close()
	d = r.open(1<<20, model)
	if got := r.hits(d, "a", 0, 20); got != 20 {
		t.Fatalf("%d of 20 blocks hit after the restart", got)
	}
	if got := r.hits(d, "b", 0, 20); got != 0 {
		t.Fatalf("another namespace hit %d blocks", got)
	}
	if s := d.Stats(); s.Blocks != 20 || s.Writes != 0 || s.Hits != 40-20 || s.Corrupt != 0 || s.Scanning {
		t.Fatalf("stats after the restart: %+v", s)
	}
	if r.obs.stored != 40 {
		t.Fatalf("the observer heard of %d stored records, want 20 per run", r.obs.stored)
	}
}

// TestAnotherModelNeverHits: the same directory opened under another
// model fingerprint indexes nothing, and does not remove the first
// model's records.
func TestAnotherModelNeverHits(t *testing.T) {
	r := newRig(t)
	d := r.open(1<<20, model)
	r.put(d, "a", 0, 10)
	d.Close()
	other := r.open(1<<20, ModelFingerprint{0xCD})
	if got := r.hits(other, "a", 0, 10); got != 0 || other.Stats().Blocks != 0 {
		t.Fatalf("another model hit %d blocks (%d indexed)", got, other.Stats().Blocks)
	}
	other.Close()
	if got := r.hits(r.open(1<<20, model), "a", 0, 10); got != 10 {
		t.Fatalf("the first model finds %d of 10 blocks after the other's run", got)
	}
}

// TestCorruptRecordsAreMisses damages records on disk in several ways,
// before a restart (found by the scan) and while indexed (found by the
// read): each is a miss, counted once, removed; the others still hit.
func TestCorruptRecordsAreMisses(t *testing.T) {
	r := newRig(t)
	d := r.open(1<<20, model)
	r.put(d, "a", 0, 10)
	path := func(i int) string { _, fp, _ := block("a", i); return d.path(fp) }
	damage := func(i int, how func([]byte) []byte) {
		b, err := os.ReadFile(path(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path(i), how(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(at int) func([]byte) []byte {
		return func(b []byte) []byte {
			if at < 0 { // from the end
				at += len(b)
			}
			b[at] ^= 0x40
			return b
		}
	}
	torn := func(b []byte) []byte { return b[:len(b)/2] }
	// While indexed: a flipped K/V byte, a flipped CRC, a torn tail.
	damage(0, flip(-100))
	damage(1, flip(-1))
	damage(2, torn)
	if got := r.hits(d, "a", 0, 10); got != 7 {
		t.Fatalf("%d of 10 hit with 3 damaged", got)
	}
	if got := d.Stats().Corrupt; got != 3 {
		t.Fatalf("%d corrupt records counted, want 3", got)
	}
	if got := r.hits(d, "a", 0, 3); got != 0 || d.Stats().Corrupt != 3 {
		t.Fatalf("damaged records hit %d times on a second read, corrupt %d", got, d.Stats().Corrupt)
	}
	d.Close()
	// Before a restart: a torn header, bad magic, a token changed.
	damage(3, func(b []byte) []byte { return b[:headerSize-1] })
	damage(4, flip(0))
	damage(5, flip(headerSize+len("a")))
	d = r.open(1<<20, model)
	if got := r.hits(d, "a", 0, 10); got != 4 {
		t.Fatalf("%d of 10 hit after the restart with 6 damaged", got)
	}
	if got := d.Stats().Corrupt; got != 3 { // by the scan, all three
		t.Fatalf("%d corrupt records counted after the restart, want 3", got)
	}
	for i := range 6 {
		if _, err := os.Stat(path(i)); !os.IsNotExist(err) {
			t.Errorf("damaged record %d is still on disk: %v", i, err)
		}
	}
}

// TestBudget: the tier keeps its bytes within capacity by least-recent
// use, a read refreshing a record; records expire by their TTL.
func TestBudget(t *testing.T) {
	r := newRig(t)
	_, _, data := block("a", 0)
	one := int64((&record{ns: "a", tokens: make([]int32, 4), data: data}).size())
	d := r.open(10*one, model)
	r.put(d, "a", 0, 10)
	r.hits(d, "a", 0, 1) // block 0 is now the most recent
	r.put(d, "a", 10, 15)
	if s := d.Stats(); s.Bytes > 10*one || s.Blocks != 10 || s.Evicted != 5 {
		t.Fatalf("after 15 puts into room for 10: %+v", s)
	}
	if r.hits(d, "a", 0, 1) != 1 || r.hits(d, "a", 1, 6) != 0 || r.hits(d, "a", 6, 15) != 9 {
		t.Fatal("the budget did not evict the least recently used")
	}
	r.clk.Advance(25 * time.Hour) // past the default TTL of every record
	if got := r.hits(d, "a", 0, 15); got != 0 {
		t.Fatalf("%d expired records hit", got)
	}
	r.put(d, "a", 20, 21) // the writer drops what expired
	if s := d.Stats(); s.Blocks != 1 {
		t.Fatalf("%d records indexed after they expired", s.Blocks)
	}
}

// TestFullQueueDrops: Put never blocks; beyond the queue it drops and
// counts. The writer is held by holding its lock.
func TestFullQueueDrops(t *testing.T) {
	r := newRig(t)
	d := r.open(1<<20, model)
	d.wmu.Lock()
	accepted := 0
	for i := range 100 {
		toks, fp, data := block("a", i)
		if d.Put("a", fp, toks, eviction.StoredBlock{Data: data, LastUsed: r.clk.Now().UnixNano()}, 0) {
			accepted++
		}
	}
	d.wmu.Unlock()
	d.Wait()
	s := d.Stats()
	if s.Dropped == 0 || int(s.Dropped)+accepted != 100 || s.Writes != uint64(accepted) {
		t.Fatalf("%d accepted, stats %+v", accepted, s)
	}
}

// TestFlush: a namespace flush removes its records and files only.
func TestFlush(t *testing.T) {
	r := newRig(t)
	d := r.open(1<<20, model)
	r.put(d, "a", 0, 5)
	r.put(d, "b", 0, 5)
	d.FlushNamespace("a")
	if r.hits(d, "a", 0, 5) != 0 || r.hits(d, "b", 0, 5) != 5 {
		t.Fatal("the flush of a removed the wrong records")
	}
	d.Clear()
	files, _ := filepath.Glob(filepath.Join(r.dir, "*", "*.kv"))
	if d.Stats().Blocks != 0 || len(files) != 0 {
		t.Fatalf("after Clear: %d indexed, %d files", d.Stats().Blocks, len(files))
	}
}

// TestReadAhead: a block read ahead is served from memory (its file may be
// gone by then), once; the read-ahead keeps within its bytes, dropping the
// oldest; a flush drops what it holds of the namespace.
func TestReadAhead(t *testing.T) {
	r := newRig(t)
	d, err := New(Config{Dir: r.dir, CapacityBytes: 1 << 20, Model: model, Clock: r.clk, ReadAheadBytes: 2 * 64})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.WaitScan()
	r.put(d, "a", 0, 4)
	now := r.clk.Now().UnixNano()
	for i := range 3 { // block 0 is dropped for 2's room
		toks, fp, _ := block("a", i)
		if !d.ReadAhead("a", fp, toks, now) {
			t.Fatalf("block %d was not read ahead", i)
		}
		if err := os.Remove(d.path(fp)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.hits(d, "a", 0, 3); got != 2 {
		t.Fatalf("%d of 3 blocks whose files are gone hit; want the 2 the read-ahead kept", got)
	}
	if got := r.hits(d, "a", 1, 3); got != 0 {
		t.Fatalf("read-ahead blocks served %d times more", got)
	}
	toks, fp, _ := block("a", 3)
	if !d.ReadAhead("a", fp, toks, now) {
		t.Fatal("block 3 was not read ahead")
	}
	d.FlushNamespace("a")
	if got := r.hits(d, "a", 3, 4); got != 0 {
		t.Fatal("a flushed namespace's read-ahead block hit")
	}
}
