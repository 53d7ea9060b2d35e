package disktier

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/internal/workq"
	"github.com/prefixd/prefixd/kvcache"
)

// Config configures a Tier.
type Config struct {
	// Dir holds the records; it is created if missing. Required.
	Dir string
	// CapacityBytes bounds the bytes of records kept (whole files).
	// Required.
	CapacityBytes int64
	// Model is the fingerprint records are written under and the only one
	// read back. Required (not all zero).
	Model ModelFingerprint
	// TTL keeps a record at least this long after its block's last use
	// (longer if the block's own TTL deadline is later); default 24 hours.
	TTL time.Duration
	// QueueBlocks bounds the blocks waiting to be written; Put drops a
	// block beyond it. Default 256.
	QueueBlocks int
	// ReadAheadBytes bounds the K/V bytes ReadAhead keeps read and checked
	// for a Get to come; beyond it the oldest blocks are dropped. Default
	// 64 MiB.
	ReadAheadBytes int64
	// Clock must be the cache's (the times in blocks are on it); default
	// the system clock.
	Clock clock.Clock
	// Observer is told of records entering and leaving the tier (as
	// kvcache.TierDisk), from the tier's goroutines; optional.
	Observer eviction.Observer
	// Log receives the tier's warnings (never a block's tokens); default
	// none.
	Log *slog.Logger
}

// Tier is the disk tier: an eviction.Tier whose records survive the
// process. See the package documentation. It is safe for concurrent use.
type Tier struct {
	cfg   Config
	pid   string // names this process's temporary files
	index index

	queue *workq.Queue[job] // the writer's jobs; the scan watches its Stop
	wmu   sync.Mutex        // serializes record writes: the writer's and Save's
	buf   []byte            // encoding scratch, under wmu
	ahead readAhead
	scan  atomic.Bool // the start-up scan runs

	writes, dropped, evicted, corrupt, hits, readBytes atomic.Uint64
}

// job is a block to write, or a barrier that Wait waits on.
type job struct {
	rec     *record
	barrier chan struct{}
}

// New opens (creating if needed) the tier in cfg.Dir and starts its writer
// and, in the background, the scan that indexes the records already there.
func New(cfg Config) (*Tier, error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("disktier: Config.Dir is required")
	case cfg.CapacityBytes <= 0:
		return nil, fmt.Errorf("disktier: Config.CapacityBytes must be positive, got %d", cfg.CapacityBytes)
	case cfg.Model == ModelFingerprint{}:
		return nil, errors.New("disktier: Config.Model is required")
	case cfg.TTL < 0 || cfg.QueueBlocks < 0 || cfg.ReadAheadBytes < 0:
		return nil, fmt.Errorf("disktier: Config.TTL (%v), QueueBlocks (%d) and ReadAheadBytes (%d) must not be negative",
			cfg.TTL, cfg.QueueBlocks, cfg.ReadAheadBytes)
	}
	if cfg.ReadAheadBytes == 0 {
		cfg.ReadAheadBytes = 64 << 20
	}
	if cfg.TTL == 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.QueueBlocks == 0 {
		cfg.QueueBlocks = 256
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("disktier: %w", err)
	}
	t := &Tier{cfg: cfg, pid: fmt.Sprintf(".tmp-%d-", os.Getpid()), queue: workq.New[job](cfg.QueueBlocks)}
	t.index.init()
	t.scan.Store(true)
	t.queue.Go(t.writer)
	t.queue.Go(t.scanDir)
	return t, nil
}

// Medium implements eviction.Tier.
func (t *Tier) Medium() kvcache.Tier { return kvcache.TierDisk }

// expiry is when a record of a block with TTL deadline expires, last used
// at lastUsed, leaves the tier.
func (t *Tier) expiry(expires, lastUsed int64) int64 {
	return max(expires, lastUsed+int64(t.cfg.TTL))
}

// Put implements eviction.Tier: it queues a copy of the block for the
// writer and returns at once; a full queue drops it (counted), as does a
// closed tier. The tier keeps its own TTL (Config.TTL), not ttl.
func (t *Tier) Put(ns string, fp kvcache.Fingerprint, tokens []int32, b eviction.StoredBlock, _ time.Duration) bool {
	if t.index.has(ns, fp, tokens, t.now()) {
		t.index.refresh(fp, t.expiry(b.Expires, b.LastUsed))
		return true
	}
	r := &record{model: t.cfg.Model, ns: ns, fp: fp, parent: b.Parent, expires: b.Expires, lastUsed: b.LastUsed,
		tokens: slices.Clone(tokens), data: slices.Clone(b.Data)}
	err := t.queue.TryPut(job{rec: r})
	if err == workq.ErrFull {
		t.dropped.Add(1)
	}
	return err == nil
}

// Save writes the block at once, without the queue, and returns when its
// record is in place: for a clean stop, which must not drop blocks. A
// block the tier holds already is only refreshed.
func (t *Tier) Save(ns string, fp kvcache.Fingerprint, tokens []int32, b eviction.StoredBlock) error {
	return t.write(&record{model: t.cfg.Model, ns: ns, fp: fp, parent: b.Parent, expires: b.Expires, lastUsed: b.LastUsed,
		tokens: tokens, data: b.Data})
}

// Has implements eviction.Tier from the index alone.
func (t *Tier) Has(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) bool {
	return t.index.has(ns, fp, tokens, now)
}

// Get implements eviction.Tier: it returns a block ReadAhead has read, or
// reads the record and checks all of it (see the package documentation).
// A record that fails is removed, counted as corrupt and logged, and the
// Get is a miss. The returned Data is the caller's.
func (t *Tier) Get(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) (eviction.StoredBlock, bool) {
	if !t.index.has(ns, fp, tokens, now) {
		return eviction.StoredBlock{}, false
	}
	if b, ok := t.ahead.take(ns, fp, tokens); ok {
		t.index.refresh(fp, t.expiry(b.Expires, now))
		return b, true
	}
	return t.read(ns, fp, tokens, now)
}

// ReadAhead reads and checks the block's record now, off the caller's
// critical path, and keeps it (within Config.ReadAheadBlocks) for the Get
// that will ask for it: the engine calls it when a request is submitted,
// so that its admission, on the scheduler goroutine, finds the block in
// memory. It reports whether the block was read.
func (t *Tier) ReadAhead(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) bool {
	if !t.index.has(ns, fp, tokens, now) {
		return false
	}
	if t.ahead.has(fp) {
		return true
	}
	b, ok := t.read(ns, fp, tokens, now)
	if ok {
		t.ahead.put(ns, fp, tokens, b, t.cfg.ReadAheadBytes)
	}
	return ok
}

// read reads and checks fp's record; see Get.
func (t *Tier) read(ns string, fp kvcache.Fingerprint, tokens []int32, now int64) (eviction.StoredBlock, bool) {
	path := t.path(fp)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.index.remove(fp) // removed under us (a flush, or by hand)
		return eviction.StoredBlock{}, false
	}
	if err == nil {
		var r record
		if r, err = parseRecord(b); err == nil {
			switch {
			case r.model != t.cfg.Model:
				err = fmt.Errorf("%w: another model's record under this one's name", ErrCorrupt)
			case r.fp != fp || r.ns != ns || !slices.Equal(r.tokens, tokens):
				err = fmt.Errorf("%w: the record holds another block", ErrCorrupt)
			}
		}
		if err == nil {
			t.index.refresh(fp, t.expiry(r.expires, now))
			t.hits.Add(1)
			t.readBytes.Add(uint64(len(b)))
			return eviction.StoredBlock{Data: r.data, Expires: r.expires, LastUsed: r.lastUsed, Parent: r.parent}, true
		}
	}
	t.discard(path, fp, err)
	return eviction.StoredBlock{}, false
}

// discard drops a record that failed a check or a read: it is counted,
// logged (once: the record is gone after) and removed.
func (t *Tier) discard(path string, fp kvcache.Fingerprint, err error) {
	if errors.Is(err, ErrCorrupt) {
		t.corrupt.Add(1)
	}
	t.cfg.Log.Warn("disk tier: dropping an unreadable record", "path", path, "err", err)
	if e := t.index.remove(fp); e != nil {
		t.notifyRemoved(e)
	}
	os.Remove(path)
}

// Delete implements eviction.Tier. A record stays after its block is
// promoted: it is what a restart recovers, and the budget's LRU order
// removes it when it is no longer used.
func (t *Tier) Delete(string, kvcache.Fingerprint, []int32) {}

// FlushNamespace implements eviction.Tier.
func (t *Tier) FlushNamespace(ns string) { t.flush(func(e *entry) bool { return e.ns == ns }) }

// Clear implements eviction.Tier.
func (t *Tier) Clear() { t.flush(func(*entry) bool { return true }) }

// flush removes the records drop selects.
func (t *Tier) flush(drop func(*entry) bool) {
	t.wmu.Lock() // no write lands in between
	defer t.wmu.Unlock()
	t.ahead.clear()
	for _, e := range t.index.removeIf(drop) {
		os.Remove(t.path(e.fp))
		t.notifyRemoved(e)
	}
}

// Wait implements eviction.Tier: it returns when every block queued
// before it is written (or failed).
func (t *Tier) Wait() {
	b := make(chan struct{})
	if t.queue.Put(job{barrier: b}) {
		<-b
	}
}

// Bytes implements eviction.Tier: the bytes of the records indexed.
func (t *Tier) Bytes() int64 { return t.index.stats().Bytes }

// Dropped implements eviction.Tier: records removed for the budget or
// their TTL.
func (t *Tier) Dropped() uint64 { return t.evicted.Load() }

// Stats returns the tier's state and running totals.
func (t *Tier) Stats() kvcache.TierStats {
	s := t.index.stats()
	s.Writes, s.Dropped, s.Evicted = t.writes.Load(), t.dropped.Load(), t.evicted.Load()
	s.Corrupt, s.Hits, s.ReadBytes = t.corrupt.Load(), t.hits.Load(), t.readBytes.Load()
	s.Scanning = t.scan.Load()
	return s
}

// WaitScan blocks until the start-up scan has indexed the directory.
func (t *Tier) WaitScan() {
	for t.scan.Load() {
		time.Sleep(time.Millisecond)
	}
}

// Close writes what is queued, stops the scan and the writer, and returns
// when they are done. Later Puts are dropped.
func (t *Tier) Close() error {
	t.queue.Close()
	return nil
}

// Check verifies the index: its LRU list holds every entry once, in both
// directions, and the byte count is the sum of the entries' sizes. Tests
// call it after every step; eviction.Manager.Check calls it too.
func (t *Tier) Check() error { return t.index.check() }

func (t *Tier) now() int64 { return t.cfg.Clock.Now().UnixNano() }

// path is where the record of fp lives.
func (t *Tier) path(fp kvcache.Fingerprint) string {
	return filepath.Join(t.cfg.Dir, fmt.Sprintf("%02x", fp.Lo>>56), fmt.Sprintf("%016x%016x.kv", fp.Lo, fp.Hi))
}

// writer drains the queue.
func (t *Tier) writer() {
	for j := range t.queue.Jobs() {
		if j.barrier != nil {
			close(j.barrier)
			continue
		}
		if err := t.write(j.rec); err != nil {
			t.cfg.Log.Warn("disk tier: write failed", "err", err)
		}
	}
}

// write puts r's record in place (a temporary file renamed over its name)
// and indexes it, then keeps the budget. A block already held is only
// refreshed.
func (t *Tier) write(r *record) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	now := t.now()
	exp := t.expiry(r.expires, r.lastUsed)
	if t.index.has(r.ns, r.fp, r.tokens, now) {
		t.index.refresh(r.fp, exp)
		return nil
	}
	path := t.path(r.fp)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	t.buf = appendRecord(t.buf[:0], r)
	f, err := os.CreateTemp(t.cfg.Dir, t.pid+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(t.buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	t.writes.Add(1)
	e := &entry{fp: r.fp, parent: r.parent, ns: r.ns, tokens: slices.Clone(r.tokens), expiry: exp, size: int64(len(t.buf))}
	if t.index.insert(e) && t.cfg.Observer != nil {
		t.cfg.Observer.TierStored(kvcache.TierDisk, e.ns, e.parent, e.fp, e.tokens)
	}
	t.keepBudget(now)
	return nil
}

// keepBudget removes expired records and then the least recently used
// until the tier is within its capacity. REQUIRES: wmu held.
func (t *Tier) keepBudget(now int64) {
	for _, e := range t.index.evict(t.cfg.CapacityBytes, now) {
		os.Remove(t.path(e.fp))
		t.evicted.Add(1)
		t.notifyRemoved(e)
	}
}

func (t *Tier) notifyRemoved(e *entry) {
	if t.cfg.Observer != nil {
		t.cfg.Observer.TierRemoved(kvcache.TierDisk, e.ns, e.fp)
	}
}
