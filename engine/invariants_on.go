//go:build invariants

package engine

// invariants is set in builds tagged invariants: the scheduler then runs
// Check's recount after every step (see scheduler.step). Tests run once
// with the tag (go test -tags invariants ./engine/ ./server/) so a broken
// invariant fails at the step that broke it, not at a later check.
const invariants = true
