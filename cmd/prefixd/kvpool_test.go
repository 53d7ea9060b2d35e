package main

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/server"
)

// builtinBlockBytes is one 16-token block of the built-in model's float32
// K/V: 4 layers × K and V × 4 KV heads × 32 dims × 16 positions × 4
// bytes. With --kv-type f16 it is half that.
const builtinBlockBytes = 4 * 2 * 4 * 32 * 16 * 4

// poolFor runs engineConfig on the built-in model with args, the free
// memory fake reports (or err), and gpuBytes as a GPU's share (0: the
// CPU). It fails the test if the CPU default reads the memory when it
// must not. The pool's K/V is float32 unless args give --kv-type f16 (the
// cases' sizes are hand-computed for float32 blocks).
func poolFor(t *testing.T, args []string, mapped int64, free freeMemory, freeErr error, gpuBytes int64) (kvPool, int, error) {
	t.Helper()
	blockBytes := int64(builtinBlockBytes)
	if slices.Contains(args, "f16") {
		blockBytes /= 2
	} else {
		args = append([]string{"--kv-type", "f32"}, args...)
	}
	o, err := parseServe(args, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := model.Builtin()
	dr, err := o.device.runner(m, 1, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer dr.close()
	dr.kvBytes = gpuBytes // the share a GPU's runner reports; the probe runs on the CPU
	read := false
	ecfg, pool, err := engineConfig(o, m, dr, server.NewMetrics(), poolInputs{mappedBytes: mapped, freeMemory: func() (freeMemory, error) {
		read = true
		return free, freeErr
	}})
	if read && (o.blocks > 0 || o.kvBytes > 0 || gpuBytes > 0) {
		t.Errorf("%q: the free memory was read, though the pool is not the CPU default", args)
	}
	if err == nil && (ecfg.NumBlocks != pool.blocks || pool.blockBytes != blockBytes) {
		t.Errorf("%q: engine gets %d blocks, the pool is %d of %d bytes", args, ecfg.NumBlocks, pool.blocks, pool.blockBytes)
	}
	return pool, ecfg.MaxModelLen, err
}

// TestPoolSizing: the blocks each rule gives, hand-computed for the
// built-in model (4096-token context: 256 blocks of 16 tokens, 16 MiB, per
// sequence; 32 sequences, the default --max-running: 8192 blocks).
func TestPoolSizing(t *testing.T) {
	const seq = 256 * builtinBlockBytes // one full sequence, 16 MiB
	gib := func(n int64) freeMemory { return freeMemory{n << 30, "MemAvailable"} }
	cases := []struct {
		name     string
		args     []string
		mapped   int64
		free     freeMemory
		freeErr  error
		gpuBytes int64
		blocks   int
		maxLen   int
		rule     string
	}{
		// 1 GiB free: a third is 5461 blocks of 64 KiB, between one
		// sequence (256) and 32 (8192).
		{"share of free memory", nil, 0, gib(1), nil, 0, (1 << 30) / 3 / builtinBlockBytes, 4096, "share of free memory"},
		{"mapped weights and host tier are not free", []string{"--host-tier-bytes", "256MiB"}, 256 << 20, gib(1), nil, 0,
			(512 << 20) / 3 / builtinBlockBytes, 4096, "share of free memory"},
		{"a cgroup's figure is used as given", nil, 0, freeMemory{600 << 20, "cgroup / memory.max"}, nil, 0,
			(600 << 20) / 3 / builtinBlockBytes, 4096, "share of free memory"},
		{"capped at --max-running sequences", nil, 0, gib(64), nil, 0, 32 * 256, 4096, "--max-running sequences of the context"},
		{"cap follows --max-running and --max-model-len", []string{"--max-running", "4", "--max-model-len", "1000"}, 0, gib(64), nil, 0,
			4 * 63, 1000, "--max-running sequences of the context"},
		{"at least one sequence", nil, 0, freeMemory{seq + 100, "MemAvailable"}, nil, 0, 256, 4096, "one sequence of the context"},
		{"free memory unknown: the fixed rule", nil, 0, freeMemory{}, errors.New("open /proc/meminfo: no such file"), 0,
			32 * 32, 4096, "--max-running sequences of 512 tokens (free memory unknown)"},
		{"fixed rule, at least one sequence", []string{"--max-running", "2"}, 0, freeMemory{}, errors.New("unknown"), 0,
			256, 4096, "--max-running sequences of 512 tokens"},
		{"--blocks", []string{"--blocks", "300"}, 0, gib(1), nil, 0, 300, 4096, "--blocks"},
		{"--kv-bytes", []string{"--kv-bytes", "20MiB"}, 0, gib(1), nil, 0, 320, 4096, "--kv-bytes"},
		// F16 K/V: blocks of half the bytes, so twice as many in the
		// same memory.
		{"f16: share of free memory", []string{"--kv-type", "f16"}, 0, freeMemory{512 << 20, "MemAvailable"}, nil, 0,
			(512 << 20) / 3 / (builtinBlockBytes / 2), 4096, "share of free memory"},
		{"f16: --kv-bytes", []string{"--kv-bytes", "20MiB", "--kv-type", "f16"}, 0, gib(1), nil, 0, 640, 4096, "--kv-bytes"},
		{"--max-model-len makes a small pool valid", []string{"--blocks", "4", "--max-model-len", "64"}, 0, gib(1), nil, 0, 4, 64, "--blocks"},
		{"--max-model-len above the model's is the model's", []string{"--blocks", "256", "--max-model-len", "100000"}, 0, gib(1), nil, 0,
			256, 4096, "--blocks"},
		// On a GPU the pool is what the weights leave, as before: the
		// runner's share in blocks, whatever the host's memory.
		{"gpu share", nil, 0, gib(1), nil, 1 << 30, (1 << 30) / builtinBlockBytes, 4096, "--gpu-memory-fraction"},
		{"gpu, --kv-bytes wins", []string{"--kv-bytes", "32MiB"}, 0, gib(1), nil, 1 << 30, 512, 4096, "--kv-bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool, maxLen, err := poolFor(t, c.args, c.mapped, c.free, c.freeErr, c.gpuBytes)
			if err != nil {
				t.Fatal(err)
			}
			if pool.blocks != c.blocks || maxLen != c.maxLen || !strings.HasPrefix(pool.rule, c.rule) {
				t.Errorf("%d blocks, context %d, rule %q; want %d, %d, %q", pool.blocks, maxLen, pool.rule, c.blocks, c.maxLen, c.rule)
			}
		})
	}
}

// TestPoolTooSmall: a pool that cannot hold one sequence of the context is
// refused as a usage error naming the blocks needed, the pool, the context
// and the ways out.
func TestPoolTooSmall(t *testing.T) {
	seq := int64(256 * builtinBlockBytes)
	cases := []struct {
		name     string
		args     []string
		mapped   int64
		free     freeMemory
		gpuBytes int64
		msg      string
	}{
		{"--blocks 1", []string{"--blocks", "1"}, 0, freeMemory{}, 0,
			"a KV pool of 1 blocks (--blocks, 65536 bytes) cannot hold one sequence of the model's 4096-token context: " +
				"that needs 256 blocks of 16 tokens (16777216 bytes); give a larger --blocks or --kv-bytes, or a smaller --max-model-len"},
		{"--kv-bytes with --max-model-len", []string{"--kv-bytes", "1MiB", "--max-model-len", "257", "--block-size", "1"}, 0, freeMemory{}, 0,
			"a KV pool of 256 blocks (--kv-bytes, 1048576 bytes) cannot hold one sequence of --max-model-len 257 tokens: " +
				"that needs 257 blocks of 1 tokens (1052672 bytes); give a larger --blocks or --kv-bytes, or a smaller --max-model-len"},
		{"gpu share", nil, 0, freeMemory{}, seq - 1,
			"a KV pool of 255 blocks (--gpu-memory-fraction, 16711680 bytes) cannot hold one sequence of the model's 4096-token context: " +
				"that needs 256 blocks of 16 tokens (16777216 bytes); raise --gpu-memory-fraction, or give a smaller --max-model-len"},
		{"free memory less the mapped weights", nil, 1 << 30, freeMemory{1<<30 + seq - 1, "cgroup /pod memory.max"}, 0,
			"the memory free (1090519039 bytes by cgroup /pod memory.max) less the model's mapped weights (1073741824) and the host tier (0) " +
				"leaves 16777215 bytes, less than one sequence of the model's 4096-token context needs: 256 blocks (16777216 bytes); " +
				"free memory, or give a smaller --max-model-len"},
		{"weights beyond free memory", nil, 1 << 30, freeMemory{1 << 20, "MemAvailable"}, 0, "leaves 0 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := poolFor(t, c.args, c.mapped, c.free, nil, c.gpuBytes)
			var u usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v; want a usage error with %q", err, c.msg)
			}
		})
	}
}
