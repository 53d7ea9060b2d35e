package remotetier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
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

// leaseTTL is how long a lease taken to compute tokens lasts if its holder
// never releases it (it died): twice the estimated time to compute them,
// at least a second, at most Config.MaxLeaseWait (that too while the
// prefill rate is unmeasured).
func (t *Tier) leaseTTL(est Estimates, tokens int) time.Duration {
	d := 2 * est.RecomputeTime(tokens)
	if d <= 0 {
		return t.cfg.MaxLeaseWait
	}
	return min(max(d, time.Second), t.cfg.MaxLeaseWait)
}

// lease takes, or follows, the fleet's leases on computing the blocks
// that keys[run:] name, the first of which the store misses. A block's
// lease (SET NX of its key with ":computing", for leaseTTL of the tokens
// missing) says a replica is computing it; the block's value replaces it
// in effect when written, and its holder releases it when done. If
// another replica holds the first missing block's lease, lease waits
// (follow) while it computes, then takes the leases of what is still
// missing. It returns how far the chain in the store reaches and, if it
// took any lease, the release of those. A store error ends it with the
// run found so far and the leases taken so far.
func (t *Tier) lease(ctx context.Context, nsHash string, fps []kvcache.Fingerprint, keys []string, run int) (int, func()) {
	token := t.newLeaseToken()
	ttl := t.leaseTTL(t.est.get(), (len(keys)-run)*t.cfg.BlockTokens)
	leases := make([]string, len(keys))
	for i, fp := range fps {
		leases[i] = t.leaseKey(nsHash, fp)
	}
	won, ok := t.takeLeases(ctx, leases[run:], token, ttl)
	if !ok {
		return run, nil
	}
	if won[0] {
		t.m.leasesLed.Add(1)
	} else {
		t.m.leasesFollowed.Add(1)
		from := run
		run = t.follow(ctx, leases, keys, run, token)
		won = won[run-from:]
		// The holder is done with what it wrote, or gave up: take what is
		// still missing (the leases already ours answer as won).
		if run < len(keys) {
			if again, ok := t.takeLeases(ctx, leases[run:], token, ttl); ok {
				won = again
			}
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
	return run, func() { t.enqueueSoon(job{leases: held, value: []byte(token), release: true}) }
}

// takeLeases sets, in one pipelined round trip, each of keys that is not
// set to token, for ttl (SET NX): won[i] says whether this caller took
// keys[i], already holds it after an earlier call, or another holds it.
// ok is false at a store error (counted) or an open breaker.
func (t *Tier) takeLeases(ctx context.Context, keys []string, token string, ttl time.Duration) (won []bool, ok bool) {
	if !t.br.allow() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.MaxFetchWait)
	defer cancel()
	cmds := make([]*redis.StatusCmd, len(keys))
	_, err := t.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.SetArgs(ctx, k, token, redis.SetArgs{Mode: "NX", TTL: ttl, Get: true})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		t.fail(err)
		return nil, false
	}
	t.br.success()
	won = make([]bool, len(keys))
	for i, c := range cmds {
		// SET NX GET answers nil when it set the key, else the holder.
		won[i] = errors.Is(c.Err(), redis.Nil) || c.Val() == token
	}
	return won, true
}

// follow waits while another replica holds the lease on the first block
// of the chain keys name that the store misses (keys[run], whose lease is
// leases[run]), polling, each time in one pipelined round trip, how far
// the chain reaches from run on and who holds the first missing block's
// lease (a lease holding token is this caller's own). It returns the run when that lease is released or has
// expired with its block unwritten, when the chain is whole, when
// Config.MaxLeaseWait has passed (counted as given up) or ctx ends, or at
// a store error.
func (t *Tier) follow(ctx context.Context, leases, keys []string, run int, token string) int {
	deadline := time.Now().Add(t.cfg.MaxLeaseWait)
	poll := min(max(t.est.get().RecomputeTime(t.cfg.BlockTokens), 5*time.Millisecond), 100*time.Millisecond)
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
		cctx, cancel := context.WithTimeout(ctx, t.cfg.MaxFetchWait)
		lens := make([]*redis.IntCmd, len(keys)-run)
		held := make([]*redis.StringCmd, len(keys)-run)
		_, err := t.client.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i, k := range keys[run:] {
				lens[i] = p.StrLen(cctx, k)
				held[i] = p.Get(cctx, leases[run+i])
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.fail(err)
			return run
		}
		t.br.success()
		i := 0
		for i < len(lens) && lens[i].Val() > 0 {
			i++
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
