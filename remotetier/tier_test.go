package remotetier

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/internal/redistest"
	"github.com/prefixd/prefixd/kvcache"
)

// TestSharedStore: what one replica writes, another fetches in one
// lookup and one transfer, verified and staged for promotion; the keys
// name the model, the hashed namespace and the chain hash, and neither
// keys nor values hold the namespace's name.
func TestSharedStore(t *testing.T) {
	s := redistest.Start(t)
	a, b := newTier(t, s.URL(0), nil), newTier(t, s.URL(0), nil)
	ns, tokens := "tenant-acme", prompt(100, 5)
	fps := putPrompt(t, a, ns, tokens)
	if st := a.Stats(); st.Writes != 5 || st.BytesOut == 0 {
		t.Fatalf("writer stats %+v, want 5 writes", st)
	}
	if n := fetched(b, ns, tokens, 0); n != 5 {
		t.Fatalf("fetched %d blocks, want 5", n)
	}
	checkStaged(t, b, ns, tokens, fps, 5)
	st := b.Stats()
	if st.LookupTokens != 20 || st.HitTokens != 20 || st.MissTokens != 0 || st.BytesIn == 0 || st.Fetches != 1 {
		t.Fatalf("reader stats %+v", st)
	}
	if st.RTT <= 0 || st.Bandwidth <= 0 {
		t.Fatalf("a fetch measured nothing: %+v", st)
	}
	// Blocks cached locally are not looked up again.
	if n := fetched(b, ns, tokens, 5); n != 0 {
		t.Fatalf("a prompt cached locally fetched %d blocks", n)
	}
	// A longer prompt fetches the run the store holds, and misses the rest.
	longer := append(append([]int32{}, tokens...), prompt(900, 2)...)
	if n := fetched(b, ns, longer, 2); n != 3 {
		t.Fatalf("fetched %d blocks of a longer prompt, want 3", n)
	}
	if st := b.Stats(); st.MissTokens != 8 {
		t.Fatalf("miss tokens %d, want 8", st.MissTokens)
	}

	b.Wait() // the lease the longer prompt took is released
	raw := rawClient(t, s)
	keys, err := raw.Keys(bg, "*").Result()
	if err != nil || len(keys) != 5 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for _, k := range keys {
		want := keyPrefix + "ab010203" // the model's first bytes
		if !strings.HasPrefix(k, want) || !strings.Contains(k, NamespaceHash(ns)) || strings.Contains(k, ns) {
			t.Fatalf("key %q: want prefix %q, the namespace hash, not the name", k, want)
		}
		v, _ := raw.Get(bg, k).Bytes()
		if bytes.Contains(v, []byte(ns)) {
			t.Fatalf("value of %q holds the namespace's name", k)
		}
		ttl, _ := raw.PTTL(bg, k).Result()
		if ttl <= 0 || ttl > time.Hour {
			t.Fatalf("key %q expires in %v, want (0, 1h]", k, ttl)
		}
	}
	if !strings.Contains(keys[0], NamespaceHash(ns)) {
		t.Fatal("unreachable")
	}
}

// TestTenantsSeparate: a namespace never fetches another's blocks, and
// another model's blocks are never read.
func TestTenantsSeparate(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), nil)
	tokens := prompt(7, 4)
	putPrompt(t, a, "alice", tokens)
	b := newTier(t, s.URL(0), nil)
	if n := fetched(b, "bob", tokens, 0); n != 0 {
		t.Fatalf("bob fetched %d of alice's blocks", n)
	}
	other := newTier(t, s.URL(0), func(c *Config) { c.Model = disktier.ModelFingerprint{9} })
	if n := fetched(other, "alice", tokens, 0); n != 0 {
		t.Fatalf("another model fetched %d blocks", n)
	}
	if n := fetched(b, "alice", tokens, 0); n != 4 {
		t.Fatalf("alice's own prompt fetched %d blocks, want 4", n)
	}
	// A flush of alice's namespace deletes her keys from the store.
	a.FlushNamespace("alice")
	raw := rawClient(t, s)
	for deadline := time.Now().Add(10 * time.Second); len(raw.Keys(bg, "*").Val()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("keys left after the flush: %v", raw.Keys(bg, "*").Val())
		}
	}
}

// TestCorruptValues: values that fail verification are misses, counted,
// and deleted; the run ends before them.
func TestCorruptValues(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), nil)
	ns, tokens := "ns", prompt(1, 4)
	raw := rawClient(t, s)
	plant := []struct {
		name  string
		value func(good []byte) []byte
	}{
		{"garbage", func([]byte) []byte { return []byte("not a record") }},
		{"flipped bit", func(g []byte) []byte { g = bytes.Clone(g); g[len(g)/2] ^= 4; return g }},
		{"truncated", func(g []byte) []byte { return g[:len(g)-1] }},
		{"another block", func([]byte) []byte {
			return disktier.AppendRecord(nil, &disktier.Record{Model: testModel, Namespace: NamespaceHash(ns),
				FP: kvcache.Fingerprint{Lo: 1}, Tokens: tokens[8:12], Data: make([]byte, testBlockBytes)})
		}},
		{"another model", func([]byte) []byte {
			return disktier.AppendRecord(nil, &disktier.Record{Model: disktier.ModelFingerprint{5}, Namespace: NamespaceHash(ns),
				Tokens: tokens[8:12], Data: make([]byte, testBlockBytes)})
		}},
	}
	for i, p := range plant {
		t.Run(p.name, func(t *testing.T) {
			raw.FlushAll(bg)
			a.Clear()
			fps := putPrompt(t, a, ns, tokens)
			key := a.key(NamespaceHash(ns), fps[2])
			good, err := raw.Get(bg, key).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			raw.Set(bg, key, p.value(good), time.Minute)
			b := newTier(t, s.URL(0), nil)
			if n := fetched(b, ns, tokens, 0); n != 2 {
				t.Fatalf("fetched %d blocks past a corrupt third, want 2", n)
			}
			checkStaged(t, b, ns, tokens, fps, 2)
			if st := b.Stats(); st.Errors.Corrupt != 1 || st.MissTokens != 8 {
				t.Fatalf("plant %d: stats %+v, want 1 corrupt and 8 missed tokens", i, st)
			}
			if n, _ := raw.Exists(bg, key).Result(); n != 0 {
				t.Fatal("the corrupt value was not deleted")
			}
		})
	}
}

// TestKeysExpire: a key lives Config.TTL, or until its block's later
// deadline; after it expires the block is a miss.
func TestKeysExpire(t *testing.T) {
	s := redistest.Start(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	a := newTier(t, s.URL(0), func(c *Config) { c.TTL = 200 * time.Millisecond; c.Clock = clk })
	raw := rawClient(t, s)
	ns, tokens := "ns", prompt(1, 2)
	fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, testBlockTokens)
	late := clk.Now().Add(time.Hour).UnixNano()
	a.Put(ns, fps[0], tokens[:4], eviction.StoredBlock{Data: blockData(ns, 0), Expires: late}, 0)
	a.Put(ns, fps[1], tokens[4:], eviction.StoredBlock{Data: blockData(ns, 1), Parent: fps[0]}, 0)
	a.Wait()
	if ttl := raw.PTTL(bg, a.key(NamespaceHash(ns), fps[0])).Val(); ttl <= 30*time.Minute {
		t.Fatalf("a block with an hour left expires in %v", ttl)
	}
	k1 := a.key(NamespaceHash(ns), fps[1])
	if ttl := raw.PTTL(bg, k1).Val(); ttl <= 0 || ttl > 200*time.Millisecond {
		t.Fatalf("the second block expires in %v, want (0, 200ms]", ttl)
	}
	for deadline := time.Now().Add(10 * time.Second); raw.Exists(bg, k1).Val() == 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the key never expired")
		}
	}
	b := newTier(t, s.URL(0), nil)
	if n := fetched(b, ns, tokens, 0); n != 1 {
		t.Fatalf("fetched %d blocks, want 1 (the second expired)", n)
	}
}

// TestStoreKilled: a store that dies makes fetches miss and writes fail,
// opens the breaker after Config.BreakerFailures failures, after which
// nothing goes to the network; once the backoff has passed a probe finds
// the store back and closes it.
func TestStoreKilled(t *testing.T) {
	s := redistest.Start(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	a := newTier(t, s.URL(0), func(c *Config) { c.Clock = clk; c.BreakerBackoff = time.Minute })
	ns, tokens := "ns", prompt(1, 3)
	putPrompt(t, a, ns, tokens)
	s.Kill()
	for i := range 3 {
		if n := fetched(a, ns, tokens, 0); n != 0 {
			t.Fatalf("fetch %d from a dead store staged %d blocks", i, n)
		}
	}
	st := a.Stats()
	if st.Breaker != "open" || st.BreakerOpened != 1 || st.Errors.Connection+st.Errors.Timeout != 3 {
		t.Fatalf("after 3 failures: %+v", st)
	}
	fetched(a, ns, tokens, 0)
	a.Clear() // forget what was written, so Put sends again
	putPrompt(t, a, ns, tokens)
	if st2 := a.Stats(); st2.BreakerTokens != 12 || st2.BreakerSkips != 3 || st2.Errors.Connection+st2.Errors.Timeout != 3 {
		t.Fatalf("an open breaker let calls through: %+v", st2)
	}
	s.Restart()
	clk.Advance(time.Minute)
	putPrompt(t, a, ns, tokens) // the probe: the store is back
	if st := a.Stats(); st.Breaker != "closed" || st.Writes != 6 {
		t.Fatalf("after the probe: %+v", st)
	}
	if n := fetched(newTier(t, s.URL(0), nil), ns, tokens, 0); n != 3 {
		t.Fatalf("fetched %d blocks after the restart, want 3", n)
	}
}

// TestSlowStore: a store that accepts connections and never answers costs
// a fetch at most its deadline and a Put nothing: while the writer waits
// on its first batch, the queue fills and later Puts are dropped.
func TestSlowStore(t *testing.T) {
	url := silentStore(t)
	a := newTier(t, url, func(c *Config) { c.MaxFetchWait = 50 * time.Millisecond })
	ns, tokens := "ns", prompt(1, 100)
	if n := fetched(a, ns, tokens[:40], 0); n != 0 {
		t.Fatalf("a silent store staged %d blocks", n)
	}
	if st := a.Stats(); st.Errors.Timeout != 1 || st.MissTokens != 40 {
		t.Fatalf("stats %+v, want one timeout and 40 missed tokens", st)
	}

	// The writer's first batch waits out a long timeout; its failure then
	// opens the breaker, so Close does not wait out another.
	w := newTier(t, url, func(c *Config) { c.WriteTimeout, c.QueueBlocks, c.BreakerFailures = 5*time.Second, 2, 1 })
	fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, testBlockTokens)
	accepted := 0
	for i, fp := range fps {
		if w.Put(ns, fp, tokens[i*4:(i+1)*4], eviction.StoredBlock{Data: blockData(ns, i)}, 0) {
			accepted++
		}
	}
	// At most the queue (2) and one batch in flight (at most 32) are taken.
	if st := w.Stats(); accepted+int(st.Dropped) != 100 || accepted > 2+32 {
		t.Fatalf("accepted %d, dropped %d of 100 with a queue of 2", accepted, st.Dropped)
	}
}

// TestStoreFull: a store out of memory refuses writes with OOM, counted
// as "full"; fetches still work.
func TestStoreFull(t *testing.T) {
	s := redistest.Start(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
	a := newTier(t, s.URL(0), func(c *Config) { c.BreakerFailures = 100 })
	ns, tokens := "ns", prompt(1, 2)
	putPrompt(t, a, ns, tokens)
	if st := a.Stats(); st.Writes != 0 || st.Errors.Full == 0 {
		t.Fatalf("a full store: %+v, want no writes and a full error", st)
	}
}

// TestURLNeverLeaksPassword: configuration errors name the host, never
// the password; a password from Config.Password is used when the URL has
// none.
func TestURLNeverLeaksPassword(t *testing.T) {
	for _, u := range []string{"redis://user:s3cret@host:notaport/0", "redis://:s3cret@host:6379/notadb", "http://:s3cret@host/0", "redis://:s3cret@%zz/0"} {
		_, err := New(Config{URL: u, Model: testModel, BlockTokens: 1, BlockBytes: 1})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("URL %q: error %v", "(redacted)", err)
		}
	}
	if got := Redacted("rediss://u:s3cret@h:1/2"); got != "rediss://h:1/2" {
		t.Fatalf("Redacted = %q", got)
	}
	s := redistest.Start(t, "--requirepass", "pw")
	a := newTier(t, s.URL(0), func(c *Config) { c.Password = "pw" })
	putPrompt(t, a, "ns", prompt(1, 1))
	if st := a.Stats(); st.Writes != 1 {
		t.Fatalf("with the password from Config: %+v", st)
	}
}

// TestStageBudget: the staging area keeps within its byte budget by
// dropping the oldest blocks (counted), and its checker holds after every
// step.
func TestStageBudget(t *testing.T) {
	var s stage
	s.init(3 * testBlockBytes)
	for i := range 5 {
		s.put(&staged{ns: "ns", fp: kvcache.Fingerprint{Lo: uint64(i)}, tokens: []int32{int32(i)},
			block: eviction.StoredBlock{Data: blockData("ns", i)}})
		if err := s.check(); err != nil {
			t.Fatal(err)
		}
	}
	if s.bytes() != 3*testBlockBytes || s.dropped.Load() != 2 {
		t.Fatalf("%d bytes staged, %d dropped; want 3 blocks and 2 dropped", s.bytes(), s.dropped.Load())
	}
	for i := range 5 {
		if _, ok := s.get("ns", kvcache.Fingerprint{Lo: uint64(i)}, []int32{int32(i)}); ok != (i >= 2) {
			t.Fatalf("block %d staged %v", i, ok)
		}
	}
	if _, ok := s.get("other", kvcache.Fingerprint{Lo: 4}, []int32{4}); ok {
		t.Fatal("another namespace got a staged block")
	}
	s.remove("ns", kvcache.Fingerprint{Lo: 3}, []int32{3})
	s.removeIf(func(e *staged) bool { return e.fp.Lo == 4 })
	if err := s.check(); err != nil || s.bytes() != testBlockBytes {
		t.Fatalf("after removals: %v, %d bytes", err, s.bytes())
	}
}
