package src

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKernelsListed checks that Kernels names exactly the kernels the
// sources define, so that the NVRTC test, the emulator and the loader
// cover every one, and that each declares launch bounds MaxThreads reads.
func TestKernelsListed(t *testing.T) {
	def := regexp.MustCompile(`(?m)^KERNEL void (?:__launch_bounds__\([^)]*\) )?(\w+)\(`)
	var found []string
	for _, name := range Files() {
		data, err := File(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllStringSubmatch(string(data), -1) {
			found = append(found, m[1])
			if n := MaxThreads(m[1]); n < 32 || n > 1024 || n%32 != 0 {
				t.Errorf("%s: launch bound %d, want a literal multiple of 32 up to 1,024 (KERNEL void __launch_bounds__(N) name)", m[1], n)
			}
		}
	}
	want := slices.Clone(Kernels)
	slices.Sort(found)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("sources define %v, Kernels lists %v", found, want)
	}
}

func TestSourceSelectsType(t *testing.T) {
	for _, dt := range DTypes {
		s := Source(dt)
		if !strings.HasPrefix(s, "#define PREFIXD_KV_"+strings.ToUpper(dt.String())+" 1\n") {
			t.Errorf("%v: source starts %q", dt, s[:40])
		}
		got, err := ParseDType(dt.String())
		if err != nil || got != dt {
			t.Errorf("ParseDType(%q) = %v, %v", dt.String(), got, err)
		}
	}
	if _, err := ParseDType("f64"); err == nil {
		t.Error("ParseDType(f64) succeeded")
	}
}
