package remotetier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prefixd/prefixd/kvcache"
)

// releaseScript deletes each lease of KEYS that still holds the token
// ARGV[1]: a lease that expired and was taken by another replica is not
// its old holder's to end.
var releaseScript = redis.NewScript(`local n = 0
for _, k in ipairs(KEYS) do
	if redis.call("GET", k) == ARGV[1] then n = n + redis.call("DEL", k) end
end
return n`)

// takeScript takes the leases of KEYS for the token ARGV[1], for ARGV[2]
// milliseconds, if the first is free or the token's: atomically, so that
// of the replicas that miss one block at once exactly one leads. It
// leaves the later leases others hold (SET NX) and answers, per key,
// whether the token holds it (all 0 when another holds the first).
var takeScript = redis.NewScript(`local held = redis.call("GET", KEYS[1])
local won = {}
if held and held ~= ARGV[1] then
	for i = 1, #KEYS do won[i] = 0 end
	return won
end
for i, k in ipairs(KEYS) do
	redis.call("SET", k, ARGV[1], "NX", "PX", ARGV[2])
	won[i] = redis.call("GET", k) == ARGV[1] and 1 or 0
end
return won`)

// renewScript extends, to ARGV[2] milliseconds, each lease of KEYS that
// the token ARGV[1] still holds.
var renewScript = redis.NewScript(`for _, k in ipairs(KEYS) do
	if redis.call("GET", k) == ARGV[1] then redis.call("PEXPIRE", k, ARGV[2]) end
end
return 0`)

// leaseKey is the key of the lease on computing the chain from block fp of
// namespace nsHash on. It sits under the namespace's keys, so a flush of
// the namespace ends it too, and a tenant never waits on another's.
func (t *Tier) leaseKey(nsHash string, fp kvcache.Fingerprint) string {
	return t.key(nsHash, fp) + ":computing"
}

// newLeaseToken returns a value no other lease holder in the fleet uses:
// the tier's random identity and a counter.
func (t *Tier) newLeaseToken() string {
	return t.id + ":" + strconv.FormatUint(t.leaseSeq.Add(1), 10)
}

// randomID returns 16 random hex digits.
func randomID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b[:])
}

// lease takes, or follows, the fleet's leases on computing the blocks
// that keys[run:] name, the first of which the store misses. A block's
// lease (its key with ":computing", holding a token of its holder's) says
// a replica is computing it; the block's value, once written, makes it
// moot, and its holder releases it when done. Leases last
// Config.LeaseTTL and their holder's tier renews them until it releases
// them, so they outlive a slow holder and not a dead one. If no other
// replica holds the first missing block's lease, lease takes the leases
// of every missing block not held by another (atomically: of replicas
// missing a block at once, one leads). Otherwise it waits (follow) while
// that replica computes, then takes the leases of what is still missing.
// It returns how far the chain in the store reaches and, if it took any
// lease, the release of those. A store error ends it with the run found
// so far and the leases taken so far.
func (t *Tier) lease(ctx context.Context, nsHash string, fps []kvcache.Fingerprint, keys []string, run int) (int, func()) {
	token := t.newLeaseToken()
	leases := make([]string, len(keys))
	for i, fp := range fps {
		leases[i] = t.leaseKey(nsHash, fp)
	}
	won, ok := t.takeLeases(ctx, leases[run:], token)
	if !ok {
		return run, nil
	}
	if won[0] {
		t.m.leasesLed.Add(1)
	} else {
		t.m.leasesFollowed.Add(1)
		run = t.follow(ctx, leases, keys, run, token)
		won = nil
		if run < len(keys) {
			won, _ = t.takeLeases(ctx, leases[run:], token)
		}
	}
	var held []string
	for i, w := range won {
		if w {
			held = append(held, leases[run+i])
		}
	}
	if len(held) == 0 {
		return run, nil
	}
	t.held.add(token, held)
	return run, func() {
		t.held.remove(token)
		t.enqueueSoon(job{leases: held, value: []byte(token), release: true})
	}
}

// takeLeases takes keys for token (takeScript) in one round trip: won[i]
// says whether token holds keys[i]; won[0] is false when another replica
// holds keys[0], and then token takes none. ok is false at a store error
// (counted) or an open breaker.
func (t *Tier) takeLeases(ctx context.Context, keys []string, token string) (won []bool, ok bool) {
	if !t.br.allow() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.MaxFetchWait)
	defer cancel()
	got, err := takeScript.Run(ctx, t.client, keys, token, t.cfg.LeaseTTL.Milliseconds()).Int64Slice()
	if err == nil && len(got) != len(keys) {
		err = fmt.Errorf("remotetier: the lease script answered %d flags for %d keys", len(got), len(keys))
	}
	if err != nil {
		t.fail(err)
		return nil, false
	}
	t.br.success()
	won = make([]bool, len(keys))
	for i, w := range got {
		won[i] = w == 1
	}
	return won, true
}

// followWindow bounds the blocks one poll of follow looks at: a holder
// writes a prefill chunk's blocks at a time, and a fleet of followers
// polling whole chains would load the store for nothing.
const followWindow = 64

// follow waits while another replica holds the lease on the first block
// of the chain keys name that the store misses (keys[run], whose lease is
// leases[run]), polling, each time in one pipelined round trip, how far
// the chain reaches from run on (up to followWindow blocks) and who
// holds the lease of each of those blocks (a lease holding token is this
// caller's own). It polls every block's estimated compute time, from 20
// to 250 ms (100 ms while unmeasured). It returns the run when the first
// missing block's lease is released or has expired with the block
// unwritten, when the chain is whole, when the chain has not grown for
// Config.MaxLeaseWait (counted as given up), when ctx ends, or when the
// breaker opens: a failed poll is counted and tried again, so a store
// that is only slow under load does not end the wait, and one that is
// dead or hung ends it after Config.BreakerFailures polls.
func (t *Tier) follow(ctx context.Context, leases, keys []string, run int, token string) int {
	deadline := time.Now().Add(t.cfg.MaxLeaseWait) // moves on while the chain grows
	poll := 100 * time.Millisecond
	if d := t.est.get().RecomputeTime(t.cfg.BlockTokens); d > 0 {
		poll = min(max(d, 20*time.Millisecond), 250*time.Millisecond)
	}
	for run < len(keys) {
		if time.Now().After(deadline) {
			t.m.leaseGaveUp.Add(1)
			return run
		}
		select {
		case <-ctx.Done():
			return run
		case <-time.After(poll):
		}
		if !t.br.allow() {
			return run
		}
		window := keys[run:min(run+followWindow, len(keys))]
		cctx, cancel := context.WithTimeout(ctx, t.cfg.MaxFetchWait)
		lens := make([]*redis.IntCmd, len(window))
		held := make([]*redis.StringCmd, len(window))
		_, err := t.client.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, k := range window {
				lens[i] = p.StrLen(cctx, k)
				held[i] = p.Get(cctx, leases[run+i])
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.fail(err)
			continue
		}
		t.br.success()
		i := 0
		for i < len(lens) && lens[i].Val() > 0 {
			i++
		}
		if i > 0 {
			deadline = time.Now().Add(t.cfg.MaxLeaseWait)
		}
		if run += i; i < len(held) && (held[i].Val() == "" || held[i].Val() == token) {
			return run // no other replica computes the first block missing
		}
	}
	return run
}

// release ends the leases of keys that still hold token.
func (t *Tier) release(keys []string, token string) {
	if !t.br.allow() {
		return // they expire by themselves
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.WriteTimeout)
	defer cancel()
	if err := releaseScript.Run(ctx, t.client, keys, token).Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.fail(err)
		return
	}
	t.br.success()
}

// heldLeases are the leases this tier holds, by token, for the renewer.
// It is safe for concurrent use.
type heldLeases struct {
	mu      sync.Mutex
	byToken map[string][]string
}

func (h *heldLeases) add(token string, keys []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byToken == nil {
		h.byToken = map[string][]string{}
	}
	h.byToken[token] = keys
}

func (h *heldLeases) remove(token string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byToken, token)
}

// snapshot returns a copy of the leases held.
func (h *heldLeases) snapshot() map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.byToken) == 0 {
		return nil
	}
	out := make(map[string][]string, len(h.byToken))
	for k, v := range h.byToken {
		out[k] = v
	}
	return out
}

// renewer extends the leases this tier holds every third of
// Config.LeaseTTL, in one pipelined round trip, until done is closed. A
// lease whose renewal fails expires, and its followers compute.
func (t *Tier) renewer(done <-chan struct{}) {
	tick := time.NewTicker(t.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		held := t.held.snapshot()
		if held == nil || !t.br.allow() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.WriteTimeout)
		_, err := t.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for token, keys := range held {
				renewScript.Eval(ctx, p, keys, token, t.cfg.LeaseTTL.Milliseconds()) // EVALSHA cannot fall back to EVAL in a pipeline
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.fail(err)
			continue
		}
		t.br.success()
	}
}
