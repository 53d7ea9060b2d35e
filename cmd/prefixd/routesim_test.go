package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRouteSimCommand(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runArgs("route-sim", "--synth", "--prefixes", "12", "--tenants", "3", "--duration", "1m",
		"--replicas", "1,2", "--blocks-per-replica", "256", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"| 2 | 256 | prefix-aware |", "| 1 | 512 | one replica, all blocks |", "| 2 | 256 | round-robin |"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "route-sim.png")); err != nil {
		t.Error(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "route-sim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var results []struct {
		Policy  string  `json:"policy"`
		HitRate float64 `json:"hit_rate"`
	}
	if err := json.Unmarshal(b, &results); err != nil || len(results) != 8 {
		t.Fatalf("route-sim.json: %d results, %v", len(results), err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "exactly one of --trace and --synth"},
		{[]string{"--synth", "--policies", "random"}, "unknown policy"},
		{[]string{"--synth", "--replicas", "x"}, "--replicas"},
		{[]string{"--synth", "--event-delay", "-1s"}, "--event-delay"},
		{[]string{"--trace", filepath.Join(dir, "none.jsonl")}, "no such file"},
	} {
		if code, _, stderr := runArgs(append([]string{"route-sim"}, c.args...)...); code == 0 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%q: exit %d, stderr %q lacks %q", c.args, code, stderr, c.msg)
		}
	}
}
