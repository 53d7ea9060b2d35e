package engine

import (
	"context"
	"sync"
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
	// returns how many it staged; later Gets return them. Where the store
	// misses blocks it may wait for another replica computing them; a
	// release that is not nil means this caller holds the fleet's lease on
	// computing them, to be called once, when they are computed and
	// offered to the tier or will not be. It blocks on the network and is
	// never called on the scheduler goroutine.
	Fetch(ctx context.Context, ns string, tokens []int32, have int) (staged int, release func())
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
// its prompt is being fetched from the remote tier, or another waiting
// request's fetch covers more of it than the cache holds (that request,
// admitted first, promotes the blocks s then finds cached). The first
// time it sees s otherwise it starts the fetch, on a goroutine of its
// own, for the blocks beyond what the local tiers hold: the scheduler
// never waits on the network, and a request whose fetch is under way
// waits (at most the fetch's deadlines) while others are admitted. The
// fetch pokes the scheduler when it ends; admission then promotes what it
// staged.
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
	prompt := s.tokens[:len(s.tokens)-1] // what admission looks up
	bs := e.cfg.BlockSize
	have := e.cache.Peek(s.req.Namespace, prompt).Cached() / bs
	if sc.followsFetch(s, prompt, have) {
		return true
	}
	done := make(chan struct{})
	s.fetched = done
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
		_, release := e.cfg.RemoteTier.Fetch(context.Background(), ns, tokens, have)
		s.lease.hold(release)
	}()
	return true
}

// followsFetch reports whether a request of s's namespace waiting for its
// fetch (held by this admission pass or still waiting) shares more whole
// blocks of s's prompt than the have cached.
func (sc *scheduler) followsFetch(s *seq, prompt []int32, have int) bool {
	bs := sc.e.cfg.BlockSize
	for _, waiting := range [][]*seq{sc.held, sc.waiting} {
		for _, r := range waiting {
			if r == s || r.fetched == nil || r.req.Namespace != s.req.Namespace {
				continue
			}
			select {
			case <-r.fetched:
				continue
			default:
			}
			n := 0
			for n < len(prompt) && n < r.nPrompt && prompt[n] == r.tokens[n] {
				n++
			}
			if n/bs > have {
				return true
			}
		}
	}
	return false
}

// remoteLease holds the release of the fleet's lease on computing a
// prompt's blocks, which a sequence's fetch goroutine may take and the
// scheduler ends: once the prompt's blocks are offered to the tier, or
// when the sequence gives up its blocks first. It is safe for concurrent
// use; its zero value holds nothing.
type remoteLease struct {
	mu      sync.Mutex
	release func()
	ended   bool
}

// hold keeps release (nil: nothing) until end; after end, it releases at
// once.
func (l *remoteLease) hold(release func()) {
	if release == nil {
		return
	}
	l.mu.Lock()
	ended := l.ended
	if !ended {
		l.release = release
	}
	l.mu.Unlock()
	if ended {
		release()
	}
}

// end releases what the lease holds, if anything, and what hold gives it
// later.
func (l *remoteLease) end() {
	l.mu.Lock()
	release := l.release
	l.release, l.ended = nil, true
	l.mu.Unlock()
	if release != nil {
		release()
	}
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
