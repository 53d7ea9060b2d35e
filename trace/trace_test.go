package trace

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	recs := []Record{
		{At: 0, Namespace: "acme", Tokens: []int32{1, 72, 101}, MaxTokens: 64},
		{At: 1250, Namespace: "acme", Blocks: BlockHashes("acme", make([]int32, 40), 16), BlockSize: 16,
			PromptTokens: 40, TTLms: 30000, MaxTokens: 64, OutputTokens: 31},
		{At: 1250, Tokens: []int32{5}, MaxTokens: 1},
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, time.Unix(0, 0))
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != len(recs) {
		t.Fatalf("%d lines for %d records:\n%s", n, len(recs), buf.String())
	}
	got, err := ReadAll(strings.NewReader("# a comment\n\n" + buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, recs)
	}
	if got[1].Prompt() != 40 || got[0].Prompt() != 3 || got[1].TTL() != 30*time.Second || got[1].Arrival() != 1250*time.Millisecond {
		t.Fatalf("accessors of %+v", got)
	}
}

func TestBlockHashes(t *testing.T) {
	toks := make([]int32, 50)
	for i := range toks {
		toks[i] = int32(i)
	}
	a := BlockHashes("x", toks, 16)
	if len(a) != 3 {
		t.Fatalf("%d hashes for 3 whole blocks", len(a))
	}
	b := BlockHashes("x", toks[:32], 16)
	if !reflect.DeepEqual(a[:2], b) {
		t.Fatal("hashes of a shared prefix differ")
	}
	if c := BlockHashes("y", toks, 16); c[0] == a[0] {
		t.Fatal("namespaces share a hash")
	}
	toks[0] = 99
	if d := BlockHashes("x", toks, 16); d[2] == a[2] {
		t.Fatal("a change in the first block did not change the chain")
	}
}

func TestReadErrors(t *testing.T) {
	cases := []struct{ name, in, msg string }{
		{"not json", "{", "line 1"},
		{"no prompt", `{"t_ms":0,"max_tokens":1}`, "needs tokens"},
		{"no max tokens", `{"t_ms":0,"tokens":[1]}`, "max_tokens"},
		{"huge prompt", `{"t_ms":0,"prompt_tokens":100000000000,"max_tokens":1}`, "bounded"},
		{"huge block size", `{"t_ms":0,"blocks":["0000000000000000"],"block_size":4611686018427387904,"prompt_tokens":1,"max_tokens":1}`, "bounded"},
		{"both", `{"t_ms":0,"tokens":[1],"blocks":["0000000000000000"],"block_size":1,"prompt_tokens":1,"max_tokens":1}`, "not both"},
		{"bad hash", `{"t_ms":0,"blocks":["xyz"],"block_size":1,"prompt_tokens":1,"max_tokens":1}`, "16 hex"},
		{"short prompt", `{"t_ms":0,"blocks":["0000000000000000"],"block_size":16,"prompt_tokens":1,"max_tokens":1}`, "shorter"},
		{"backwards", "{\"t_ms\":5,\"tokens\":[1],\"max_tokens\":1}\n{\"t_ms\":4,\"tokens\":[1],\"max_tokens\":1}", "line 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadAll(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want one containing %q", err, c.msg)
			}
		})
	}
}

// TestConcurrentWriter checks that concurrent writes give whole lines in
// non-decreasing time order.
func TestConcurrentWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, time.Now())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := w.Write(Record{At: int64(50*g + i), Tokens: []int32{int32(g)}, MaxTokens: 1}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	r := NewReader(&buf)
	n := 0
	for {
		_, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 400 {
		t.Fatalf("read %d records, want 400", n)
	}
}
