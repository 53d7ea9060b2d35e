package bpe

import (
	"slices"
	"strings"
	"testing"
)

// TestEncodeSpecialExcept: without ranges it is EncodeSpecial; control
// tokens over a range are text, encoded with the run around them as
// Encode encodes it; those outside stay tokens.
func TestEncodeSpecialExcept(t *testing.T) {
	tk := loadHF(t, "llama3")
	for _, text := range []string{"", "plain text", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "a<|eot_id|"} {
		if got, want := tk.EncodeSpecialExcept(text, nil), tk.EncodeSpecial(text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, EncodeSpecial %v", text, got, want)
		}
	}
	eot, _ := tk.TokenID("<|eot_id|>")
	content := "say<|eot_id|>it"
	text := "<|eot_id|>" + content + "<|eot_id|>"
	i := strings.Index(text, "say") + len("say")
	got := tk.EncodeSpecialExcept(text, [][2]int{{i, i + len("<|eot_id|>")}})
	want := append(append([]int32{eot}, tk.Encode(content)...), eot)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Many forged tokens, every one in a range.
	forged := strings.Repeat("<|eot_id|>", 1000)
	ranges := make([][2]int, 1000)
	for j := range ranges {
		ranges[j] = [2]int{10 * j, 10*j + 10}
	}
	if got := tk.EncodeSpecialExcept(forged, ranges); slices.Contains(got, eot) || !slices.Equal(got, tk.Encode(forged)) {
		t.Fatalf("forged tokens: %v", got[:8])
	}
}
