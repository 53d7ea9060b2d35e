package engine

import (
	"context"
	"time"

	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// RemoteTier is what the engine needs of a cache tier that replicas share
// (package remotetier's Tier). It must be safe for concurrent use.
type RemoteTier interface {
	eviction.Tier
	// Fetch stages the blocks of namespace ns's tokens from block have
	// on that the store holds, when fetching beats recomputing them, and
	// returns how many it staged; later Gets return them. It blocks on the
	// network and is never called on the scheduler goroutine.
	Fetch(ctx context.Context, ns string, tokens []int32, have int) int
	// ObservePrefill reports a forward pass that computed tokens prompt
	// tokens in d, for the fetch rule.
	ObservePrefill(tokens int, d time.Duration)
	// Stats returns the tier's state and running totals, for Stats.
	Stats() kvcache.RemoteTierStats
}

// maxRemoteFetches bounds the remote fetches running at once; a request
// that finds them all busy is not fetched for (it computes its prompt).
const maxRemoteFetches = 8

// awaitsFetch reports whether admission must pass over s for now because
// its prompt is being fetched from the remote tier. The first time it
// sees s it starts the fetch, on a goroutine of its own, for the blocks
// beyond what the local tiers hold: the scheduler never waits on the
// network, and a request whose fetch is under way waits (at most the
// fetch's deadline) while others are admitted. The fetch pokes the
// scheduler when it ends; admission then promotes what it staged.
func (sc *scheduler) awaitsFetch(s *seq) bool {
	e := sc.e
	if s.fetched != nil {
		select {
		case <-s.fetched:
			return false
		default:
			return true
		}
	}
	if e.cfg.RemoteTier == nil || !sc.cacheOn(s) || s.everAdmitted {
		return false
	}
	done := make(chan struct{})
	s.fetched = done
	prompt := s.tokens[:len(s.tokens)-1] // what admission looks up
	bs := e.cfg.BlockSize
	have := e.cache.Peek(s.req.Namespace, prompt).Cached() / bs
	if have >= len(prompt)/bs {
		close(done)
		return false
	}
	select {
	case e.fetches <- struct{}{}:
	default:
		close(done)
		return false
	}
	ns, tokens := s.req.Namespace, prompt[:len(prompt)/bs*bs:len(prompt)/bs*bs]
	go func() {
		defer func() { <-e.fetches; close(done); e.poke() }()
		e.cfg.RemoteTier.Fetch(context.Background(), ns, tokens, have)
	}()
	return true
}

// observePrefill reports the prompt tokens of the batch just computed in d
// to the remote tier's fetch rule.
func (sc *scheduler) observePrefill(d time.Duration) {
	r := sc.e.cfg.RemoteTier
	if r == nil {
		return
	}
	n := 0
	for _, p := range sc.plan {
		if p.s.computed < p.s.nPrompt {
			n += p.chunk
		}
	}
	if n > 0 {
		r.ObservePrefill(n, d)
	}
}

// publishRemote writes s's blocks from block index from through its pin
// to the remote tier as soon as they are in the cache, so other replicas
// can fetch them while this one holds them.
func (sc *scheduler) publishRemote(s *seq, from int) {
	if r := sc.e.cfg.RemoteTier; r != nil {
		sc.e.cache.Publish(r, s.pin, from)
	}
}
