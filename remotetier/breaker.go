package remotetier

import (
	"sync"
	"time"

	"github.com/prefixd/prefixd/clock"
)

// BreakerState is the circuit breaker's state.
type BreakerState int

// Breaker states. Closed lets every call through; Open lets none through
// until its backoff ends; HalfOpen lets one probe through, whose outcome
// closes the breaker or opens it again with a doubled backoff.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

var breakerNames = [...]string{"closed", "open", "half_open"}

// String returns the state's metric label.
func (s BreakerState) String() string { return breakerNames[s] }

// breaker stops calls to a store that keeps failing, so that a dead store
// costs a request nothing: after threshold failures in a row it opens for
// a backoff that doubles (up to maxBackoff) with every failed probe. It is
// safe for concurrent use.
type breaker struct {
	clk                    clock.Clock
	threshold              int
	minBackoff, maxBackoff time.Duration

	mu       sync.Mutex
	state    BreakerState
	failures int           // in a row, while closed
	backoff  time.Duration // of the current or last opening
	until    time.Time     // when an open breaker lets a probe through
	probing  bool          // a half-open breaker's probe is out
	opened   uint64        // times the breaker opened
}

// allow reports whether a call may go to the store. A caller allowed
// must report the outcome (success or failure) exactly once.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerOpen:
		if b.clk.Now().Before(b.until) {
			return false
		}
		b.state, b.probing = BreakerHalfOpen, true
		return true
	case BreakerHalfOpen:
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
	return true
}

// success reports a call that reached a working store.
func (b *breaker) success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.failures, b.probing, b.backoff = BreakerClosed, 0, false, 0
}

// failure reports a call that failed for the store's sake (unreachable,
// too slow, refusing writes), not for the data's.
func (b *breaker) failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		if b.failures++; b.failures < b.threshold {
			return
		}
		b.backoff = b.minBackoff
	case BreakerHalfOpen:
		b.backoff = min(2*b.backoff, b.maxBackoff)
	case BreakerOpen:
		return // a call let through before it opened
	}
	b.state, b.probing, b.failures = BreakerOpen, false, 0
	b.until = b.clk.Now().Add(b.backoff)
	b.opened++
}

// snapshot returns the state and how many times the breaker opened.
func (b *breaker) snapshot() (BreakerState, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state, b.opened
}
