//go:build !invariants

package engine

// invariants is unset in ordinary builds: the per-step checks cost O(pool +
// tree) and compile away (see invariants_on.go).
const invariants = false
