package engine

import (
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/jsontest"
	"github.com/prefixd/prefixd/model"
)

// pieceTokenizer maps token i to pieces[i].
type pieceTokenizer []string

func (p pieceTokenizer) AppendPiece(dst []byte, id int32) []byte { return append(dst, p[id]...) }

func TestOutText(t *testing.T) {
	// "é" is C3 A9 and "€" E2 82 AC: pieces 3..5 split them.
	tk := pieceTokenizer{"ab", "c", "STOP", "\xc3", "\xa9\xe2", "\x82\xac", "S", "TOPx"}
	for _, tc := range []struct {
		name     string
		stops    []string
		ids      []int32
		stopped  bool
		text     string
		streamed []string // Text released with each token (the last is final)
	}{
		{"no stops", nil, []int32{0, 1, 0}, false, "abcab", []string{"ab", "c", "ab"}},
		{"utf-8 held until whole", nil, []int32{0, 3, 4, 5}, false, "abé€", []string{"ab", "", "é", "€"}},
		{"stop string in one piece", []string{"STOP"}, []int32{0, 1, 2}, true, "abc", []string{"", "", "abc"}},
		{"stop string across pieces", []string{"STOP"}, []int32{0, 6, 7}, true, "ab", []string{"", "", "ab"}},
		{"held back, then released", []string{"zz"}, []int32{0, 1, 0}, false, "abcab", []string{"a", "b", "cab"}},
		{"earliest of two stops", []string{"b", "ab"}, []int32{1, 0}, true, "c", []string{"", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ot := newOutText(tc.stops)
			var got []string
			stopped := false
			for i, id := range tc.ids {
				stopped = ot.add(tk, id)
				got = append(got, ot.next(stopped || i == len(tc.ids)-1))
				if stopped {
					break
				}
			}
			if stopped != tc.stopped || string(ot.buf) != tc.text {
				t.Fatalf("stopped %v text %q, want %v %q", stopped, ot.buf, tc.stopped, tc.text)
			}
			if strings.Join(got, "|") != strings.Join(tc.streamed, "|") {
				t.Fatalf("streamed %q, want %q", got, tc.streamed)
			}
		})
	}
}

// TestStreamedTextIsResultText checks through the engine that the streamed
// pieces concatenate to Result.Text, with and without a stop string.
func TestStreamedTextIsResultText(t *testing.T) {
	e := newTestEngine(t, newHashModel(testVocab, 512), func(c *Config) { c.Tokenizer = byteTokenizer{} })
	p := prompt(3, 7)
	full := byteTokenizer{}.Decode(expectGreedy(testVocab, p, 40, -1))
	for _, stops := range [][]string{nil, {"#"}, {full[20:23]}} {
		st, err := e.Submit(t.Context(), Request{Prompt: p, MaxTokens: 40, StopStrings: stops})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for tok := range st.Tokens {
			b.WriteString(tok.Text)
		}
		if res := st.Result(); b.String() != res.Text || !strings.HasPrefix(full, res.Text) {
			t.Fatalf("stops %q: streamed %q, result %q, full %q", stops, b.String(), res.Text, full)
		}
	}
	checkDrained(t, e)
}

// FuzzOutText checks streamed text against the naive answer: pieces
// concatenate to the text up to the first stop string to appear, and encoding the
// pieces one by one as JSON strings gives the same text as encoding the
// whole (no UTF-8 sequence is split between pieces).
func FuzzOutText(f *testing.F) {
	f.Add([]byte("hello world"), "wor", "")
	f.Add([]byte("caf\xc3\xa9 \xe2\x82\xac!"), "\xe2\x82", "!")
	f.Add([]byte("\xff\xfeab\xe2"), "b", "zz")
	f.Add([]byte("aaaab"), "aab", "ab")
	f.Fuzz(func(t *testing.T, out []byte, stop1, stop2 string) {
		var stops []string
		for _, s := range []string{stop1, stop2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		ids := model.ByteTokenizer{}.Encode(string(out))
		// The engine's semantics: generation stops at the first token after
		// which the text holds a stop string, and the text is cut at the
		// earliest one in it.
		want := string(out)
	grow:
		for n := 1; n <= len(out); n++ {
			cut := -1
			for _, s := range stops {
				if i := strings.Index(string(out[:n]), s); i >= 0 && (cut < 0 || i < cut) {
					cut = i
				}
			}
			if cut >= 0 {
				want = string(out[:cut])
				break grow
			}
		}
		ot := newOutText(stops)
		var got, viaJSON strings.Builder
		for i, id := range ids {
			stop := ot.add(model.ByteTokenizer{}, id)
			p := ot.next(stop || i == len(ids)-1)
			got.WriteString(p)
			viaJSON.WriteString(jsontest.RoundTrip(t, p))
			if stop {
				break
			}
		}
		if got.String() != want {
			t.Fatalf("pieces give %q, want %q", got.String(), want)
		}
		if viaJSON.String() != jsontest.RoundTrip(t, want) {
			t.Fatalf("pieces through JSON give %q, the whole text %q", viaJSON.String(), jsontest.RoundTrip(t, want))
		}
		if string(ot.buf) != want {
			t.Fatalf("text %q, want %q", ot.buf, want)
		}
	})
}

// TestOutTextDropsDummySpace checks that with a tokenizer that drops a
// leading space at the start of a text (SentencePiece's dummy space, via
// AppendTextPiece) the streamed text and the result lose it too, after
// tokens with empty pieces as well: the pieces concatenate to the
// tokenizer's decoding of the output.
func TestOutTextDropsDummySpace(t *testing.T) {
	tk, err := model.LoadGGUFTokenizer(sharedModelPath(t, "llama-2-tiny-random.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{tk.BOS(), 15043, 3186} // <s> ▁Hello ▁world
	ot := newOutText(nil)
	var streamed []string
	for i, id := range ids {
		ot.add(tk, id)
		streamed = append(streamed, ot.next(i == len(ids)-1))
	}
	if got := strings.Join(streamed, ""); got != "Hello world" || string(ot.buf) != got || tk.Decode(ids) != got {
		t.Fatalf("streamed %q, text %q, Decode %q; want all \"Hello world\"", streamed, ot.buf, tk.Decode(ids))
	}
}
