package remotetier

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/internal/redistest"
	"github.com/prefixd/prefixd/kvcache"
)

const (
	testBlockTokens = 4
	testBlockBytes  = 64
)

var testModel = disktier.ModelFingerprint{0xAB, 1, 2, 3}

// newTier returns a tier on url with test block sizes; mod adjusts its
// Config. It is closed when t ends.
func newTier(t testing.TB, url string, mod func(*Config)) *Tier {
	t.Helper()
	cfg := Config{URL: url, Model: testModel, BlockTokens: testBlockTokens, BlockBytes: testBlockBytes}
	if mod != nil {
		mod(&cfg)
	}
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Check(); err != nil {
			t.Error(err)
		}
		tr.Close()
	})
	return tr
}

// prompt returns n blocks of tokens starting at first.
func prompt(first int32, n int) []int32 {
	out := make([]int32, n*testBlockTokens)
	for i := range out {
		out[i] = first + int32(i)
	}
	return out
}

// blockData is the fake K/V of block i of a prompt: distinct per block.
func blockData(ns string, i int) []byte {
	d := make([]byte, testBlockBytes)
	for j := range d {
		d[j] = byte(len(ns) + 7*i + j)
	}
	return d
}

// putPrompt writes every block of tokens through tr, as the engine's
// write-through does, and waits until they are written.
func putPrompt(t testing.TB, tr *Tier, ns string, tokens []int32) []kvcache.Fingerprint {
	t.Helper()
	fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, testBlockTokens)
	parent := kvcache.Fingerprint{}
	for i, fp := range fps {
		b := eviction.StoredBlock{Data: blockData(ns, i), Expires: 1, LastUsed: 1, Parent: parent}
		if !tr.Put(ns, fp, tokens[i*testBlockTokens:(i+1)*testBlockTokens], b, time.Minute) {
			t.Fatalf("Put of block %d refused", i)
		}
		parent = fp
	}
	tr.Wait()
	return fps
}

// checkStaged checks that tr stages exactly the first n blocks of tokens,
// with their data.
func checkStaged(t testing.TB, tr *Tier, ns string, tokens []int32, fps []kvcache.Fingerprint, n int) {
	t.Helper()
	for i, fp := range fps {
		blk := tokens[i*testBlockTokens : (i+1)*testBlockTokens]
		b, ok := tr.Get(ns, fp, blk, 0)
		if ok != (i < n) {
			t.Fatalf("block %d: staged %v, want %v", i, ok, i < n)
		}
		if ok && !slices.Equal(b.Data, blockData(ns, i)) {
			t.Fatalf("block %d: staged data differs", i)
		}
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
}

// rawClient is a plain client of the store, for planting and inspecting
// values.
func rawClient(t testing.TB, s *redistest.Server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// silentStore listens on loopback and accepts connections but never
// answers: a store that hangs.
func silentStore(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				buf := make([]byte, 1<<16)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); close(done) })
	return fmt.Sprintf("redis://%s/0", l.Addr())
}

var bg = context.Background()

// fetched calls tr.Fetch and returns the blocks it staged, ending at once
// any lease it took (as a replica that computed nothing would).
func fetched(tr *Tier, ns string, tokens []int32, have int) int {
	n, release := tr.Fetch(bg, ns, tokens, have)
	if release != nil {
		release()
	}
	return n
}
