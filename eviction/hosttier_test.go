package eviction

import (
	"bytes"
	"testing"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

func newTier(t *testing.T) *HostTier {
	t.Helper()
	h, err := NewHostTier(HostTierConfig{CapacityBytes: 1 << 20, BlockBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func TestChainDependsOnEverything(t *testing.T) {
	a, b := kvcache.NamespaceSalt("a"), kvcache.NamespaceSalt("b")
	base := kvcache.Chain(kvcache.Fingerprint{}, a, []int32{1, 2, 3, 4})
	for name, fp := range map[string]kvcache.Fingerprint{
		"other namespace": kvcache.Chain(kvcache.Fingerprint{}, b, []int32{1, 2, 3, 4}),
		"other tokens":    kvcache.Chain(kvcache.Fingerprint{}, a, []int32{1, 2, 3, 5}),
		"other parent":    kvcache.Chain(kvcache.Fingerprint{Lo: 1, Hi: 1}, a, []int32{1, 2, 3, 4}),
		"other order":     kvcache.Chain(kvcache.Fingerprint{}, a, []int32{2, 1, 3, 4}),
	} {
		if fp == base || fp.Lo == base.Lo || fp.Hi == base.Hi {
			t.Errorf("%s: fingerprint %x equals base %x in a half", name, fp, base)
		}
	}
	if kvcache.Chain(kvcache.Fingerprint{}, a, []int32{1, 2, 3, 4}) != base {
		t.Error("kvcache.Chain is not deterministic")
	}
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	if got, want := kvcache.ChainPrefix(a, toks, 4, 2), kvcache.Chain(base, a, toks[4:]); got != want {
		t.Errorf("kvcache.ChainPrefix = %x, want %x", got, want)
	}
}

func TestHostTierRoundTrip(t *testing.T) {
	h := newTier(t)
	salt := kvcache.NamespaceSalt("t1")
	toks := []int32{7, 8, 9, 10}
	fp := kvcache.Chain(kvcache.Fingerprint{}, salt, toks)
	data := []byte("k/v bytes of one block")
	if !h.Put("t1", fp, toks, StoredBlock{Data: data, Expires: 1000, LastUsed: 5}, time.Hour) {
		t.Fatal("Put dropped on an empty tier")
	}
	h.Wait()
	data[0] = 'X' // the tier must have copied
	got, ok := h.Get("t1", fp, toks, 10)
	if !ok || got.Expires != 1000 || got.LastUsed != 5 || !bytes.Equal(got.Data, []byte("k/v bytes of one block")) {
		t.Fatalf("Get = %+v, %v", got, ok)
	}
	if h.Bytes() != int64(len(data)+4*len(toks)) {
		t.Fatalf("Bytes = %d, want %d", h.Bytes(), len(data)+4*len(toks))
	}
	for name, lookup := range map[string]func() bool{
		"expired":         func() bool { _, ok := h.Get("t1", fp, toks, 1000); return ok },
		"other namespace": func() bool { _, ok := h.Get("t2", fp, toks, 10); return ok },
		"other tokens":    func() bool { _, ok := h.Get("t1", fp, []int32{7, 8, 9, 11}, 10); return ok },
		"other fp":        func() bool { _, ok := h.Get("t1", kvcache.Fingerprint{Lo: fp.Lo}, toks, 10); return ok },
	} {
		if lookup() {
			t.Errorf("%s: Get hit", name)
		}
	}
	h.FlushNamespace("t2")
	h.Wait()
	if _, ok := h.Get("t1", fp, toks, 10); !ok {
		t.Fatal("flushing another namespace dropped t1's entry")
	}
	h.FlushNamespace("t1")
	h.Wait()
	if _, ok := h.Get("t1", fp, toks, 10); ok {
		t.Fatal("entry survived its namespace's flush")
	}
}

// TestHostTierKeyCollision forces every block onto one ristretto key: a
// lookup must then miss rather than return another block's bytes.
func TestHostTierKeyCollision(t *testing.T) {
	h := newTier(t)
	h.key = func(kvcache.Fingerprint) uint64 { return 42 }
	salt := kvcache.NamespaceSalt("ns")
	a, b := []int32{1, 1, 1, 1}, []int32{2, 2, 2, 2}
	fa, fb := kvcache.Chain(kvcache.Fingerprint{}, salt, a), kvcache.Chain(kvcache.Fingerprint{}, salt, b)
	h.Put("ns", fa, a, StoredBlock{Data: []byte("AAAA"), Expires: 100}, time.Hour)
	h.Wait()
	h.Put("ns", fb, b, StoredBlock{Data: []byte("BBBB"), Expires: 100}, time.Hour) // replaces a under key 42
	h.Wait()
	if got, ok := h.Get("ns", fa, a, 0); ok {
		t.Fatalf("lookup of a under a colliding key returned %q", got.Data)
	}
	if got, ok := h.Get("ns", fb, b, 0); !ok || string(got.Data) != "BBBB" {
		t.Fatalf("lookup of b = %q, %v", got.Data, ok)
	}
	// Same own tokens, different prefix: the fingerprint tells them apart.
	deep := kvcache.Chain(fa, salt, b)
	if got, ok := h.Get("ns", deep, b, 0); ok {
		t.Fatalf("block b after prefix a served b-at-root's bytes %q", got.Data)
	}
}

func TestNewHostTierValidates(t *testing.T) {
	for _, cfg := range []HostTierConfig{{CapacityBytes: 0, BlockBytes: 1}, {CapacityBytes: 10, BlockBytes: 0}} {
		if _, err := NewHostTier(cfg); err == nil {
			t.Errorf("NewHostTier(%+v) accepted", cfg)
		}
	}
}
