package remotetier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// Fetch stages, for Get, the blocks of namespace ns's prompt tokens from
// block have on (the first have whole blocks are cached locally) that the
// store holds in an unbroken run, when fetching them beats recomputing
// them. It looks the run up in one pipelined round trip (STRLEN of every
// block's key), decides by the rule (see Estimates.Fetch, on the measured
// round trip, bandwidth and prefill rate), then transfers the run in a
// second pipelined round trip and verifies every value (see verify); the
// run ends at the first block missing or failing. The lookup ends at
// ctx's deadline, Config.MaxFetchWait, or the estimated time to recompute
// the tokens, whichever is first; the transfer at ctx's deadline or the
// estimated time to recompute the run (see transferWait).
//
// When the store misses part of the chain, Fetch first takes or follows
// the fleet's lease on computing it (unless Config.NoLease): if no replica
// holds the lease, this caller takes it, and release, not nil, is what it
// must call once it has computed those blocks and offered them to the
// tier (or has given up on them); if another replica holds it, Fetch
// waits, at most Config.MaxLeaseWait, for that replica to write the
// blocks or to release or lose the lease, and fetches what it wrote. So
// requests that arrive while a prefix is being computed elsewhere compute
// it once in the fleet. It returns the blocks staged and that release. It blocks on the
// network: callers run it off the scheduler goroutine, before admission.
// Failures only make it stage less (and take no lease).
func (t *Tier) Fetch(ctx context.Context, ns string, tokens []int32, have int) (int, func()) {
	var release func()
	bs := t.cfg.BlockTokens
	n := len(tokens) / bs
	if n <= have {
		return 0, nil
	}
	want := (n - have) * bs
	t.m.lookupTokens.Add(uint64(want))
	est := t.est.get()
	valueSize := int64(disktier.RecordSize(32, bs, t.cfg.BlockBytes))
	if !est.Fetch(want, int64(n-have)*valueSize) {
		t.m.skippedTokens.Add(uint64(want)) // even all of it would not pay: no round trip
		return 0, nil
	}
	if !t.br.allow() {
		t.m.breakerTokens.Add(uint64(want))
		return 0, nil
	}
	wait := t.cfg.MaxFetchWait
	if r := est.RecomputeTime(want); r > 0 {
		wait = min(wait, r)
	}
	start := time.Now()
	nsHash := NamespaceHash(ns)
	salt := kvcache.NamespaceSalt(ns)
	fps := kvcache.AppendChain(make([]kvcache.Fingerprint, 0, n), kvcache.Fingerprint{}, salt, tokens[:n*bs], bs)
	keys := make([]string, 0, n-have)
	for _, fp := range fps[have:] {
		keys = append(keys, t.key(nsHash, fp))
	}

	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	lens := make([]*redis.IntCmd, len(keys))
	_, err := t.client.Pipelined(lctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			lens[i] = p.StrLen(lctx, k)
		}
		return nil
	})
	if err != nil {
		t.m.missTokens.Add(uint64(want))
		t.fail(err)
		return 0, nil
	}
	rtt := time.Since(start)
	t.br.success()
	t.est.roundTrip(rtt)
	run, bytes := 0, int64(0)
	for _, c := range lens {
		if c.Val() == 0 {
			break
		}
		run++
		bytes += c.Val()
	}
	if run < len(keys) && !t.cfg.NoLease {
		found := run
		run, release = t.lease(ctx, nsHash, fps[have:], keys, run)
		bytes += int64(run-found) * valueSize
	}
	t.m.missTokens.Add(uint64((len(keys) - run) * bs))
	if run == 0 {
		return 0, release
	}
	if est = t.est.get(); !est.Fetch(run*bs, bytes) {
		t.m.skippedTokens.Add(uint64(run * bs))
		return 0, release
	}

	gctx, cancel := context.WithTimeout(ctx, t.transferWait(est, run*bs, bytes))
	defer cancel()
	t.m.fetches.Add(1)
	getStart := time.Now()
	vals := make([]*redis.StringCmd, run)
	_, err = t.client.Pipelined(gctx, func(p redis.Pipeliner) error {
		for i, k := range keys[:run] {
			vals[i] = p.Get(gctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		t.m.missTokens.Add(uint64(run * bs))
		t.fail(err)
		return 0, release
	}
	t.br.success()
	got := int64(0)
	for _, v := range vals {
		got += int64(len(v.Val()))
	}
	t.est.transfer(got, time.Since(getStart))
	t.m.bytesIn.Add(uint64(got))
	t.m.observeFetch(time.Since(start))
	now := t.cfg.Clock.Now().UnixNano()
	for i, v := range vals {
		b := have + i
		blk := tokens[b*bs : (b+1)*bs]
		var parent kvcache.Fingerprint
		if b > 0 {
			parent = fps[b-1]
		}
		sb, err := t.verify([]byte(v.Val()), nsHash, fps[b], parent, blk)
		if err != nil {
			// A missing value (expired between the round trips) is a
			// miss; one that fails verification is counted as corrupt
			// and deleted, so a writer's SET NX can replace it.
			if !errors.Is(v.Err(), redis.Nil) {
				t.m.errors[ErrCorrupt].Add(1)
				t.cfg.Log.Warn("remote tier: a value failed verification; deleting it", "err", err)
				t.client.Unlink(gctx, keys[i])
			}
			t.m.missTokens.Add(uint64((run - i) * bs))
			return i, release
		}
		t.known.add(fps[b], now+int64(t.cfg.TTL/2))
		t.stage.put(&staged{ns: ns, fp: fps[b], tokens: slices.Clone(blk), block: sb})
	}
	return run, release
}

// minBandwidth is the least bandwidth, in bytes per second, that a
// transfer is given time for while the prefill rate is unmeasured: a
// replica that just joined, whose fellows may all be fetching at once.
const minBandwidth = 25e6

// transferWait is how long the transfer of bytes holding tokens may take:
// as long as computing the tokens would (fetching longer never pays),
// and while the prefill rate is unmeasured Config.MaxFetchWait plus the
// bytes at minBandwidth.
func (t *Tier) transferWait(est Estimates, tokens int, bytes int64) time.Duration {
	if r := est.RecomputeTime(tokens); r > 0 {
		return r
	}
	return t.cfg.MaxFetchWait + time.Duration(float64(bytes)/minBandwidth*float64(time.Second))
}

// verify parses a value as a record and checks that it is the block asked
// for, under this tier's model and layout: the record's own checks (magic,
// version, lengths, CRCs), then the model fingerprint, the namespace hash,
// the fingerprint, the parent, every token ID and the K/V size. An error
// wraps disktier.ErrCorrupt. The block's Data aliases v.
func (t *Tier) verify(v []byte, nsHash string, fp, parent kvcache.Fingerprint, tokens []int32) (eviction.StoredBlock, error) {
	r, err := disktier.ParseRecord(v)
	if err != nil {
		return eviction.StoredBlock{}, err
	}
	var why string
	switch {
	case r.Model != t.cfg.Model:
		why = "another model's value"
	case r.Namespace != nsHash || r.FP != fp || r.Parent != parent:
		why = "another block's value"
	case !slices.Equal(r.Tokens, tokens):
		why = "another block's token IDs"
	case len(r.Data) != t.cfg.BlockBytes:
		why = fmt.Sprintf("%d K/V bytes, want %d", len(r.Data), t.cfg.BlockBytes)
	default:
		return eviction.StoredBlock{Data: r.Data, Expires: r.Expires, LastUsed: r.LastUsed, Parent: r.Parent}, nil
	}
	return eviction.StoredBlock{}, fmt.Errorf("%w: %s", disktier.ErrCorrupt, why)
}

// ObservePrefill reports a forward pass that computed tokens prompt tokens
// in d: the prefill rate the fetch rule compares with.
func (t *Tier) ObservePrefill(tokens int, d time.Duration) { t.est.prefill(tokens, d) }

// SetEstimates replaces the fetch rule's measurements (later measurements
// update them again): for tests and benchmarks that inject them.
func (t *Tier) SetEstimates(e Estimates) { t.est.set(e) }

// Estimates returns the fetch rule's current measurements.
func (t *Tier) Estimates() Estimates { return t.est.get() }
