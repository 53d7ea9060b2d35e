package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cuda/gpu"
	"github.com/prefixd/prefixd/model"
)

// TestDeviceFlags checks --device on each command that takes it: cuda in
// a binary built without the tag, and values that name nothing, are usage
// errors (exit status 2) that say what is wrong, before any model loads.
func TestDeviceFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--device", "tpu"}, `--device "tpu": want cpu or cuda`},
		{[]string{"--device", "cpu", "--gpu-memory-fraction", "1.5"}, "--gpu-memory-fraction 1.5"},
		{[]string{"--device", "cpu", "--gpu-dtype", "f8"}, "--gpu-dtype"},
		{[]string{"--device", "cuda"}, "built without the cuda build tag"},
		{[]string{"--kv-type", "bf16"}, `invalid value "bf16" for flag -kv-type: want f32 or f16`},
		{[]string{"--device", "cuda", "--kv-type", "f32"}, "--kv-type f32: applies to --device cpu"},
	} {
		if tc.args[1] == "cuda" && gpu.Built {
			continue
		}
		for _, cmd := range [][]string{{"generate", "--prompt-ids", "1"}, {"bench", "--tiny"}, {"serve"}} {
			code, _, stderr := runArgs(append(cmd, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v %v: exit %d, stderr %q; want 2 and %q", cmd, tc.args, code, stderr, tc.want)
			}
		}
	}
	for _, flag := range [][]string{{"--device", "cpu"}, {"--kv-type", "f32"}} {
		if code, _, stderr := runArgs("bench", "--model", "null", flag[0], flag[1]); code != 2 || !strings.Contains(stderr, flag[0]+" does not apply") {
			t.Errorf("bench --model null %v: exit %d, %q", flag, code, stderr)
		}
	}
}

// TestKVTypeFlag checks that --kv-type reaches the runner's K/V pool from
// each source serve reads, and that a GPU refuses it from any of them
// (its K/V type is --gpu-dtype's).
func TestKVTypeFlag(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prefixd.json")
	if err := os.WriteFile(cfg, []byte(`{"kv-type": "f32"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want kernels.DType
	}{
		{"default", nil, nil, kernels.F16},
		{"flag", []string{"--kv-type", "f32"}, nil, kernels.F32},
		{"environment", nil, map[string]string{"PREFIXD_KV_TYPE": "f32"}, kernels.F32},
		{"config file", []string{"--config", cfg}, nil, kernels.F32},
		{"flag over config file", []string{"--config", cfg, "--kv-type", "f16"}, nil, kernels.F16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseServe(tc.args, tc.env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if o.device.kvType.typ != tc.want {
				t.Fatalf("K/V type %v, want %v", o.device.kvType.typ, tc.want)
			}
			dr, err := o.device.runner(model.Builtin(), 1, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer dr.close()
			st, err := dr.NewKV(1, 16)
			if err != nil {
				t.Fatal(err)
			}
			want := builtinBlockBytes
			if tc.want == kernels.F16 {
				want /= 2
			}
			if st.BlockBytes() != want {
				t.Fatalf("a %v pool's block is %d bytes, want %d", tc.want, st.BlockBytes(), want)
			}
			if tc.name == "default" {
				return
			}
			o.device.device = "cuda"
			if err := o.device.check(); err == nil || !strings.Contains(err.Error(), "--kv-type") {
				t.Fatalf("--device cuda with a --kv-type set: error %v, want one naming --kv-type", err)
			}
		})
	}
}
