package speculate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustNew(t testing.TB, cfg Config) *Speculator {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Off, Ngram, Suffix} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, bad := range []string{"", "Ngram", "eagle", "on"} {
		if _, err := ParseMode(bad); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "off, ngram or suffix") {
			t.Errorf("ParseMode(%q): %v", bad, err)
		}
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	s := mustNew(t, Config{})
	want := Config{Mode: Off, K: DefaultK, NgramMin: DefaultNgramMin, NgramMax: DefaultNgramMax,
		MaxDepth: DefaultMaxDepth, MinTokenProb: DefaultMinTokenProb, MaxSpecFactor: DefaultMaxSpecFactor,
		MaxNamespaceTokens: DefaultMaxNamespaceTokens, MaxNamespaces: DefaultMaxNamespaces}
	if s.Config() != want {
		t.Errorf("defaults %+v, want %+v", s.Config(), want)
	}
	if got := mustNew(t, Config{NgramMin: 8}).Config().NgramMax; got != 8 {
		t.Errorf("NgramMax with NgramMin 8 defaults to %d", got)
	}
	for _, tc := range []struct {
		field string
		cfg   Config
	}{
		{"Mode", Config{Mode: 3}},
		{"K", Config{K: -1}},
		{"K", Config{K: 257}},
		{"NgramMin", Config{NgramMin: -2}},
		{"NgramMin", Config{NgramMin: 33}},
		{"NgramMax", Config{NgramMin: 4, NgramMax: 3}},
		{"MaxDepth", Config{MaxDepth: 1}},
		{"MaxDepth", Config{MaxDepth: 65}},
		{"MinTokenProb", Config{MinTokenProb: -0.5}},
		{"MinTokenProb", Config{MinTokenProb: 1.5}},
		{"MaxSpecFactor", Config{MaxSpecFactor: -1}},
		{"MaxSpecFactor", Config{MaxSpecFactor: 1e9}},
		{"MaxNamespaceTokens", Config{MaxNamespaceTokens: -1}},
		{"MaxNamespaceTokens", Config{MaxNamespaceTokens: 1 << 30}},
		{"MaxNamespaces", Config{MaxNamespaces: -3}},
	} {
		_, err := New(tc.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field+" is") {
			t.Errorf("New(%+v): %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
}

// draft returns what d drafts with k, checking that it appends to dst.
func draft(t *testing.T, d Drafter, k int) ([]int32, bool) {
	t.Helper()
	got, predicted := d.Draft([]int32{-1}, k)
	if len(got) == 0 || got[0] != -1 {
		t.Fatalf("Draft did not append to dst: %v", got)
	}
	return got[1:], predicted
}

func TestNgramDraftsMostRecentLongestMatch(t *testing.T) {
	s := mustNew(t, Config{Mode: Ngram, K: 8, NgramMin: 1, NgramMax: 3})
	for _, tc := range []struct {
		name      string
		seq       []int32
		k         int
		want      []int32
		accept    []int32
		wantAfter []int32
	}{
		{"no repeat", []int32{1, 2, 3}, 4, nil, []int32{1}, []int32{2, 3, 1}},
		{"most recent", []int32{5, 1, 7, 5, 1, 8, 9, 5, 1}, 4, []int32{8, 9, 5, 1}, []int32{8}, []int32{9, 5, 1, 8}},
		{"longest first", []int32{2, 5, 1, 9, 9, 7, 1, 6, 2, 5, 1}, 2, []int32{9, 9}, []int32{4}, nil},
		{"k caps", []int32{1, 2, 3, 4, 5, 1}, 2, []int32{2, 3}, nil, []int32{2, 3}},
		{"repeat runs into the end", []int32{3, 3, 3}, 4, []int32{3}, []int32{3}, []int32{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := s.NewDrafter("", tc.seq, nil)
			if got, pred := draft(t, d, tc.k); !slices.Equal(got, tc.want) || pred {
				t.Fatalf("drafted %v (predicted %v), want %v", got, pred, tc.want)
			}
			d.Accept(tc.accept)
			if got, _ := draft(t, d, tc.k); !slices.Equal(got, tc.wantAfter) {
				t.Fatalf("after %v drafted %v, want %v", tc.accept, got, tc.wantAfter)
			}
		})
	}
}

// TestPredictionCodeEdit replays an edit of a file given as the
// prediction: the output changes one line and drops another; the drafter
// follows the prediction, and after each change resumes at the next
// unchanged line.
func TestPredictionCodeEdit(t *testing.T) {
	// Lines of 4 tokens: the old file has lines A B C D E; the new file
	// changes C and drops D.
	line := func(i int32) []int32 { return []int32{100 + i, 200 + i, 300 + i, 10} }
	var old, out []int32
	for i := range int32(5) {
		old = append(old, line(i)...)
	}
	out = slices.Concat(line(0), line(1), []int32{77, 78, 79, 10}, line(4))
	for _, mode := range []Mode{Off, Ngram, Suffix} {
		t.Run(mode.String(), func(t *testing.T) {
			s := mustNew(t, Config{Mode: mode, K: 4, NgramMin: 2, NgramMax: 4})
			d := s.NewDrafter("", []int32{1, 2}, old)
			accepted, drafted := 0, 0
			for i := 0; i < len(out); {
				got, predicted := draft(t, d, 4)
				n := 0
				for n < len(got) && i+n < len(out) && got[n] == out[i+n] {
					n++
				}
				if predicted {
					accepted += n
					drafted += len(got)
				}
				step := min(n+1, len(out)-i)
				d.Accept(out[i : i+step])
				i += step
			}
			// Line 0 is drafted whole (4); then line 1's last three and the
			// old line 2's first token (3 of 4 accepted); after the edited line
			// nothing matches the prediction until "10 104" does, and line 4's
			// last three tokens are drafted (3 of 3).
			if accepted != 10 || drafted != 11 {
				t.Errorf("%d of %d predicted tokens accepted, want 10 of 11", accepted, drafted)
			}
			// Resynchronized on line 4 (after "10 104" matched), the last
			// tokens of the file are drafted.
			d2 := s.NewDrafter("", []int32{1, 2}, old)
			d2.Accept(slices.Concat(line(0), line(1), []int32{77, 78, 79, 10, 104}))
			if got, predicted := draft(t, d2, 4); !slices.Equal(got, []int32{204, 304, 10}) || !predicted {
				t.Errorf("after the edit drafted %v (predicted %v), want [204 304 10]", got, predicted)
			}
		})
	}
}

func TestPredictionPrefersForwardMatch(t *testing.T) {
	// "9 9" occurs twice in the prediction; after a departure at position
	// 6, the drafter resumes at the occurrence after it, not the first.
	pred := []int32{9, 9, 1, 2, 3, 4, 5, 6, 9, 9, 7, 8}
	s := mustNew(t, Config{NgramMin: 2, NgramMax: 2})
	d := s.NewDrafter("", nil, pred)
	d.Accept([]int32{9, 9, 1, 2, 3, 4, 0, 9, 9})
	if got, _ := draft(t, d, 2); !slices.Equal(got, []int32{7, 8}) {
		t.Errorf("drafted %v, want [7 8]", got)
	}
	// Nothing after the departure: the last earlier occurrence.
	d = s.NewDrafter("", nil, pred)
	d.Accept(slices.Concat(pred, []int32{0, 9, 9}))
	if got, _ := draft(t, d, 2); !slices.Equal(got, []int32{7, 8}) {
		t.Errorf("drafted %v, want [7 8]", got)
	}
	// Off mode with no prediction drafts nothing.
	if got, _ := draft(t, s.NewDrafter("", []int32{1, 1, 1, 1}, nil), 4); len(got) != 0 {
		t.Errorf("Off drafted %v with no prediction", got)
	}
}

// TestPredictionTentativeResync: after a departure, a short n-gram that
// occurs where an edit of the same length would resume resynchronizes
// with full drafts; one found far from there (a common run of tokens)
// drafts at most tentativeK tokens until a token confirms it.
func TestPredictionTentativeResync(t *testing.T) {
	pred := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 50, 51, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30}
	s := mustNew(t, Config{K: 8, NgramMin: 2, NgramMax: 5})
	// 5 replaced by 90, then 6 7: where a same-length edit resumes.
	d := s.NewDrafter("", nil, pred)
	d.Accept([]int32{1, 2, 3, 4, 90, 6, 7})
	if got, _ := draft(t, d, 8); !slices.Equal(got, pred[7:15]) {
		t.Errorf("near resync drafted %v, want %v", got, pred[7:15])
	}
	// 5 6 7 replaced by 90 50 51: "50 51" occurs 11 tokens on.
	d = s.NewDrafter("", nil, pred)
	d.Accept([]int32{1, 2, 3, 4, 90, 50, 51})
	if got, _ := draft(t, d, 8); !slices.Equal(got, pred[18:18+tentativeK]) {
		t.Fatalf("far resync drafted %v, want %v", got, pred[18:18+tentativeK])
	}
	d.Accept([]int32{17, 99}) // confirmed by 17; 99 departs again
	d.Accept([]int32{19, 20})
	if got, _ := draft(t, d, 8); !slices.Equal(got, pred[22:30]) {
		t.Errorf("after a confirmed resync and a same-length edit drafted %v, want %v", got, pred[22:30])
	}
}

func TestSuffixDraftsFromOwnNamespaceOnly(t *testing.T) {
	s := mustNew(t, Config{Mode: Suffix, K: 8, MaxSpecFactor: 4})
	secret := []int32{1, 2, 3, 40, 41, 42, 43, 44}
	s.Finished("a", secret)
	s.Finished("a", secret)
	// The same prompt in namespace b drafts nothing of a's text.
	d := s.NewDrafter("b", []int32{1, 2, 3}, nil)
	if got, _ := draft(t, d, 8); len(got) != 0 {
		t.Fatalf("namespace b drafted %v from namespace a's text", got)
	}
	d = s.NewDrafter("a", []int32{1, 2, 3}, nil)
	if got, _ := draft(t, d, 8); !slices.Equal(got, []int32{40, 41, 42, 43, 44}) {
		t.Fatalf("namespace a drafted %v, want [40 41 42 43 44]", got)
	}
	// The draft is at most MaxSpecFactor × match length: one token matched.
	d = s.NewDrafter("a", []int32{9, 3}, nil)
	if got, _ := draft(t, d, 8); !slices.Equal(got, []int32{40, 41, 42, 43}) {
		t.Fatalf("after a 1-token match drafted %v, want 4 tokens", got)
	}
	// A continuation below MinTokenProb is not drafted: after 3, 40 follows
	// once in 11 occurrences.
	for range 9 {
		s.Finished("a", []int32{3, 7})
	}
	d = s.NewDrafter("a", []int32{5, 3}, nil)
	if got, _ := draft(t, d, 8); !slices.Equal(got, []int32{7}) {
		t.Fatalf("drafted %v, want the frequent [7]", got)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestEvictionKeepsQuotaPerNamespace(t *testing.T) {
	s := mustNew(t, Config{Mode: Suffix, MaxDepth: 4, MaxNamespaceTokens: 10, MaxNamespaces: 2})
	for i := range int32(20) {
		s.Finished("a", []int32{i, i + 1, i + 2, 99})
		if i == 0 {
			s.space("a", false).trie.rebase = 3 // renumber the texts every third eviction
		}
		if err := s.Check(); err != nil {
			t.Fatalf("after %d: %v", i, err)
		}
	}
	s.Finished("b", []int32{5, 6, 7})
	s.Finished("c", []int32{5, 6, 7})  // a third namespace is not kept
	s.Finished("a", make([]int32, 25)) // longer than the quota: its tail
	st := s.Stats()
	if st.Namespaces != 2 || st.Turned != 1 || st.Tokens != 13 || st.Sequences != 2 || st.Evicted != 20 {
		t.Errorf("stats %+v", st)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// b's sequence survived every insert into a.
	if got, _ := draft(t, s.NewDrafter("b", []int32{5, 6}, nil), 1); !slices.Equal(got, []int32{7}) {
		t.Errorf("b drafted %v, want [7]", got)
	}
}

// TestConcurrentUse drafts in many goroutines while others finish
// sequences in the same and other namespaces; run with -race.
func TestConcurrentUse(t *testing.T) {
	s := mustNew(t, Config{Mode: Suffix, MaxNamespaceTokens: 200, MaxNamespaces: 3})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			ns := fmt.Sprint(g % 4)
			d := s.NewDrafter(ns, []int32{1, 2, 3}, []int32{4, 5, 6})
			for i := range 300 {
				got, _ := d.Draft(nil, 4)
				tok := int32(i % 7)
				if len(got) > 0 {
					tok = got[0]
				}
				d.Accept([]int32{tok})
				if i%10 == 0 {
					s.Finished(ns, []int32{1, 2, 3, int32(i % 5), 4, 5})
				}
			}
		})
	}
	wg.Wait()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestIndexesPromptOverDrafts: a drafter indexes a long prompt a chunk per
// Draft; meanwhile it drafts from the part indexed (after the first chunk,
// nothing: the prompt's "4 5" comes later), then as a drafter indexed at
// once would.
func TestIndexesPromptOverDrafts(t *testing.T) {
	prompt := []int32{9, 9, 9, 9, 9, 9, 4, 5, 6, 7, 8, 8, 4, 5}
	for _, tc := range []struct {
		mode Mode
		want string
	}{
		{Ngram, "[[] [6 7 8 8] [6 7 8 8] [6 7 8 8]]"},
		{Suffix, "[[] [6 7] [6 7] [6 7]]"}, // at most the match's 2 tokens
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			s := mustNew(t, Config{Mode: tc.mode, K: 4, NgramMin: 2})
			s.chunk = 5
			d := s.NewDrafter("", prompt, nil)
			var got [][]int32
			for range 4 {
				out, _ := draft(t, d, 4)
				got = append(got, out)
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("drafts %v, want %s", got, tc.want)
			}
		})
	}
}

// TestDraftDoesNotWaitForFinished: while a Finished holds the namespace,
// a Draft comes from the sequence's own text instead of waiting.
func TestDraftDoesNotWaitForFinished(t *testing.T) {
	s := mustNew(t, Config{Mode: Suffix, K: 4})
	s.Finished("a", []int32{7, 8, 6, 6, 6})
	d := s.NewDrafter("a", []int32{7, 8, 9, 7, 8, 1, 2, 5, 7, 8}, nil)
	// "7 8" is followed by 6 6 in the namespace (probability 1), by 9 or 1
	// in the sequence (1/2 each, 1 the lower token).
	if got, _ := draft(t, d, 4); !slices.Equal(got, []int32{6, 6}) {
		t.Fatalf("drafted %v, want the namespace's [6 6]", got)
	}
	sp := s.space("a", false)
	sp.mu.Lock() // as a Finished in another goroutine would
	got, _ := draft(t, d, 4)
	sp.mu.Unlock()
	if !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("drafted %v while the namespace was held, want the sequence's own [1 2]", got)
	}
}

// TestPredictionIndexedOverDrafts: after a departure, the prediction is
// indexed a chunk per Draft, and an occurrence before the point of
// departure is not taken while one after it may be yet to be indexed.
func TestPredictionIndexedOverDrafts(t *testing.T) {
	pred := []int32{9, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 7, 8}
	s := mustNew(t, Config{NgramMin: 2, NgramMax: 2})
	s.chunk = 4
	d := s.NewDrafter("", nil, pred)
	d.Accept([]int32{9, 9, 1, 2, 3, 4, 5, 6, 0, 9, 9}) // departs at 8
	var got [][]int32
	for range 3 {
		out, _ := draft(t, d, 2)
		got = append(got, out)
	}
	if fmt.Sprint(got) != "[[] [] [7 8]]" {
		t.Errorf("drafts %v, want [[] [] [7 8]]: the first \"9 9\" is before the departure", got)
	}
}
