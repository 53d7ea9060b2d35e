package speculate

import (
	"slices"
	"testing"
)

// bytesReader hands out a fuzz input's bytes, zeros once it is spent.
type bytesReader struct{ b []byte }

func (r *bytesReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	v := int(r.b[0])
	r.b = r.b[1:]
	return v
}

// tokens reads up to max tokens of a small vocabulary (so texts repeat).
func (r *bytesReader) tokens(max, vocab int) []int32 {
	n := r.next() % (max + 1)
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.next() % vocab)
	}
	return out
}

// fuzzSeq is a drafter under test and the naive model's view of it.
type fuzzSeq struct {
	d    Drafter
	ns   string
	seq  []int32
	pred []int32
}

// FuzzDraft drives a Speculator with a program read from the input:
// drafters created, fed and asked for drafts, and sequences finished in
// three namespaces under small quotas. Every Suffix and Ngram draft must
// equal the naive model's over the same namespace's texts only; every
// prediction draft must be the prediction's continuation of the
// sequence's tail; no draft is longer than k; Check passes after each step.
func FuzzDraft(f *testing.F) {
	f.Add([]byte("\x02\x04\x01\x03\x01\x02\x00\x08\x01\x02\x01\x02\x01\x02\x03\x02\x05"))
	f.Add([]byte("\x01\x03\x02\x02\x00\x00\x00\x06\x01\x01\x01\x01\x01\x01\x02\x04\x02\x01"))
	f.Add([]byte("\x00\x04\x01\x02\x00\x00\x01\x05\x03\x01\x02\x03\x07\x01\x02\x09\x03\x02\x04"))
	f.Add([]byte("\x02\x08\x02\x03\x02\x00\x02\x20\x03\x01\x02\x03\x01\x02\x03\x01\x02\x03\x01\x02\x03\x00\x04\x00\x03\x04\x01\x03"))
	f.Fuzz(fuzzBody)
}

func fuzzBody(t *testing.T, data []byte) {
	r := &bytesReader{b: data}
	cfg := Config{
		Mode:               Mode(r.next() % 3),
		K:                  1 + r.next()%8,
		NgramMin:           1 + r.next()%3,
		MaxDepth:           2 + r.next()%7,
		MinTokenProb:       []float64{0.1, 0.5, 1e-9, 1}[r.next()%4],
		MaxSpecFactor:      []float64{1, 0.5, 2, 8}[r.next()%4],
		MaxNamespaceTokens: 4 + r.next()%40,
		MaxNamespaces:      1 + r.next()%3,
	}
	cfg.NgramMax = cfg.NgramMin + r.next()%4
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = s.Config()
	rebase := int32(1 + r.next()%4) // renumber texts often
	s.chunk = []int{1 << 30, 1, 3}[r.next()%3]
	spaces := map[string]*naiveSpace{}
	names := []string{"a", "b", "c"}
	var seqs []*fuzzSeq
	for step := 0; len(r.b) > 0 && step < 200; step++ {
		switch op := r.next() % 5; {
		case op == 0 || len(seqs) == 0:
			fs := &fuzzSeq{ns: names[r.next()%3], seq: r.tokens(12, 5)}
			if r.next()%2 == 0 {
				fs.pred = r.tokens(16, 5)
			}
			fs.d = s.NewDrafter(fs.ns, fs.seq, fs.pred)
			seqs = append(seqs, fs)
		case op == 1:
			fs := seqs[r.next()%len(seqs)]
			tok := r.tokens(4, 5)
			fs.d.Accept(tok)
			fs.seq = append(fs.seq, tok...)
		case op == 2:
			ns := names[r.next()%3]
			seq := r.tokens(20, 5)
			if sp := s.space(ns, false); sp != nil {
				sp.trie.rebase = rebase
			}
			s.Finished(ns, seq)
			if cfg.Mode == Suffix && len(seq) > 0 {
				if spaces[ns] == nil && len(spaces) < cfg.MaxNamespaces {
					spaces[ns] = &naiveSpace{}
				}
				if spaces[ns] != nil {
					spaces[ns].finished(seq, cfg.MaxNamespaceTokens)
				}
			}
		default:
			fs := seqs[r.next()%len(seqs)]
			k := r.next() % 10
			checkDraft(t, s, fs, spaces[fs.ns], k)
		}
		if err := s.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if local := seqs[len(seqs)-1].d.(*drafter).local; local != nil {
			fresh := newTrie(cfg.MaxDepth)
			fresh.add(local.texts[0])
			if err := local.check(); err != nil {
				t.Fatalf("step %d: a drafter's trie: %v", step, err)
			}
			if err := sameTrie(local, fresh); err != nil {
				t.Fatalf("step %d: a drafter's trie: %v", step, err)
			}
		}
	}
}

func checkDraft(t *testing.T, s *Speculator, fs *fuzzSeq, sp *naiveSpace, k int) {
	t.Helper()
	cfg := s.Config()
	prefix := []int32{-7} // Draft must append after what dst holds
	got, predicted := fs.d.Draft(slices.Clone(prefix), k)
	if !slices.Equal(got[:1], prefix) {
		t.Fatalf("Draft overwrote dst: %v", got)
	}
	got = got[1:]
	k = min(k, cfg.K)
	if len(got) > k {
		t.Fatalf("%d tokens drafted, k %d", len(got), k)
	}
	if predicted {
		if !isPredictionDraft(fs.pred, fs.seq, got, k, cfg.NgramMin) {
			t.Fatalf("prediction draft %v of %v does not continue the tail of %v", got, fs.pred, fs.seq)
		}
		return
	}
	if s.chunk < len(fs.seq) {
		// The drafter may be indexing its sequence still: its drafts are the
		// continuation of a match, but maybe not of the longest.
		checkPartialDraft(t, cfg, fs.seq, sp, got)
		return
	}
	var want []int32
	switch cfg.Mode {
	case Ngram:
		want = naiveNgram(fs.seq, cfg.NgramMin, cfg.NgramMax, k)
	case Suffix:
		tail := fs.seq[max(0, len(fs.seq)-cfg.MaxDepth):]
		var global float64
		if sp != nil {
			want, global = naiveSuffix(sp.seqs, tail, cfg.MaxDepth, k, cfg.MaxSpecFactor, cfg.MinTokenProb)
		}
		if own, score := naiveSuffix([][]int32{fs.seq}, tail, cfg.MaxDepth, k, cfg.MaxSpecFactor, cfg.MinTokenProb); score >= global {
			want = own
		}
	}
	if k == 0 {
		want = nil
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%v drafted %v after %v, naive %v", cfg.Mode, got, fs.seq, want)
	}
}

// isPredictionDraft reports whether draft is what follows an occurrence in
// pred of the sequence's whole output so far or of a tail of at least minN
// tokens, as much of it as k allows (or a tentative resumption's
// tentativeK).
func isPredictionDraft(pred, seq, draft []int32, k, minN int) bool {
	if len(draft) == 0 {
		return false
	}
	for p := 0; p < len(pred); p++ {
		n := len(draft)
		if p+n > len(pred) || !slices.Equal(pred[p:p+n], draft) || n < k && n != tentativeK && p+n < len(pred) {
			continue
		}
		if p <= len(seq) && slices.Equal(pred[:p], seq[len(seq)-p:]) {
			return true // the output so far is the prediction's start
		}
		for m := minN; m <= p && m <= len(seq); m++ {
			if slices.Equal(pred[p-m:p], seq[len(seq)-m:]) {
				return true
			}
		}
	}
	return false
}

// checkPartialDraft checks that a Ngram or Suffix draft follows an
// occurrence of the sequence's last m tokens in its own text or its
// namespace's, with m at least NgramMin (Ngram) or len(draft) at most
// MaxSpecFactor × m (Suffix).
func checkPartialDraft(t *testing.T, cfg Config, seq []int32, sp *naiveSpace, draft []int32) {
	t.Helper()
	if len(draft) == 0 {
		return
	}
	texts := [][]int32{seq}
	if sp != nil && cfg.Mode == Suffix {
		texts = append(texts, sp.seqs...)
	}
	m := 0 // the longest tail that draft follows somewhere
	for n := 1; n <= len(seq); n++ {
		if _, ok := naiveFollowers(texts, slices.Concat(seq[len(seq)-n:], draft)); ok {
			m = n
		}
	}
	switch {
	case m == 0:
		t.Fatalf("%v drafted %v, which follows no tail of %v", cfg.Mode, draft, seq)
	case cfg.Mode == Ngram && m < cfg.NgramMin:
		t.Fatalf("ngram drafted %v after a match of %d tokens", draft, m)
	case cfg.Mode == Suffix && len(draft) > int(float64(m)*cfg.MaxSpecFactor+1e-9):
		t.Fatalf("suffix drafted %v after a match of %d tokens, factor %v", draft, m, cfg.MaxSpecFactor)
	}
}
