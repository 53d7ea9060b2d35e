package remotetier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/internal/workq"
	"github.com/prefixd/prefixd/kvcache"
)

var quietClient sync.Once

// keyPrefix starts every key; its number changes with the key or value
// format, so a new format never reads an old one's values.
const keyPrefix = "pfxkv:1:"

// Tier is the remote tier: an eviction.Tier over a Redis or Valkey store
// that replicas share. See the package documentation. It is safe for
// concurrent use.
type Tier struct {
	cfg    Config
	client *redis.Client
	model  string // the model part of every key: hex of half the fingerprint
	est    estimator
	br     breaker
	stage  stage
	known  known // blocks this process wrote or fetched, so not written again

	id       string        // this tier's identity in lease tokens: random
	leaseSeq atomic.Uint64 // leases this tier has taken
	held     heldLeases    // for the renewer

	queue *workq.Queue[job] // the writer's jobs; the renewer watches its Stop

	m counters
}

// job is a block to write, a namespace to delete, leases to release (with
// their token as value) or a barrier Wait waits on. Jobs run in the
// order queued, so a lease is released after the blocks its holder
// offered before.
type job struct {
	key     string
	value   []byte
	ttl     time.Duration
	fp      kvcache.Fingerprint
	ns      string // a namespace to delete, when flush
	flush   bool
	release bool
	leases  []string
	barrier chan struct{}
}

// New connects to the store named by cfg.URL (lazily: a store that is down
// makes fetches miss, not New fail) and starts the writer. It turns off
// go-redis's process-wide logging, which would print every failed dial:
// the tier counts its errors by kind and logs through Config.Log.
func New(cfg Config) (*Tier, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	quietClient.Do(logging.Disable)
	opt, err := cfg.clientOptions()
	if err != nil {
		return nil, err
	}
	t := &Tier{cfg: cfg, client: redis.NewClient(opt), model: hex.EncodeToString(cfg.Model[:16]),
		queue: workq.New[job](cfg.QueueBlocks), id: randomID()}
	t.br = breaker{clk: cfg.Clock, threshold: cfg.BreakerFailures, minBackoff: cfg.BreakerBackoff, maxBackoff: cfg.BreakerMaxBackoff}
	t.stage.init(cfg.StageBytes)
	t.known.init(1 << 16)
	t.m.init()
	t.queue.Go(t.writer)
	t.queue.Go(func() { t.renewer(t.queue.Stop()) })
	return t, nil
}

// NamespaceHash is what keys and values carry instead of a namespace: the
// store never sees a tenant's name, and a tenant's keys are never another's.
func NamespaceHash(ns string) string {
	h := sha256.Sum256([]byte(ns))
	return hex.EncodeToString(h[:16])
}

// key is the store's key of the block fp of namespace ns.
func (t *Tier) key(nsHash string, fp kvcache.Fingerprint) string {
	return fmt.Sprintf("%s%s:%s:%016x%016x", keyPrefix, t.model, nsHash, fp.Lo, fp.Hi)
}

// nsPattern matches every key of the namespace with hash nsHash.
func (t *Tier) nsPattern(nsHash string) string { return keyPrefix + t.model + ":" + nsHash + ":*" }

// Medium implements eviction.Tier.
func (t *Tier) Medium() kvcache.Tier { return kvcache.TierRemote }

// Put implements eviction.Tier: it encodes the block as a record and
// queues it for the writer, which stores it with SET NX and an expiry of
// at least Config.TTL (longer if the block's TTL deadline is later). It
// never waits: a full queue, or an open breaker, drops the block
// (counted). A block this process wrote or fetched recently is not
// written again.
func (t *Tier) Put(ns string, fp kvcache.Fingerprint, tokens []int32, b eviction.StoredBlock, _ time.Duration) bool {
	if len(tokens) != t.cfg.BlockTokens || len(b.Data) != t.cfg.BlockBytes {
		return false
	}
	now := t.cfg.Clock.Now().UnixNano()
	if t.known.has(fp, now) {
		return true
	}
	ttl := max(t.cfg.TTL, time.Duration(b.Expires-now))
	nsHash := NamespaceHash(ns)
	if t.queue.Full() { // checked before encoding a block that would be dropped
		t.m.dropped.Add(1)
		return false
	}
	value := disktier.AppendRecord(make([]byte, 0, disktier.RecordSize(len(nsHash), len(tokens), len(b.Data))),
		&disktier.Record{Model: t.cfg.Model, Namespace: nsHash, FP: fp, Parent: b.Parent,
			Expires: b.Expires, LastUsed: b.LastUsed, Tokens: tokens, Data: b.Data})
	err := t.queue.TryPut(job{key: t.key(nsHash, fp), value: value, ttl: ttl, fp: fp})
	if err == workq.ErrFull {
		t.m.dropped.Add(1)
	}
	return err == nil
}

// Has implements eviction.Tier: whether a fetch staged the block.
func (t *Tier) Has(ns string, fp kvcache.Fingerprint, tokens []int32, _ int64) bool {
	_, ok := t.stage.get(ns, fp, tokens)
	return ok
}

// Get implements eviction.Tier: it returns a block a fetch staged (and
// verified). It never touches the network: Fetch does, before admission.
func (t *Tier) Get(ns string, fp kvcache.Fingerprint, tokens []int32, _ int64) (eviction.StoredBlock, bool) {
	b, ok := t.stage.get(ns, fp, tokens)
	if ok {
		t.m.hitTokens.Add(uint64(len(tokens)))
	}
	return b, ok
}

// Delete implements eviction.Tier: the block leaves the staging area (it
// was promoted). The store keeps it for other replicas.
func (t *Tier) Delete(ns string, fp kvcache.Fingerprint, tokens []int32) {
	t.stage.remove(ns, fp, tokens)
}

// FlushNamespace implements eviction.Tier: the namespace's staged blocks
// are dropped here and its keys deleted from the store, asynchronously,
// by the writer (a write queued around it may land after). It never waits
// for room in the queue: the scheduler calls it.
func (t *Tier) FlushNamespace(ns string) {
	t.stage.removeIf(func(e *staged) bool { return e.ns == ns })
	t.known.clear()
	t.enqueueSoon(job{ns: ns, flush: true})
}

// Clear implements eviction.Tier for this process: it drops the staged
// blocks and forgets what it wrote. The store is shared, so its keys stay
// until they expire; FlushNamespace deletes a namespace's.
func (t *Tier) Clear() {
	t.stage.removeIf(func(*staged) bool { return true })
	t.known.clear()
}

// enqueueSoon queues a job that must not be dropped without waiting: now
// if the queue has room (so it keeps its order after what was queued
// before), else from a goroutine that waits for room.
func (t *Tier) enqueueSoon(j job) {
	if t.queue.TryPut(j) == workq.ErrFull {
		go t.queue.Put(j)
	}
}

// Wait implements eviction.Tier: it returns when every block queued before
// it has been written (or failed).
func (t *Tier) Wait() {
	b := make(chan struct{})
	if t.queue.Put(job{barrier: b}) {
		<-b
	}
}

// Bytes implements eviction.Tier: the K/V bytes staged in this process.
func (t *Tier) Bytes() int64 { return t.stage.bytes() }

// Dropped implements eviction.Tier: staged blocks dropped for the staging
// budget.
func (t *Tier) Dropped() uint64 { return t.stage.dropped.Load() }

// Check verifies the staging area (see stage.check); eviction.Manager.Check
// calls it, so engine tests built with -tags invariants run it after every
// scheduler step.
func (t *Tier) Check() error { return t.stage.check() }

// Close writes what is queued, stops the writer and closes the client.
func (t *Tier) Close() error {
	t.queue.Close()
	return t.client.Close()
}

// writer drains the queue, writing the blocks waiting in one pipeline.
func (t *Tier) writer() {
	batch := make([]job, 0, 32)
	for j := range t.queue.Jobs() {
		batch = append(batch[:0], j)
	more:
		for len(batch) < cap(batch) {
			select {
			case j, ok := <-t.queue.Jobs():
				if !ok {
					break more
				}
				batch = append(batch, j)
			default:
				break more
			}
		}
		t.write(batch)
		clear(batch)
	}
}

// write stores a batch of jobs: blocks in one pipeline of SET NX with
// expiry, namespace deletions by SCAN and UNLINK, lease releases by a
// compare-and-delete script; each after the writes before it.
func (t *Tier) write(batch []job) {
	var blocks []job
	for _, j := range batch {
		switch {
		case j.barrier != nil:
			t.writeBlocks(blocks)
			blocks = blocks[:0]
			close(j.barrier)
		case j.flush:
			t.writeBlocks(blocks)
			blocks = blocks[:0]
			t.deleteNamespace(j.ns)
		case j.release:
			t.writeBlocks(blocks)
			blocks = blocks[:0]
			t.release(j.leases, string(j.value))
		default:
			blocks = append(blocks, j)
		}
	}
	t.writeBlocks(blocks)
}

func (t *Tier) writeBlocks(blocks []job) {
	if len(blocks) == 0 {
		return
	}
	if !t.br.allow() {
		t.m.breakerSkips.Add(uint64(len(blocks)))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.WriteTimeout)
	defer cancel()
	cmds := make([]*redis.BoolCmd, len(blocks))
	_, err := t.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, j := range blocks {
			cmds[i] = p.SetNX(ctx, j.key, j.value, j.ttl)
		}
		return nil
	})
	if err != nil {
		t.fail(err)
		return
	}
	t.br.success()
	now := t.cfg.Clock.Now().UnixNano()
	for i, j := range blocks {
		t.known.add(j.fp, now+int64(j.ttl/2))
		if !cmds[i].Val() {
			continue // another replica wrote it first: SET NX keeps theirs
		}
		t.m.writes.Add(1)
		t.m.bytesOut.Add(uint64(len(j.value)))
	}
}

// deleteNamespace unlinks every key of ns's blocks under this model.
func (t *Tier) deleteNamespace(ns string) {
	if !t.br.allow() {
		t.m.breakerSkips.Add(1)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*t.cfg.WriteTimeout)
	defer cancel()
	it := t.client.Scan(ctx, 0, t.nsPattern(NamespaceHash(ns)), 512).Iterator()
	var keys []string
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		err := t.client.Unlink(ctx, keys...).Err()
		keys = keys[:0]
		return err
	}
	var err error
	for err == nil && it.Next(ctx) {
		if keys = append(keys, it.Val()); len(keys) == 512 {
			err = flush()
		}
	}
	if err == nil {
		err = it.Err()
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		t.fail(err)
		return
	}
	t.br.success()
}

// fail counts a store error by kind and reports it to the breaker. A
// failed TLS handshake is logged as a warning: it is configuration, not
// weather, and the breaker keeps such lines few.
func (t *Tier) fail(err error) {
	k := errorKind(err)
	t.m.errors[k].Add(1)
	t.br.failure()
	if k == ErrTLS {
		t.cfg.Log.Warn("remote tier: "+describe(err).Error(), "kind", k.String())
		return
	}
	t.cfg.Log.Debug("remote tier: store error", "kind", k.String(), "err", err)
}

// Ping asks the store for a PONG once, within Config.MaxFetchWait, for a
// start-up check: its error says what is wrong in words an operator can
// act on. It does not count toward the breaker.
func (t *Tier) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.MaxFetchWait)
	defer cancel()
	if err := t.client.Ping(ctx).Err(); err != nil {
		return describe(err)
	}
	return nil
}

// describe wraps a store error with what it means for the operator.
func describe(err error) error {
	if errorKind(err) == ErrTLS {
		return fmt.Errorf("remotetier: the TLS handshake with the store failed: a rediss:// store needs a certificate for the URL's host that chains to --remote-tier-ca (or the system's CAs): %w", err)
	}
	return fmt.Errorf("remotetier: the store does not answer (requests compute their prompts until it does): %w", err)
}
