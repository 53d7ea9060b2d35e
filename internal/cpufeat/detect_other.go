//go:build !amd64 || purego

package cpufeat

// detect returns Generic: this build has no assembly kernels.
func detect() Level { return Generic }
