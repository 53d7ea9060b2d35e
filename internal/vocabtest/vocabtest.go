// Package vocabtest reads llama.cpp's tokenizer test pairs and the shared
// test models for the tokenizer tests of model/, tokenizer/ and chat/,
// and runs the reference scripts (scripts/llamacpp) those tests compare
// with.
package vocabtest

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Path returns ../shared/models/name beside the repository root (the
// folder holding go.mod above the test), skipping the test if it is
// absent, as the model tests do.
func Path(t testing.TB, name string) string {
	t.Helper()
	dir, err := repoRoot()
	p := filepath.Join(dir, "..", "shared", "models", name)
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		t.Skipf("test data %s not available: %v", name, err)
	}
	return p
}

// repoRoot is the folder holding go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	for err == nil {
		if _, statErr := os.Stat(filepath.Join(dir, "go.mod")); statErr == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test")
		}
		dir = parent
	}
	return "", err
}

// Case is one reference tokenization: llama.cpp's tokens of Text, without
// BOS and with special tokens not parsed.
type Case struct {
	Text string
	IDs  []int32
}

// separator joins the cases of a .inp file (and ends it).
const separator = "\n__ggml_vocab_test__\n"

// Cases reads the pair vocab/<name>.inp and .out (name as
// "ggml-vocab-gpt-2.gguf"): the .inp holds the texts joined by separator,
// the .out one line of space-separated IDs per case.
func Cases(t testing.TB, name string) []Case {
	t.Helper()
	return CasesIn(t, filepath.Dir(Path(t, "vocab/"+name+".inp")), name)
}

// CasesIn reads the pair dir/<name>.inp and .out, as Cases does for the
// shared folder (dir as llama.cpp's models/ folder).
func CasesIn(t testing.TB, dir, name string) []Case {
	t.Helper()
	inp, err := os.ReadFile(filepath.Join(dir, name+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(dir, name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(strings.TrimSuffix(string(inp), separator), separator)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(texts) != len(lines) {
		t.Fatalf("%s: %d texts, %d token lines", name, len(texts), len(lines))
	}
	cases := make([]Case, len(texts))
	for i, text := range texts {
		cases[i].Text = text
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s line %d: %v", name, i+1, err)
			}
			cases[i].IDs = append(cases[i].IDs, int32(id))
		}
	}
	if len(cases) < 10 {
		t.Fatalf("%s: only %d cases", name, len(cases))
	}
	return cases
}

// Compare encodes every case with encode and reports each whose tokens
// differ as an error of t, logging how many of how many were equal under
// name.
func Compare(t testing.TB, name string, cases []Case, encode func(string) []int32) {
	t.Helper()
	pass := 0
	for _, c := range cases {
		if got := encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
		} else {
			pass++
		}
	}
	t.Logf("%s: %d of %d cases equal", name, pass, len(cases))
}

// MixedText returns about n bytes of deterministic mixed text: English
// prose, code, numbers, Cyrillic, Chinese, emoji and whitespace runs, in
// the proportions of a chat workload with some code and translation.
func MixedText(n int) string {
	parts := []string{
		"The quick brown fox jumps over the lazy dog. ", "It's what they'd said: we'll see. ",
		"func main() {\n\tfmt.Println(\"hello\", 42)\n}\n", "    if (x >= 10 && y != nil) { return -1; }\n",
		"1234567 89.5 3,141,592 2024-11-23 ", "Привет, как дела? Всё хорошо. ", "我想在apple工作，今天天气很好。",
		"🚀 🦙 ✅ 😁 ", "\n\n", "   ", "Führer Cửa Việt naïve café ", "<|im_start|> is only text here. ",
	}
	weights := []int{30, 10, 8, 6, 6, 6, 6, 2, 4, 3, 3, 1}
	r := rand.New(rand.NewPCG(14, 1))
	var b strings.Builder
	total := 0
	for _, w := range weights {
		total += w
	}
	for b.Len() < n {
		k := r.IntN(total)
		for i, w := range weights {
			if k < w {
				b.WriteString(parts[i])
				break
			}
			k -= w
		}
	}
	return b.String()
}

// Env returns the environment variable key, the folder of an external
// reference that script (a repository script, for the message) installs.
// Unset, it skips the test, or fails it when CI is set, where the
// reference checks must run.
func Env(t testing.TB, key, script string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		msg := key + " is not set (run " + script + ", which prints it)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return v
}

// Node runs node on the repository's scripts/llamacpp/script with args
// and stdin (nil for none) and returns what it wrote, failing the test,
// with what it wrote on stderr, if it fails.
func Node(t testing.TB, script string, stdin io.Reader, args ...string) []byte {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", append([]string{filepath.Join(root, "scripts", "llamacpp", script)}, args...)...)
	if stdin != nil {
		// A file, not a pipe: node's readFileSync(0) on a pipe that is
		// still empty fails with EAGAIN.
		f, err := os.CreateTemp(t.TempDir(), "stdin")
		if err == nil {
			_, err = io.Copy(f, stdin)
		}
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s %v: %v\n%s", script, args, err, stderr.String())
	}
	return out
}
