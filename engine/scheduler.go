package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/sample"
)

// scheduler is the state the scheduler goroutine owns.
type scheduler struct {
	e        *Engine
	waiting  []*seq // FIFO; preempted sequences go back to the front
	running  []*seq // in admission order
	draining bool
	admits   uint64
	totals   Stats // the running-total fields only

	// Per-iteration scratch, reused. With it, and each sequence's block
	// table and cached leaf sized for its whole request (at admission and
	// its first insert), an iteration allocates nothing but the growth of
	// output text when the engine decodes text (amortized; pinned by
	// TestSchedulerStepAllocatesNothing).
	plan     []planned
	rows     []Row
	blockBuf []blockstore.BlockID
	groups   []*beamGroup
	held     []*seq      // admit: requests waiting for a leader's prefill
	greedy   []bool      // forward: which rows asking for logits came back as ids
	gm       GreedyModel // the Model, if it is one
	// forward: the rows whose draws the model made (nil: none), pointing
	// into drawBuf; sm is the Model if it is a SamplingModel that draws.
	draws   []*sample.Draw
	drawBuf []sample.Draw
	sm      SamplingModel
}

// planned is a row of the step: chunk positions of s, the last drafts of
// them drafted tokens to verify (see speculative.go).
type planned struct {
	s      *seq
	chunk  int
	drafts int
}

// logits reports whether the row asks for logits: it reaches the end of
// s's tokens (its drafts lie past it).
func (p *planned) logits() bool { return p.s.computed+p.chunk-p.drafts == len(p.s.tokens) }

func (sc *scheduler) init(e *Engine) {
	sc.e = e
	sc.gm, _ = e.cfg.Model.(GreedyModel) // once: an assertion per step can allocate
	if sm, ok := e.cfg.Model.(SamplingModel); ok && sm.Draws() {
		sc.sm = sm
	}
}

// loop is the scheduler goroutine.
func (e *Engine) loop() {
	defer close(e.done)
	sc := &e.sched
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var inbox []*seq
	var calls []func()
	for {
		e.mu.Lock()
		inbox, e.inbox = e.inbox, inbox[:0]
		calls, e.calls = e.calls, calls[:0]
		e.mu.Unlock()
		sc.waiting = append(sc.waiting, inbox...)
		for _, s := range inbox {
			e.prefetch(s)
		}
		clear(inbox)
		for _, fn := range calls {
			fn()
		}
		clear(calls)
		if sc.draining && len(sc.running) == 0 && len(sc.waiting) == 0 {
			e.mu.Lock()
			e.stopped.Store(true)
			calls, e.calls = e.calls, nil
			e.mu.Unlock()
			for _, fn := range calls {
				fn()
			}
			e.publish()
			return
		}
		worked := sc.step()
		e.publish()
		if worked || sc.draining && len(sc.running) == 0 && len(sc.waiting) == 0 {
			continue
		}
		if at, ok := e.cache.NextDeadline(); ok {
			timer.Reset(max(at.Sub(e.cfg.Clock.Now()), time.Millisecond))
		}
		select {
		case <-e.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// step runs one iteration and reports whether it did any work. In builds
// tagged invariants it then checks every invariant of the pool, the tree
// and the sequences' holdings, and panics on the first one broken, so a
// test fails at the step that broke it.
func (sc *scheduler) step() bool {
	worked := sc.iterate()
	if invariants {
		if err := sc.e.check(); err != nil {
			panic("engine: invariant broken by a scheduler step: " + err.Error())
		}
	}
	return worked
}

// iterate is one scheduler iteration.
func (sc *scheduler) iterate() bool {
	e := sc.e
	sc.retireCancelled()
	if !e.cfg.DisablePrefixCache {
		e.cache.Sweep()
	}
	sc.admit()
	ended := sc.totals.Preemptions + sc.totals.Requests
	if !sc.planBatch() {
		// A sequence that left the batch to make room may let others in.
		return sc.totals.Preemptions+sc.totals.Requests != ended
	}
	sc.rows = sc.rows[:0]
	tokens := 0
	for _, p := range sc.plan {
		s := p.s
		sc.rows = append(sc.rows, Row{
			Tokens: s.tokens[s.computed : s.computed+p.chunk], // drafts: in the spare capacity
			Start:  s.computed,
			Blocks: s.table.Blocks(),
			Logits: p.logits(),
			Drafts: p.drafts,
		})
		tokens += p.chunk
	}
	start := time.Now()
	logits, ids, err := sc.forward()
	if e.cfg.Observer != nil {
		e.cfg.Observer.Step(len(sc.rows), tokens, time.Since(start))
	}
	sc.observePrefill(time.Since(start))
	sc.totals.Steps++
	if err != nil {
		for _, p := range sc.plan {
			if !p.s.owner().finished { // a beam group has several rows
				sc.finish(p.s, FinishError, 0, err)
			}
		}
		return true
	}
	sc.advance(logits, ids)
	return true
}

// retireCancelled finishes every sequence whose caller went away.
func (sc *scheduler) retireCancelled() {
	for i := 0; i < len(sc.waiting); {
		if s := sc.waiting[i]; s.isCancelled() {
			sc.waiting = slices.Delete(sc.waiting, i, i+1)
			sc.finish(s, FinishCancelled, 0, nil)
			continue
		}
		i++
	}
	for i := 0; i < len(sc.running); {
		s := sc.running[i]
		if s.isCancelled() {
			sc.finish(s, FinishCancelled, 0, nil) // removes s (or its group) from running
			continue
		}
		i++
	}
}

// cancelAll cancels every request (Close past its deadline).
func (sc *scheduler) cancelAll() {
	for _, s := range sc.waiting {
		s.cancelled = true
	}
	for _, s := range sc.running {
		s.cancelled = true
	}
}

// cacheOn reports whether s reads and writes the prefix cache.
func (sc *scheduler) cacheOn(s *seq) bool {
	return !sc.e.cfg.DisablePrefixCache && !s.req.Cache.Disabled
}

// admit moves waiting requests into the running set while limits allow.
func (sc *scheduler) admit() {
	e := sc.e
	if e.cfg.Batching == Static && len(sc.running) > 0 {
		return // a static batch admits only when the previous one is done
	}
	sc.held = sc.held[:0]
	for len(sc.waiting) > 0 {
		i := sc.pickNext()
		s := sc.waiting[i]
		if len(sc.running)+s.slots() > e.cfg.MaxRunning {
			break
		}
		if sc.followsLeader(s) || sc.awaitsFetch(s) {
			sc.held = append(sc.held, s)
			sc.waiting = slices.Delete(sc.waiting, i, i+1)
			continue
		}
		if need := sc.tryAdmit(s); need > 0 {
			if len(sc.running) > 0 {
				break // blocks free up as others finish
			}
			sc.waiting = slices.Delete(sc.waiting, i, i+1)
			sc.finish(s, FinishError, 0, sc.noRoom(need))
			continue
		}
		for _, w := range sc.waiting[:i] { // CachedFirst passed them over
			w.skipped++
		}
		sc.waiting = slices.Delete(sc.waiting, i, i+1)
	}
	sc.waiting = slices.Insert(sc.waiting, 0, sc.held...)
	clear(sc.held)
}

// followsLeader reports whether s should wait because a running sequence
// is prefilling a longer stretch of s's prompt than the cache holds: the
// leader inserts each block into the cache as it fills, so s, admitted a
// little later, adopts those blocks instead of computing them a second
// time (the way singleflight merges identical calls). Static batches form
// as they are, the baseline they are.
func (sc *scheduler) followsLeader(s *seq) bool {
	e := sc.e
	if e.cfg.Batching == Static || !sc.cacheOn(s) {
		return false
	}
	b := e.cfg.BlockSize
	prompt := s.tokens[:len(s.tokens)-1] // what admission looks up
	cached := -1
	for _, r := range sc.running {
		if r.computed >= r.nPrompt || r.req.Namespace != s.req.Namespace || !sc.cacheOn(r) {
			continue
		}
		n := 0
		for n < len(prompt) && n < r.nPrompt && prompt[n] == r.tokens[n] {
			n++
		}
		if n = n / b * b; n <= r.computed/b*b {
			continue // what they share is cached already
		}
		if cached < 0 {
			cached = e.cache.Cached(s.req.Namespace, prompt)
		}
		if n > cached {
			return true
		}
	}
	return false
}

// pickNext returns the index of the waiting request to admit next: the
// head, or with CachedFirst the one with the longest cached prefix among
// the first few, unless one of those was passed over too often. A request
// counts as passed over when one behind it is admitted (by admit), not on
// passes that admit nobody.
func (sc *scheduler) pickNext() int {
	const window, maxSkips = 32, 16
	e := sc.e
	if !e.cfg.CachedFirst || e.cfg.DisablePrefixCache || len(sc.waiting) == 1 {
		return 0
	}
	n := min(window, len(sc.waiting))
	best, bestLen := 0, -1
	for i, s := range sc.waiting[:n] {
		if s.skipped >= maxSkips {
			best = i
			break
		}
		if !sc.cacheOn(s) {
			continue
		}
		if c := e.cache.Peek(s.req.Namespace, s.tokens).Cached(); c > bestLen {
			best, bestLen = i, c
		}
	}
	return best
}

// tryAdmit gives s a block table starting with its cached prefix and makes
// sure the blocks for the rest of its prompt and its first decode are free
// (evicting cache if needed). If they are not it returns how many blocks
// it lacked, holding nothing; it returns 0 once s runs.
func (sc *scheduler) tryAdmit(s *seq) (short int) {
	e := sc.e
	b := e.cfg.BlockSize
	t := e.pool.NewTable()
	t.Grow(blockstore.BlocksFor(s.nPrompt+s.req.MaxTokens, b)) // no reallocation as it fills
	// A contiguous table reserves the request's whole length now. A paged
	// one needs the blocks of every token it has yet to compute (a
	// preempted sequence's output included) and of the first position it
	// decodes next, so it is not preempted at its first step; but never
	// more than its last position: the final token is sampled, never fed.
	a := eviction.Admission{Namespace: s.req.Namespace, Use: s.cacheUse(),
		Blocks: blockstore.BlocksFor(min(len(s.tokens)+1, s.nPrompt+s.req.MaxTokens-1), b)}
	if e.cfg.KVAlloc == Contiguous {
		a.Blocks = blockstore.BlocksFor(s.nPrompt+s.req.MaxTokens, b)
	}
	if sc.cacheOn(s) {
		// The last token is never looked up: the model must compute at
		// least it, for the logits of the next token, even when the whole
		// prompt is cached.
		a.Tokens = s.tokens[:len(s.tokens)-1]
	}
	// Admit records the use (hits, hit ages, the prefix's refresh) only
	// when the room is there: a request that waits here for many steps
	// counts once, when it is admitted.
	hit, short := e.cache.Admit(a, sc.blockBuf[:0])
	sc.blockBuf = hit.Blocks
	if short > 0 {
		t.Release()
		return short
	}
	if err := t.Adopt(hit.Blocks); err != nil {
		panic("engine: adopting a cached prefix: " + err.Error())
	}
	s.pin = hit.Handle
	if e.cfg.KVAlloc == Contiguous {
		if err := t.Reserve(s.nPrompt + s.req.MaxTokens); err != nil {
			panic("engine: reserving blocks found free: " + err.Error())
		}
	}
	now := e.cfg.Clock.Now()
	s.table = t
	s.computed = t.Len()
	s.inserted = s.computed / e.cfg.BlockSize // the adopted prefix is in the tree already
	sc.admits++
	s.admitSeq = sc.admits
	s.admitted = now
	sc.totals.CacheQueryTokens += uint64(len(s.tokens) - 1)
	sc.totals.CacheHitDevice += uint64(hit.Tokens[kvcache.TierDevice])
	sc.totals.CacheHitHost += uint64(hit.Tokens[kvcache.TierHost])
	sc.totals.CacheHitDisk += uint64(hit.Tokens[kvcache.TierDisk])
	sc.totals.CacheHitRemote += uint64(hit.Tokens[kvcache.TierRemote])
	if !s.everAdmitted {
		s.everAdmitted = true
		s.usage.CachedTokens = hit.Cached()
		s.usage.HostCachedTokens = hit.Tokens[kvcache.TierHost]
		s.usage.PromptTokens = s.nPrompt
		sc.totals.PromptTokens += uint64(s.nPrompt)
		e.mu.Lock()
		e.queued--
		e.mu.Unlock()
	}
	if s.group != nil {
		s.group.admitSeq = s.admitSeq
	}
	sc.running = append(sc.running, s)
	return 0
}

// noRoom is the error of a request that lacks short blocks with nothing
// else running. Validate refuses a request the pool cannot hold, so only
// operator pins added after it was accepted can take the room it needs.
func (sc *scheduler) noRoom(short int) error {
	pinned, _ := sc.e.cache.PinnedBlocks()
	return fmt.Errorf("%w: it lacks %d of the pool's %d blocks; operator pins hold %d",
		ErrNoRoom, short, sc.e.cfg.NumBlocks, pinned)
}

// cacheOnAny reports whether the prefix cache exists at all (so Reclaim can
// free anything).
func (sc *scheduler) cacheOnAny() bool { return !sc.e.cfg.DisablePrefixCache }

// planBatch chooses this iteration's rows: a decode row for every running
// sequence, then prefill chunks within the token budget, and secures their
// blocks, evicting cache and then preempting the most recently admitted
// sequences if the pool runs short. It reports whether there is work.
func (sc *scheduler) planBatch() bool {
	e := sc.e
	drafting := true // until blocks run short: drafts go first
	for {
		sc.plan = sc.plan[:0]
		budget := e.cfg.MaxBatchTokens
		for _, s := range sc.running {
			if s.pending() == 1 {
				sc.plan = append(sc.plan, planned{s, 1, 0})
				budget--
			}
		}
		if drafting && sc.speculates(len(sc.plan)) {
			for i := range sc.plan {
				p := &sc.plan[i]
				p.drafts = sc.draft(p.s, budget)
				p.chunk += p.drafts
				budget -= p.drafts
			}
		}
		for _, s := range sc.running {
			if p := s.pending(); p > 1 && budget > 0 {
				chunk := min(p, e.cfg.PrefillChunk, budget)
				sc.plan = append(sc.plan, planned{s, chunk, 0})
				budget -= chunk
			}
		}
		if len(sc.plan) == 0 {
			return false
		}
		need := 0
		for _, p := range sc.plan {
			need += p.s.table.BlocksNeeded(p.chunk)
		}
		if need <= e.pool.NumFree() {
			break
		}
		if drafting && slices.ContainsFunc(sc.plan, func(p planned) bool { return p.drafts > 0 }) {
			drafting = false
			continue
		}
		if sc.cacheOnAny() && e.cache.Reclaim(need) == nil {
			break
		}
		sc.preemptYoungest(need - e.pool.NumFree())
	}
	for _, p := range sc.plan {
		if err := p.s.table.Append(p.chunk); err != nil {
			panic("engine: planned blocks were not there: " + err.Error())
		}
	}
	return true
}

// preemptYoungest frees the most recently admitted sequence (or beam
// group) and queues it at the front to be recomputed later; its cached
// prefix makes that cheap. The batch planned was short blocks short.
func (sc *scheduler) preemptYoungest(short int) {
	var victim *seq
	for _, s := range sc.running {
		if victim == nil || s.admitSeq > victim.admitSeq {
			victim = s
		}
	}
	if !slices.ContainsFunc(sc.running, func(s *seq) bool { return s.owner() != victim.owner() }) {
		// It runs alone: preempting it would only start it over.
		sc.finish(victim, FinishError, 0, sc.noRoom(short))
		return
	}
	if victim.group != nil {
		victim = victim.group.reset(sc)
	} else {
		sc.dropRunning(victim)
		victim.release(sc.e)
	}
	victim.usage.Preemptions++
	sc.totals.Preemptions++
	sc.waiting = slices.Insert(sc.waiting, 0, victim)
}

func (sc *scheduler) dropRunning(s *seq) {
	if i := slices.Index(sc.running, s); i >= 0 {
		sc.running = slices.Delete(sc.running, i, i+1)
	}
}

// advance consumes a forward pass: records computed positions, offers
// newly full blocks to the cache, and samples the next token of every row
// that asked for logits (taking the model's argmax for those forward
// marked greedy).
func (sc *scheduler) advance(logits []float32, ids []int32) {
	e := sc.e
	vocab := e.cfg.Model.VocabSize()
	now := e.cfg.Clock.Now()
	li := 0
	sc.groups = sc.groups[:0]
	for _, p := range sc.plan {
		s := p.s
		if n := min(s.computed+p.chunk, s.nPrompt) - s.computed; n > 0 {
			s.usage.PrefillTokens += n
			sc.totals.PrefillTokens += uint64(n)
		}
		if p.drafts > 0 {
			s.computed++ // the row's first token; verify counts the drafts it keeps
			sc.offerBlocks(s)
			sc.verify(s, p.drafts, logits, ids, li, now)
			li += 1 + p.drafts
			continue
		}
		s.computed += p.chunk
		sc.offerBlocks(s)
		if s.computed >= s.nPrompt {
			s.lease.end() // after offerBlocks wrote the prompt's blocks through: the tier keeps their order
		}
		if s.computed != len(s.tokens) {
			continue
		}
		row := logits[li*vocab : (li+1)*vocab]
		li++
		if s.group != nil {
			s.group.collect(s, row)
			if !slices.Contains(sc.groups, s.group) {
				sc.groups = append(sc.groups, s.group)
			}
			continue
		}
		if s.choices != nil {
			sc.forkChoices(s, row, now)
		}
		sc.sampleNext(s, sc.greedyID(li-1, ids), row, now)
	}
	for _, g := range sc.groups {
		g.advance(sc)
	}
}

// forkChoices starts the other choices of s, the first, which has just
// computed its prompt: each forks s's block table, sharing every block
// (the partial last one is copied when a choice writes into it), and
// samples its first token from the same logits.
func (sc *scheduler) forkChoices(s *seq, logits []float32, now time.Time) {
	for _, c := range s.choices {
		c.table = s.table.Fork()
		c.computed, c.inserted = s.computed, s.inserted
		c.callerGone = s.callerGone
		c.everAdmitted, c.admitted, c.admitSeq = true, s.admitted, s.admitSeq
		c.usage.CachedTokens, c.usage.HostCachedTokens = s.usage.CachedTokens, s.usage.HostCachedTokens
		c.usage.CacheWriteTokens = s.usage.CacheWriteTokens
		sc.running = append(sc.running, c)
		sc.sampleNext(c, -1, logits, now)
	}
	s.choices = nil
}

// sampleNext emits s's next token: id when it is not -1 (the model's
// argmax or draw, see greedyID, which s's sampler Accepts), else a draw
// of s's sampler from logits; or it fails s if the logits, or the row
// the model took id from, are not finite (nonFiniteID).
func (sc *scheduler) sampleNext(s *seq, id int32, logits []float32, now time.Time) {
	tok, err := id, error(nil)
	switch {
	case id == nonFiniteID:
		err = fmt.Errorf("%w: the model's row", sample.ErrNonFinite)
	case id < 0:
		tok, err = s.sampler.Next(logits)
	default:
		s.sampler.Accept(id)
	}
	if err != nil {
		sc.failNonFinite(s, len(s.generated()), err)
		return
	}
	sc.emit(s, tok, now)
}

// failNonFinite fails s (a beam: its search), whose logits for output
// token n held NaN or an infinity (err says which), and counts it.
func (sc *scheduler) failNonFinite(s *seq, n int, err error) {
	sc.totals.NonFiniteLogits++
	sc.finish(s, FinishError, 0, fmt.Errorf("%w: output token %d: %w", ErrNonFinite, n, err))
}

// offerBlocks inserts s's newly full blocks into the prefix cache, moving
// its pin to the end of what it offered. Beams offer only their prompt:
// their divergent outputs are rarely reused.
func (sc *scheduler) offerBlocks(s *seq) {
	if !sc.cacheOn(s) {
		return
	}
	e := sc.e
	limit := s.computed
	if s.group != nil {
		limit = min(limit, s.nPrompt)
	}
	full := limit / e.cfg.BlockSize
	if full <= s.inserted {
		return
	}
	existing, pin, err := e.cache.Extend(s.req.Namespace, s.pin, s.tokens[:full*e.cfg.BlockSize], s.table.Blocks()[:full], s.cacheUse())
	if err != nil {
		panic("engine: inserting whole blocks: " + err.Error())
	}
	s.pin = pin
	// Count the prompt blocks this Extend wrote: those past what the cache
	// held and past what s offered before (a readmitted s finds its own
	// earlier blocks as existing).
	if from, to := max(existing, s.inserted), min(full, s.nPrompt/e.cfg.BlockSize); to > from {
		s.usage.CacheWriteTokens += (to - from) * e.cfg.BlockSize
	}
	if existing > s.inserted {
		sc.shareCached(s, existing)
	}
	sc.publishRemote(s, max(existing, s.inserted))
	s.inserted = full
	// Room in the tree for the rest of what s can offer (every position it
	// can compute), so its leaf grows without allocating; a no-op once
	// made, and what s does not fill is given back when it is done.
	last := s.nPrompt + s.req.MaxTokens - 1
	if s.group != nil {
		last = s.nPrompt
	}
	e.cache.Reserve(pin, last-full*e.cfg.BlockSize)
}

// shareCached swaps s's blocks [s.inserted, upTo), which the cache held
// already (s computed them again: its output repeated a cached one), for
// the cache's copies, freeing its own. Otherwise s would hold the same K/V
// twice, the cache's copy pinned by s's own handle, and a request that
// fits the pool could run out of blocks alone.
func (sc *scheduler) shareCached(s *seq, upTo int) {
	b := sc.e.cfg.BlockSize
	for n := s.pin.Node(); n != nil && !n.IsRoot(); n = n.Parent() {
		end := n.Depth() / b
		start := end - len(n.Blocks())
		if end <= s.inserted {
			return
		}
		for i := max(start, s.inserted); i < min(end, upTo); i++ {
			s.table.Replace(i, n.Blocks()[i-start])
		}
	}
}

// errNoAllowedToken fails a sequence whose grammar allows no token.
var errNoAllowedToken = errors.New("engine: the output grammar allows no token here")

// emit appends a sampled token to s, streams it, and finishes s if it must
// stop.
func (sc *scheduler) emit(s *seq, tok int32, now time.Time) {
	e := sc.e
	if s.matcher != nil && (tok < 0 || !s.matcher.AcceptToken(tok)) {
		// The sampler draws only allowed tokens: this is a grammar with a
		// dead end, or one too ambiguous to follow (matcher.Err).
		err := s.matcher.Err()
		if err == nil {
			err = errNoAllowedToken
		}
		sc.finish(s, FinishError, 0, err)
		return
	}
	s.tokens = append(s.tokens, tok)
	sc.totals.GeneratedTokens++
	if len(s.generated()) == 1 {
		s.stream.result.Timing.FirstToken = now.Sub(s.submitted)
	} else {
		s.itl = append(s.itl, now.Sub(s.lastToken))
	}
	s.lastToken = now
	s.recordLogprobs()
	reason, stop, trim := s.stopReason(e)
	if trim == 0 {
		sc.send(s, tok, stop)
	}
	if stop {
		sc.finish(s, reason, trim, nil)
	}
}

// send streams one token, with the text it releases (all that is left if
// it is the last).
func (sc *scheduler) send(s *seq, tok int32, last bool) {
	t := Token{ID: tok}
	if s.req.Logprobs && s.group == nil {
		lp := s.logprobs[len(s.logprobs)-1]
		t.Logprob, t.Top = lp.Logprob, lp.Top
	}
	if sc.e.cfg.Tokenizer != nil {
		t.Text = s.text.next(last)
	}
	s.stream.tokens <- t // buffered for MaxTokens+1: never blocks
}

// finish ends a request (for a beam, its whole group): releases its
// blocks, builds its Result and closes its stream.
func (sc *scheduler) finish(s *seq, reason FinishReason, trim int, err error) {
	e := sc.e
	if s.group != nil {
		s.group.finish(sc, reason, err)
		return
	}
	sc.dropRunning(s)
	s.release(e)
	out := s.generated()
	out = out[:len(out)-trim]
	sc.specFinished(s, out, reason)
	sc.deliver(s, slices.Clone(out), reason, err)
	// Choices not yet forked (a cancel or failure before the prompt was
	// done) end with their first.
	for _, c := range s.choices {
		sc.deliver(c, nil, reason, err)
	}
	s.choices = nil
}

// deliver completes s's stream with its Result.
func (sc *scheduler) deliver(s *seq, out []int32, reason FinishReason, err error) {
	e := sc.e
	now := e.cfg.Clock.Now()
	if !s.everAdmitted && s.choiceOf == nil { // choices are queued as their first
		e.mu.Lock()
		e.queued--
		e.mu.Unlock()
	}
	s.finished = true
	res := &s.stream.result
	res.Tokens = out
	if s.logprobs != nil {
		res.Logprobs = slices.Clone(s.logprobs[:len(out)])
	}
	res.Finish = reason
	res.Err = err
	res.Text = string(s.text.buf)
	s.usage.CompletionTokens = len(out)
	res.Usage = s.usage
	if s.everAdmitted {
		res.Timing.Queue = s.admitted.Sub(s.submitted)
	}
	res.Timing.Total = now.Sub(s.submitted)
	res.Timing.InterTokens = s.itl
	sc.totals.Requests++
	if s.stream.stop != nil {
		s.stream.stop()
	}
	close(s.stream.tokens)
	close(s.stream.done)
	if e.cfg.Observer != nil {
		e.cfg.Observer.Finished(res)
	}
}
