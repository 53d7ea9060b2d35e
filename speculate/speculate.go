// Package speculate drafts tokens for speculative decoding without a draft
// model: from a request's predicted output (OpenAI's Predicted Outputs),
// from the sequence's own prompt and output (Ngram, prompt lookup), or from
// suffix tries over the sequence and over its namespace's finished
// sequences (Suffix, as vLLM's and Arctic's suffix decoding). The engine
// verifies the drafts; this package only proposes them.
//
// Namespaces are strictly separate. Each has its own trie, sequence queue,
// token quota and lock; a drafter reads only its own namespace's trie, so
// no tenant is drafted another's tokens. The work of a lookup is a walk of
// at most MaxDepth² child-table probes and K steps in that namespace's trie
// alone; its cost depends on other namespaces' data only through shared
// hardware (CPU caches, the garbage collector, which never scans the
// tries' pointer-free nodes and tables), which is noise next to a forward
// pass. A namespace's inserts evict only its own oldest sequences, and a
// namespace beyond MaxNamespaces is not kept rather than evicting
// another's. A Draft never waits for a Finished writing its namespace.
package speculate

import (
	"slices"
	"sync"
)

// Drafter proposes tokens for one sequence. It is an alias of an unnamed
// interface type so that a consumer (the engine) declaring the same method
// set as an alias has the identical type, and Speculator satisfies its
// interface without either package importing the other. A Drafter is not
// safe for concurrent use: one goroutine at a time drives it.
type Drafter = interface {
	// Draft appends to dst up to k tokens proposed to follow the sequence so
	// far and returns it; predicted reports that they came from the
	// request's predicted output.
	Draft(dst []int32, k int) (drafts []int32, predicted bool)
	// Accept tells the drafter the tokens appended to the sequence since
	// the last call (verified drafts, then the token sampled after them).
	Accept(tokens []int32)
}

// Speculator makes drafters and keeps each namespace's finished sequences
// for Suffix mode. It is safe for concurrent use.
type Speculator struct {
	cfg    Config
	chunk  int // the most tokens a Draft indexes
	mu     sync.RWMutex
	spaces map[string]*space
	turned int // sequences not kept because MaxNamespaces was reached
}

// space is one namespace's finished sequences and their trie.
type space struct {
	mu     sync.RWMutex
	trie   *trie // its texts are the sequences, oldest first
	evicts int   // sequences evicted for the quota
}

// New returns a Speculator for cfg, or an error wrapping ErrConfig that
// names an invalid field.
func New(cfg Config) (*Speculator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Speculator{cfg: cfg, chunk: indexChunk, spaces: make(map[string]*space)}, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Speculator) Config() Config { return s.cfg }

// indexChunk is the most tokens of its sequence a drafter indexes in one
// Draft, so that a long prompt is indexed over a few steps instead of
// stalling one: each costs about a microsecond (BenchmarkNewDrafter).
const indexChunk = 1024

// NewDrafter returns the drafter of one sequence of a request in namespace
// ns, with its prompt and the request's predicted output (nil when it has
// none). It copies what it keeps of prompt and prediction. The drafter
// indexes the prompt over its first Drafts, and the prediction over those
// after the output first departs from it, at most 1024 tokens each,
// drafting meanwhile from what it has indexed.
func (s *Speculator) NewDrafter(ns string, prompt, prediction []int32) Drafter {
	d := &drafter{s: s, ns: ns, k: s.cfg.K}
	if s.cfg.Mode == Off && len(prediction) == 0 {
		return d // nothing to draft from: keep nothing
	}
	d.seq = slices.Clone(prompt)
	if len(prediction) > 0 {
		d.pred = newPredictor(prediction, s.cfg.NgramMin, s.cfg.NgramMax)
	}
	switch s.cfg.Mode {
	case Ngram:
		d.ngram = newNgramIndex(s.cfg.NgramMin, s.cfg.NgramMax)
	case Suffix:
		d.local = newTrie(s.cfg.MaxDepth)
		d.local.add(nil)
		d.matched = make([]at, 0, s.cfg.MaxDepth)
	}
	return d
}

// Finished records a finished sequence of namespace ns (prompt then
// output) for later drafts in Suffix mode, copying it; other modes ignore
// it. A sequence longer than MaxNamespaceTokens keeps its last tokens. The
// namespace's oldest sequences are evicted to keep it within its quota.
// It costs about a microsecond per token (inserted or evicted); a caller
// that cannot spend that on its hot path may call it from a goroutine of
// its own: a Draft never waits for it, but drafts from its sequence alone
// while its namespace is being written.
func (s *Speculator) Finished(ns string, tokens []int32) {
	if s.cfg.Mode != Suffix || len(tokens) == 0 {
		return
	}
	sp := s.space(ns, true)
	if sp == nil {
		return
	}
	seq := slices.Clone(tokens[max(0, len(tokens)-s.cfg.MaxNamespaceTokens):])
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for sp.trie.tokens+len(seq) > s.cfg.MaxNamespaceTokens {
		sp.trie.removeOldest()
		sp.evicts++
	}
	sp.trie.add(seq)
}

// space returns ns's space, creating it if create and there is room, or
// nil.
func (s *Speculator) space(ns string, create bool) *space {
	s.mu.RLock()
	sp := s.spaces[ns]
	s.mu.RUnlock()
	if sp != nil || !create {
		return sp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp = s.spaces[ns]; sp == nil {
		if len(s.spaces) >= s.cfg.MaxNamespaces {
			s.turned++
			return nil
		}
		sp = &space{trie: newTrie(s.cfg.MaxDepth)}
		s.spaces[ns] = sp
	}
	return sp
}

// Stats counts what a Speculator keeps for Suffix mode.
type Stats struct {
	Namespaces int // namespaces kept
	Sequences  int // finished sequences kept
	Tokens     int // their tokens
	Nodes      int // their tries' nodes
	Evicted    int // sequences evicted for a namespace's quota
	Turned     int // sequences not kept because MaxNamespaces was reached
}

// Stats returns the current counts.
func (s *Speculator) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Namespaces: len(s.spaces), Turned: s.turned}
	for _, sp := range s.spaces {
		sp.mu.RLock()
		st.Sequences += len(sp.trie.texts)
		st.Tokens += sp.trie.tokens
		st.Nodes += sp.trie.live()
		st.Evicted += sp.evicts
		sp.mu.RUnlock()
	}
	return st
}
