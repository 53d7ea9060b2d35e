package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prefixd/prefixd/model"
)

// TestDiskTierFlags: the disk tier needs both its flags, which also come
// from PREFIXD_* variables.
func TestDiskTierFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
	}{
		{"off", nil, nil, true},
		{"both", []string{"--disk-tier-dir", "/tmp/x", "--disk-tier-bytes", "20GiB"}, nil, true},
		{"env", nil, map[string]string{"PREFIXD_DISK_TIER_DIR": "/tmp/x", "PREFIXD_DISK_TIER_BYTES": "1MiB"}, true},
		{"dir alone", []string{"--disk-tier-dir", "/tmp/x"}, nil, false},
		{"bytes alone", []string{"--disk-tier-bytes", "1GiB"}, nil, false},
	} {
		o, err := parseServe(tc.args, tc.env, io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.name == "both" && (o.diskTier.dir != "/tmp/x" || o.diskTier.bytes != 20<<30) {
			t.Errorf("both: %+v", o.diskTier)
		}
	}
}

// TestModelFingerprint: the fingerprint records are written under changes
// with the weights file's bytes and with the K/V layout, and only then.
func TestModelFingerprint(t *testing.T) {
	dir := t.TempDir()
	weights := filepath.Join(dir, "w.bin")
	if err := os.WriteFile(weights, []byte("weights one"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseServe(nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.modelPath = weights
	m := model.Builtin()
	base, err := modelFingerprint(o, m, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := modelFingerprint(o, m, 1024); again != base {
		t.Fatal("the fingerprint is not deterministic")
	}
	if other, _ := modelFingerprint(o, m, 2048); other == base {
		t.Fatal("another block layout has the same fingerprint")
	}
	o.blockSize = 32
	if other, _ := modelFingerprint(o, m, 1024); other == base {
		t.Fatal("another block size has the same fingerprint")
	}
	o.blockSize = 16
	if err := os.WriteFile(weights, []byte("weights two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if other, _ := modelFingerprint(o, m, 1024); other == base {
		t.Fatal("other weights have the same fingerprint")
	}
}

// TestServeDiskTierRestart runs the daemon twice on one disk tier
// directory: the clean stop of the first run saves its cache, and the
// second run serves the same prompt's prefix from disk, once the
// background scan has indexed it, with the same output.
func TestServeDiskTierRestart(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--blocks", "64", "--block-size", "8", "--max-model-len", "512", "--threads", "1",
		"--disk-tier-dir", dir, "--disk-tier-bytes", "64MiB"}
	prompt := make([]string, 100)
	for i := range prompt {
		prompt[i] = strconv.Itoa(i%200 + 3)
	}
	body := `{"prompt_ids": [` + strings.Join(prompt, ",") + `], "max_tokens": 4, "ignore_eos": true}`
	type result struct {
		IDs   []int32 `json:"ids"`
		Usage struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"usage"`
	}
	var runs [2]result
	for run := range runs {
		base, stop, log := startServeLog(t, nil, args...)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var st struct {
				DiskTier struct {
					Scanning bool `json:"scanning"`
				} `json:"disk_tier"`
			}
			getJSON(t, base+"/v1/stats", &st)
			if !st.DiskTier.Scanning {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the disk tier's scan never ended")
			}
		}
		resp, err := http.Post(base+"/generate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&runs[run])
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("run %d: /generate %d (%v)", run, resp.StatusCode, err)
		}
		if c := stop(); c != 0 {
			t.Fatalf("run %d: exit %d\n%s", run, c, log.String())
		}
		if run == 0 && !strings.Contains(log.String(), "msg=\"disk tier\"") {
			t.Errorf("no disk tier start-up log:\n%s", log.String())
		}
	}
	if runs[0].Usage.CachedTokens != 0 || runs[1].Usage.CachedTokens != 96 {
		t.Fatalf("cached tokens %d cold, %d after the restart (want 96: 12 whole blocks of the 99 looked up)",
			runs[0].Usage.CachedTokens, runs[1].Usage.CachedTokens)
	}
	if !slices.Equal(runs[0].IDs, runs[1].IDs) {
		t.Fatalf("output %v cold, %v from disk", runs[0].IDs, runs[1].IDs)
	}
}
