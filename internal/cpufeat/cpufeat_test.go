package cpufeat

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Level
	}{{"", AVX512}, {"generic", Generic}, {"avx2", AVX2}, {"avx512f", AVX512F}, {"avx512", AVX512}} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if tc.in != "" && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
	for _, bad := range []string{"AVX2", "avx", "sse4", " avx2"} {
		if l, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, l)
		}
	}
}

// childEnv marks the test binary run by TestEnvCap as the child that
// reports the level it initialized with.
const childEnv = "CPUFEAT_TEST_CHILD"

// TestEnvCap runs this test binary again with PREFIXD_CPU set, which the
// package reads as it initializes, and checks the level the child's
// kernels use; an unknown value must stop the child at start-up.
func TestEnvCap(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		os.Stdout.WriteString("level=" + Kernels().String() + " detected=" + Detected().String() + "\n")
		return
	}
	if testing.Short() {
		t.Skip("runs the test binary again")
	}
	run := func(value string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEnvCap$", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1", EnvVar+"="+value)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, cap := range []Level{Generic, AVX2, AVX512F, AVX512} {
		out, err := run(cap.String())
		if err != nil {
			t.Fatalf("%s=%v: %v\n%s", EnvVar, cap, err, out)
		}
		// The child's own detection: under an emulator (qemu-x86_64 -cpu
		// max) the child may run on the host's CPU.
		var level, detected string
		for _, f := range strings.Fields(out) {
			if v, ok := strings.CutPrefix(f, "level="); ok {
				level = v
			} else if v, ok := strings.CutPrefix(f, "detected="); ok {
				detected = v
			}
		}
		d, err := Parse(detected)
		if err != nil || detected == "" {
			t.Fatalf("%s=%v: the child says\n%s", EnvVar, cap, out)
		}
		if want := min(d, cap).String(); level != want {
			t.Errorf("%s=%v: the child's kernels use %q of %v, want %q", EnvVar, cap, level, d, want)
		}
	}
	out, err := run("avx3")
	if err == nil || !strings.Contains(out, `PREFIXD_CPU="avx3"`) {
		t.Errorf("%s=avx3: err %v, output\n%s\nwant a panic naming the value", EnvVar, err, out)
	}
}

// TestExpectedLevel checks, when PREFIXD_EXPECT_CPU names a level, that
// this CPU was detected at exactly that level: scripts/cpu-portability.sh
// sets it for each CPU it emulates, so a run meant as an AVX2-only CPU
// cannot pass on the pure-Go kernels (or on AVX-512) by a detection slip.
func TestExpectedLevel(t *testing.T) {
	want := os.Getenv("PREFIXD_EXPECT_CPU")
	if want == "" {
		t.Skip("PREFIXD_EXPECT_CPU is not set")
	}
	l, err := Parse(want)
	if err != nil {
		t.Fatal(err)
	}
	if Detected() != l || Kernels() != l {
		t.Fatalf("detected %v, kernels at %v; want %v", Detected(), Kernels(), l)
	}
}
