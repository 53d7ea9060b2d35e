package main

import (
	"strings"
	"testing"

	"github.com/prefixd/prefixd/kernels/cuda/gpu"
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
	if code, _, stderr := runArgs("bench", "--model", "null", "--device", "cpu"); code != 2 || !strings.Contains(stderr, "does not apply") {
		t.Errorf("bench --model null --device cpu: exit %d, %q", code, stderr)
	}
}
