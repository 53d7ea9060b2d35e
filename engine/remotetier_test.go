package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/internal/redistest"
	"github.com/prefixd/prefixd/remotetier"
)

// remoteReplica is an engine over its own remote tier on the store at url:
// one replica of a fleet.
func remoteReplica(t *testing.T, url string, mod func(*remotetier.Config)) (*Engine, *remotetier.Tier) {
	t.Helper()
	return remoteReplicaOf(t, newHashModel(testVocab, 512), url, mod)
}

// remoteReplicaOf is remoteReplica on the model m.
func remoteReplicaOf(t *testing.T, m *hashModel, url string, mod func(*remotetier.Config)) (*Engine, *remotetier.Tier) {
	t.Helper()
	kv, err := m.NewKV(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := remotetier.Config{URL: url, Model: disktier.ModelFingerprint{42}, BlockTokens: 4, BlockBytes: kv.BlockBytes(),
		BreakerBackoff: time.Hour}
	if mod != nil {
		mod(&cfg)
	}
	r, err := remotetier.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e := newTestEngine(t, m, func(c *Config) {
		c.EOS, c.NumBlocks, c.BlockSize, c.MaxRunning, c.MaxBatchTokens, c.PrefillChunk = -1, 64, 4, 8, 64, 16
		c.RemoteTier = r
	})
	return e, r
}

// TestRemoteTierSharesPrefixes: two replicas share one store. The second
// replica's prompt, which continues the first's, takes the shared prefix
// from the store (counted as remote hits, computed once in the fleet) and
// answers as a replica without the tier does: the model's outputs depend
// on every K/V byte. Another namespace gets nothing from it. Then the
// store is killed: answers stay the same, the breaker opens, and from
// then on requests go nowhere near the network.
func TestRemoteTierSharesPrefixes(t *testing.T) {
	s := redistest.Start(t)
	a, ra := remoteReplica(t, s.URL(0), nil)
	b, rb := remoteReplica(t, s.URL(0), nil)
	plain := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) {
		c.EOS, c.NumBlocks, c.BlockSize, c.MaxRunning, c.MaxBatchTokens, c.PrefillChunk = -1, 64, 4, 8, 64, 16
	})
	shared := prompt(5, 40)
	req := func(ns string, own int) Request {
		return Request{Namespace: ns, Prompt: append(slices.Clone(shared), prompt(own, 6)...), MaxTokens: 4, IgnoreEOS: true}
	}

	first := run(t, a, req("acme", 1))
	ra.Wait()
	if st := ra.Stats(); st.Writes < 10 {
		t.Fatalf("the first replica wrote %d blocks, want its 10-block prefix at least", st.Writes)
	}
	if want := run(t, plain, req("acme", 1)); !slices.Equal(first.Tokens, want.Tokens) {
		t.Fatalf("replica with the tier %v, without %v", first.Tokens, want.Tokens)
	}

	second := run(t, b, req("acme", 2))
	st := b.Stats()
	if st.CacheHitRemote != 40 || second.Usage.CachedTokens != 40 || st.PrefillTokens != 6 {
		t.Fatalf("second replica: %d remote-hit tokens, %d cached, %d computed; want 40, 40, 6 (remote %+v)",
			st.CacheHitRemote, second.Usage.CachedTokens, st.PrefillTokens, st.Remote)
	}
	if st.Remote.HitTokens != 40 || st.Remote.Fetches != 1 {
		t.Fatalf("remote stats %+v", st.Remote)
	}
	if want := run(t, plain, req("acme", 2)); !slices.Equal(second.Tokens, want.Tokens) {
		t.Fatalf("from the store %v, computed %v", second.Tokens, want.Tokens)
	}

	other := run(t, b, req("globex", 3))
	if st := b.Stats(); st.CacheHitRemote != 40 || other.Usage.CachedTokens != 0 {
		t.Fatalf("another namespace took %d tokens (%d remote hits in all)", other.Usage.CachedTokens, st.CacheHitRemote)
	}

	s.Kill()
	errs := func() uint64 { e := rb.Stats().Errors; return e.Timeout + e.Connection + e.Other }
	for i := range 8 {
		if i == 4 {
			rb.Wait()
			if st := rb.Stats(); st.Breaker != "open" || st.BreakerOpened != 1 {
				t.Fatalf("with the store dead: %+v", st)
			}
		}
		before := errs()
		r := req("acme", 10+i)
		r.Prompt = append(prompt(100+i, 40), prompt(10+i, 6)...) // nothing cached anywhere
		got, want := run(t, b, r), run(t, plain, r)
		if !slices.Equal(got.Tokens, want.Tokens) || got.Finish != want.Finish {
			t.Fatalf("request %d with the store dead: %v (%s), without the tier %v", i, got.Tokens, got.Finish, want.Tokens)
		}
		if rb.Wait(); i >= 4 && errs() != before {
			t.Fatalf("request %d reached the dead store with the breaker open", i)
		}
	}
}

// TestRemoteTierLeaseComputesOnce: a request that reaches a second replica
// while the first is still computing the prefix it shares waits for the
// first's blocks (the fleet's lease) instead of computing them too, and
// answers as a replica without the tier does; the first releases its
// lease once its prompt is computed.
func TestRemoteTierLeaseComputesOnce(t *testing.T) {
	s := redistest.Start(t)
	slow := newHashModel(testVocab, 512)
	a, ra := remoteReplicaOf(t, slow, s.URL(0), nil)
	b, rb := remoteReplica(t, s.URL(0), nil)
	plain := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) {
		c.EOS, c.NumBlocks, c.BlockSize, c.MaxRunning, c.MaxBatchTokens, c.PrefillChunk = -1, 64, 4, 8, 64, 16
	})
	shared := prompt(5, 40)
	req := func(own int) Request {
		return Request{Namespace: "acme", Prompt: append(slices.Clone(shared), prompt(own, 6)...), MaxTokens: 4, IgnoreEOS: true}
	}
	slow.gate = make(chan struct{})
	first, err := a.Submit(context.Background(), req(1))
	if err != nil {
		t.Fatal(err)
	}
	slow.gate <- struct{}{} // a has its lease and computes its first chunk
	got := make(chan Result, 1)
	go func() { got <- run(t, b, req(2)) }()
	for deadline := time.Now().Add(10 * time.Second); rb.Stats().LeasesFollowed == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the second replica did not follow the lease: %+v", rb.Stats())
		}
	}
	close(slow.gate)
	if res := first.Result(); res.Err != nil {
		t.Fatal(res.Err)
	}
	second := <-got
	st := b.Stats()
	if st.PrefillTokens != 6 || st.CacheHitRemote != 40 || second.Usage.CachedTokens != 40 {
		t.Fatalf("second replica computed %d tokens, %d remote hits, %d cached; want 6, 40, 40 (remote %+v)",
			st.PrefillTokens, st.CacheHitRemote, second.Usage.CachedTokens, st.Remote)
	}
	if want := run(t, plain, req(2)); !slices.Equal(second.Tokens, want.Tokens) {
		t.Fatalf("after waiting for the lease %v, computed %v", second.Tokens, want.Tokens)
	}
	if ra.Stats().LeasesLed != 1 || rb.Stats().LeaseWaitsGivenUp != 0 {
		t.Fatalf("leader %+v, follower %+v", ra.Stats(), rb.Stats())
	}
	ra.Wait()
	rb.Wait()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	if keys := c.Keys(context.Background(), "*:computing").Val(); len(keys) != 0 {
		t.Fatalf("%d leases left in the store after the prompts were computed", len(keys))
	}
}

// TestRemoteTierOneFetchPerPrefix: requests that reach a replica together
// for a prefix the store holds are fetched for once: the others wait for
// that fetch, whose blocks the first promotes, and find them cached.
func TestRemoteTierOneFetchPerPrefix(t *testing.T) {
	s := redistest.Start(t)
	a, ra := remoteReplica(t, s.URL(0), nil)
	b, rb := remoteReplica(t, s.URL(0), nil)
	shared := prompt(5, 40)
	req := func(own int) Request {
		return Request{Namespace: "acme", Prompt: append(slices.Clone(shared), prompt(own, 6)...), MaxTokens: 2, IgnoreEOS: true}
	}
	run(t, a, req(1))
	ra.Wait()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	// Hold the store's answers, so every request is submitted while the
	// first one's fetch is in flight.
	if err := c.ClientPause(context.Background(), 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	var streams []*Stream
	for i := range 4 {
		st, err := b.Submit(context.Background(), req(10+i))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for i, st := range streams {
		if res := st.Result(); res.Err != nil || res.Usage.CachedTokens != 40 {
			t.Fatalf("request %d: %v, %d cached, want 40", i, res.Err, res.Usage.CachedTokens)
		}
	}
	if st := rb.Stats(); st.Fetches != 1 || b.Stats().CacheHitRemote != 40 {
		t.Fatalf("%d fetches, %d remote hits; want 1 and 40 (remote %+v)", st.Fetches, b.Stats().CacheHitRemote, st)
	}
}
