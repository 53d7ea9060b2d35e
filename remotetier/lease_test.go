package remotetier

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/internal/redistest"
	"github.com/prefixd/prefixd/kvcache"
)

// fetchAsync runs tr.Fetch on a goroutine; the channel gets the blocks it
// staged (any lease it took is ended at once).
func fetchAsync(tr *Tier, ns string, tokens []int32) <-chan int {
	c := make(chan int, 1)
	go func() { c <- fetched(tr, ns, tokens, 0) }()
	return c
}

// waitFor polls cond until it holds, failing t after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// leaseHeld reports whether the store holds a lease on ns's chain from its
// first block of tokens.
func leaseHeld(t *testing.T, s *redistest.Server, tr *Tier, ns string, tokens []int32) bool {
	fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens[:testBlockTokens], testBlockTokens)
	return rawClient(t, s).Exists(bg, tr.leaseKey(NamespaceHash(ns), fps[0])).Val() == 1
}

// TestLeaseComputesOnce: a replica that misses a chain while another is
// computing it waits for that one's blocks instead of computing them too,
// whether it arrives before the first block is written or after some
// are, and fetches them all once the holder has written them.
func TestLeaseComputesOnce(t *testing.T) {
	s := redistest.Start(t)
	a, b, c := newTier(t, s.URL(0), nil), newTier(t, s.URL(0), nil), newTier(t, s.URL(0), nil)
	ns, tokens := "acme", prompt(1, 5)
	n, release := a.Fetch(bg, ns, tokens, 0)
	if n != 0 || release == nil || a.Stats().LeasesLed != 1 {
		t.Fatalf("the first replica staged %d, lease %v, stats %+v; want 0 and the lease", n, release != nil, a.Stats())
	}
	early := fetchAsync(b, ns, tokens)
	waitFor(t, "the second replica to follow the lease", func() bool { return b.Stats().LeasesFollowed == 1 })
	putPrompt(t, a, ns, tokens[:2*testBlockTokens]) // a computes the chain and writes it through
	late := fetchAsync(c, ns, tokens)
	waitFor(t, "the third replica to follow the lease", func() bool { return c.Stats().LeasesFollowed == 1 })
	putPrompt(t, a, ns, tokens)
	release()
	for name, got := range map[string]<-chan int{"early": early, "late": late} {
		if n := <-got; n != 5 {
			t.Fatalf("the %s follower staged %d blocks, want the 5 the leader wrote", name, n)
		}
	}
	for _, f := range []*Tier{b, c} {
		if st := f.Stats(); st.LeasesLed != 0 || st.LeaseWaitsGivenUp != 0 || st.MissTokens != 0 {
			t.Fatalf("follower stats %+v", st)
		}
	}
	a.Wait()
	if leaseHeld(t, s, a, ns, tokens) {
		t.Fatal("the released lease is still in the store")
	}
}

// TestLeaseHolderDies: a holder that dies after writing part of the chain
// keeps its followers waiting only until its lease expires; they fetch
// what it wrote.
func TestLeaseHolderDies(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), func(c *Config) { c.LeaseTTL = 300 * time.Millisecond })
	b := newTier(t, s.URL(0), nil)
	ns, tokens := "acme", prompt(1, 5)
	if _, release := a.Fetch(bg, ns, tokens, 0); release == nil {
		t.Fatal("no lease taken")
	}
	got := fetchAsync(b, ns, tokens)
	putPrompt(t, a, ns, tokens[:2*testBlockTokens])
	a.Close() // dies holding the lease: nobody renews it
	if n := <-got; n != 2 {
		t.Fatalf("the follower staged %d blocks, want the 2 written", n)
	}
	if st := b.Stats(); st.LeasesFollowed != 1 || st.LeaseWaitsGivenUp != 0 {
		t.Fatalf("follower stats %+v: want it to end at the lease's expiry", st)
	}
}

// TestLeaseWaitBounded: a follower waits at most its MaxLeaseWait, then
// computes what is missing (counted as given up); the holder's lease is
// untouched.
func TestLeaseWaitBounded(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), func(c *Config) { c.MaxLeaseWait = time.Hour })
	b := newTier(t, s.URL(0), func(c *Config) { c.MaxLeaseWait = 100 * time.Millisecond })
	ns, tokens := "acme", prompt(1, 5)
	_, release := a.Fetch(bg, ns, tokens, 0)
	defer release()
	if n := fetched(b, ns, tokens, 0); n != 0 {
		t.Fatalf("staged %d blocks of a chain nobody wrote", n)
	}
	if st := b.Stats(); st.LeasesFollowed != 1 || st.LeaseWaitsGivenUp != 1 {
		t.Fatalf("follower stats %+v", st)
	}
	if !leaseHeld(t, s, a, ns, tokens) {
		t.Fatal("the holder's lease is gone")
	}
}

// TestLeaseTenantsSeparate: a tenant never waits on another's lease, even
// for the same tokens.
func TestLeaseTenantsSeparate(t *testing.T) {
	s := redistest.Start(t)
	a, b := newTier(t, s.URL(0), nil), newTier(t, s.URL(0), nil)
	tokens := prompt(1, 5)
	_, release := a.Fetch(bg, "alice", tokens, 0)
	defer release()
	n, other := b.Fetch(bg, "bob", tokens, 0)
	if n != 0 || other == nil {
		t.Fatalf("bob staged %d, lease %v: want his own lease", n, other != nil)
	}
	other()
	if st := b.Stats(); st.LeasesLed != 1 || st.LeasesFollowed != 0 {
		t.Fatalf("bob's stats %+v", st)
	}
}

// TestLeaseReleaseOnlyOwn: a holder whose lease was lost (the store
// evicted it) and taken by another replica neither renews nor, releasing
// late, ends the new holder's.
func TestLeaseReleaseOnlyOwn(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), func(c *Config) { c.LeaseTTL = 150 * time.Millisecond })
	c := newTier(t, s.URL(0), func(c *Config) { c.LeaseTTL = time.Hour })
	ns, tokens := "acme", prompt(1, 5)
	_, late := a.Fetch(bg, ns, tokens, 0)
	fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens[:testBlockTokens], testBlockTokens)
	key := a.leaseKey(NamespaceHash(ns), fps[0])
	raw := rawClient(t, s)
	raw.Del(bg, key)
	_, release := c.Fetch(bg, ns, tokens, 0)
	if release == nil {
		t.Fatal("the lost lease was not taken again")
	}
	defer release()
	time.Sleep(200 * time.Millisecond) // a's renewer runs
	if ttl := raw.PTTL(bg, key).Val(); ttl < time.Minute {
		t.Fatalf("the new holder's lease expires in %v: the old holder renewed it", ttl)
	}
	late()
	a.Wait()
	if !leaseHeld(t, s, a, ns, tokens) {
		t.Fatal("a late release ended another replica's lease")
	}
}

// TestLeaseRenewed: a holder slower than its lease's TTL keeps it (its
// tier renews it), and its follower keeps waiting until it releases.
func TestLeaseRenewed(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), func(c *Config) { c.LeaseTTL = 100 * time.Millisecond })
	b := newTier(t, s.URL(0), nil)
	ns, tokens := "acme", prompt(1, 5)
	_, release := a.Fetch(bg, ns, tokens, 0)
	got := fetchAsync(b, ns, tokens)
	time.Sleep(500 * time.Millisecond) // five TTLs
	if !leaseHeld(t, s, a, ns, tokens) {
		t.Fatal("the lease expired while its holder lived")
	}
	select {
	case n := <-got:
		t.Fatalf("the follower stopped waiting (staged %d) while the holder lived", n)
	default:
	}
	putPrompt(t, a, ns, tokens)
	release()
	if n := <-got; n != 5 {
		t.Fatalf("the follower staged %d blocks, want 5", n)
	}
}

// TestLeaseOneLeader: of replicas that miss a chain at once, exactly one
// leads (the lease is taken atomically), and every other fetches what it
// wrote.
func TestLeaseOneLeader(t *testing.T) {
	s := redistest.Start(t)
	ns, tokens := "acme", prompt(1, 30)
	type result struct {
		tr      *Tier
		n       int
		release func()
	}
	const replicas = 8
	results := make(chan result, replicas)
	var tiers []*Tier
	for range replicas {
		tr := newTier(t, s.URL(0), nil)
		tiers = append(tiers, tr)
		go func() {
			n, release := tr.Fetch(bg, ns, tokens, 0)
			results <- result{tr, n, release}
		}()
	}
	leader := <-results
	if leader.release == nil {
		t.Fatalf("the first fetch to return staged %d and took no lease", leader.n)
	}
	waitFor(t, "every replica to lead or follow", func() bool {
		led, followed := uint64(0), uint64(0)
		for _, tr := range tiers {
			led, followed = led+tr.Stats().LeasesLed, followed+tr.Stats().LeasesFollowed
		}
		if led > 1 {
			t.Fatalf("%d replicas lead", led)
		}
		return led+followed == replicas
	})
	putPrompt(t, leader.tr, ns, tokens)
	leader.release()
	for range replicas - 1 {
		if r := <-results; r.n != 30 || r.release != nil {
			t.Fatalf("a follower staged %d blocks (lease %v), want all 30", r.n, r.release != nil)
		}
	}
}

// TestLeaseStoreFails: a follower whose store dies or hangs while it waits
// stops waiting at the failure (counted; not at its bound) and computes.
func TestLeaseStoreFails(t *testing.T) {
	for _, c := range []struct {
		name string
		harm func(s *redistest.Server)
	}{
		{"killed", func(s *redistest.Server) { s.Kill() }},
		{"hung", func(s *redistest.Server) { rawClient(t, s).ClientPause(bg, 5*time.Second) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := redistest.Start(t)
			a := newTier(t, s.URL(0), nil)
			b := newTier(t, s.URL(0), func(c *Config) { c.MaxFetchWait = 100 * time.Millisecond })
			ns, tokens := "acme", prompt(1, 5)
			a.Fetch(bg, ns, tokens, 0)
			got := fetchAsync(b, ns, tokens)
			waitFor(t, "the follower", func() bool { return b.Stats().LeasesFollowed == 1 })
			c.harm(s)
			if n := <-got; n != 0 {
				t.Fatalf("staged %d blocks", n)
			}
			st := b.Stats()
			if st.LeaseWaitsGivenUp != 0 || st.Errors.Timeout+st.Errors.Connection == 0 {
				t.Fatalf("follower stats %+v: want it ended by a counted store error", st)
			}
		})
	}
}

// TestNoLease: with the lease off a replica that misses never waits.
func TestNoLease(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), nil)
	b := newTier(t, s.URL(0), func(c *Config) { c.NoLease = true })
	ns, tokens := "acme", prompt(1, 5)
	_, release := a.Fetch(bg, ns, tokens, 0)
	defer release()
	if n, r := b.Fetch(bg, ns, tokens, 0); n != 0 || r != nil {
		t.Fatalf("staged %d, lease %v", n, r != nil)
	}
	if st := b.Stats(); st.LeasesLed+st.LeasesFollowed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLeaseFollowerOwnTail: a follower whose prompt goes on past the
// leader's takes the leases of its own blocks and stops waiting where the
// leader's chain ends, not at its own leases.
func TestLeaseFollowerOwnTail(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), nil)
	b := newTier(t, s.URL(0), func(c *Config) { c.MaxLeaseWait = time.Hour })
	ns, shared := "acme", prompt(1, 3)
	_, release := a.Fetch(bg, ns, shared, 0)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	type result struct {
		n       int
		release func()
	}
	got := make(chan result, 1)
	go func() {
		n, r := b.Fetch(ctx, ns, append(slices.Clone(shared), prompt(500, 2)...), 0)
		got <- result{n, r}
	}()
	waitFor(t, "the follower", func() bool { return b.Stats().LeasesFollowed == 1 })
	putPrompt(t, a, ns, shared)
	release()
	r := <-got
	if r.n != 3 || r.release == nil || ctx.Err() != nil {
		t.Fatalf("staged %d, lease %v, ctx %v: want the 3 shared blocks, a lease on its own 2, before the deadline", r.n, r.release != nil, ctx.Err())
	}
	r.release()
}
