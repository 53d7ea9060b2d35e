package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/bench"
)

func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(md, []byte("# Benchmarks\n\nhand-written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runArgs("bench", "--tiny", "--model", "null", "--workloads", "skew-seed,kv-alloc", "--out", out, "--markdown", md)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "continuous/w8") || !strings.Contains(stdout, "target") {
		t.Fatalf("stdout:\n%s", stdout)
	}
	// The goals are set for the default sizes: at --tiny none is missed.
	if strings.Contains(stdout, "MISSED") || strings.Count(stdout, "target n/a ") != strings.Count(stdout, "not applicable at --tiny") ||
		!strings.Contains(stdout, "not applicable at --tiny") {
		t.Errorf("--tiny's targets are not all marked not applicable:\n%s", stdout)
	}
	f, err := os.Open(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := bench.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 6 || rep.Model != "null" || !strings.Contains(rep.Command, "--tiny") {
		t.Fatalf("report: %d results, model %q, command %q", len(rep.Results), rep.Model, rep.Command)
	}
	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"hand-written", bench.MarkBegin, "![throughput](docs/bench/throughput.png)"} {
		if !strings.Contains(string(doc), want) {
			t.Fatalf("markdown lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "docs", "bench", "kv-efficiency.png")); err != nil {
		t.Fatal(err)
	}
}

func TestBenchModelFile(t *testing.T) {
	path := sharedModel(t, "stories260K.bin")
	code, _, stderr := runArgs("bench", "--tiny", "--model", path, "--workloads", "kv-alloc", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestTTLSimCommand(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := runArgs("ttl-sim", "--synth", "--ttls", "1s,30s,5m", "--pool-blocks", "256,4096", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Count(stdout, "smallest TTL") != 2 {
		t.Fatalf("stdout:\n%s", stdout)
	}
	// The synthetic trace it wrote replays to the same table.
	code, again, stderr := runArgs("ttl-sim", "--trace", filepath.Join(out, "synth-trace.jsonl"), "--ttls", "1s,30s,5m", "--pool-blocks", "256,4096", "--out", t.TempDir())
	if code != 0 || again != stdout {
		t.Fatalf("replaying the written trace: exit %d, %s\n%s\nvs\n%s", code, stderr, again, stdout)
	}
	for _, f := range []string{"ttl-sim.json", "ttl-hit.png", "ttl-memory.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bench stray argument", []string{"bench", "x"}, 2, "unexpected argument"},
		{"bench unknown workload", []string{"bench", "--workloads", "nope"}, 2, "unknown workload"},
		{"bench missing model", []string{"bench", "--model", "/nonexistent/m.bin", "--tiny"}, 1, "no such file"},
		{"ttl-sim no input", []string{"ttl-sim"}, 2, "exactly one of"},
		{"ttl-sim both inputs", []string{"ttl-sim", "--synth", "--trace", "x"}, 2, "exactly one of"},
		{"ttl-sim bad ttl", []string{"ttl-sim", "--synth", "--ttls", "5"}, 2, "--ttls"},
		{"ttl-sim bad pool", []string{"ttl-sim", "--synth", "--pool-blocks", "0"}, 2, "--pool-blocks"},
		{"ttl-sim bad target", []string{"ttl-sim", "--synth", "--target", "2"}, 2, "--target"},
		{"ttl-sim missing trace", []string{"ttl-sim", "--trace", "/nonexistent/t.jsonl"}, 1, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runArgs(c.args...)
			if code != c.code || !strings.Contains(stderr, c.msg) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, c.code, c.msg)
			}
		})
	}
}
