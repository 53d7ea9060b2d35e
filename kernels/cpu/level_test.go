package cpu

import (
	"os"
	"testing"

	"github.com/prefixd/prefixd/internal/cpufeat"
)

// TestKernelLevel checks that the package's kernel switches follow
// cpufeat, PREFIXD_CPU's cap included. (Reading the variable in a test
// also makes go test's cache tell runs under different caps apart.)
func TestKernelLevel(t *testing.T) {
	l := cpufeat.Kernels()
	t.Logf("%s=%q: the kernels use %v of %v", cpufeat.EnvVar, os.Getenv(cpufeat.EnvVar), l, cpufeat.Detected())
	if useAVX2 != (l >= cpufeat.AVX2) || useAVX512 != (l >= cpufeat.AVX512F) {
		t.Errorf("useAVX2 %v, useAVX512 %v at level %v", useAVX2, useAVX512, l)
	}
}
