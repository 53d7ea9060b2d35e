package remotetier

import (
	"testing"
	"time"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/internal/redistest"
)

// TestFetchRule: the rule's decisions on injected measurements.
func TestFetchRule(t *testing.T) {
	fast := Estimates{RTT: time.Millisecond, Bandwidth: 1e9, PrefillRate: 1000} // 1 ms/token to compute
	for _, c := range []struct {
		name   string
		e      Estimates
		tokens int
		bytes  int64
		want   bool
	}{
		{"nothing to fetch", fast, 0, 0, false},
		{"unmeasured prefill: fetch, to measure", Estimates{}, 16, 1 << 20, true},
		{"one token: the round trip costs more", fast, 1, 1000, false},
		{"long prefix: fetch", fast, 2048, 2048 * 1000, true},
		{"slow store: recompute", Estimates{RTT: time.Millisecond, Bandwidth: 1e5, PrefillRate: 1000}, 2048, 2048 * 1000, false},
		{"slow round trip: recompute", Estimates{RTT: 5 * time.Second, Bandwidth: 1e9, PrefillRate: 1000}, 2048, 2048 * 1000, false},
		{"fast model: recompute", Estimates{RTT: time.Millisecond, Bandwidth: 1e8, PrefillRate: 1e6}, 2048, 2048 * 1000, false},
	} {
		if got := c.e.Fetch(c.tokens, c.bytes); got != c.want {
			t.Errorf("%s: Fetch(%d tokens, %d bytes) = %v, want %v (fetch %v, recompute %v)", c.name, c.tokens, c.bytes, got, c.want,
				c.e.FetchTime(c.bytes), c.e.RecomputeTime(c.tokens))
		}
	}
}

// TestBreakEven: BreakEven is the shortest prefix the rule fetches: one
// token less is recomputed. With 1 ms of round trip, 1 ms to compute a
// token and 0.5 ms to move one, fetching gains 0.5 ms a token: the round
// trip is repaid from 3 tokens on (2 tokens tie, and a tie recomputes).
func TestBreakEven(t *testing.T) {
	e := Estimates{RTT: time.Millisecond, Bandwidth: 2000, PrefillRate: 1000}
	n, ok := e.BreakEven(1)
	if !ok || n != 3 {
		t.Fatalf("BreakEven = %d, %v; want 3", n, ok)
	}
	for _, m := range []int{1, 2} {
		if e.Fetch(m, int64(m)) {
			t.Fatalf("fetches %d tokens, below the break-even", m)
		}
	}
	for _, e := range []Estimates{{RTT: time.Millisecond, Bandwidth: 100, PrefillRate: 1000}, {RTT: time.Millisecond}} {
		if _, ok := e.BreakEven(1); ok {
			t.Fatalf("%+v: a break-even where fetching never wins or is unmeasured", e)
		}
	}
}

// TestEstimator: measurements update the estimates as moving averages;
// a transfer's time beyond the round trip is its bandwidth.
func TestEstimator(t *testing.T) {
	var s estimator
	s.roundTrip(2 * time.Millisecond)
	s.transfer(1e6, 12*time.Millisecond) // 1 MB in 10 ms beyond the round trip
	s.prefill(500, time.Second)
	e := s.get()
	if e.RTT != 2*time.Millisecond || e.Bandwidth != 1e8 || e.PrefillRate != 500 {
		t.Fatalf("first measurements: %+v", e)
	}
	s.prefill(1500, time.Second)
	if got := s.get().PrefillRate; got != 500+ewmaWeight*1000 {
		t.Fatalf("prefill rate %v after a second measurement", got)
	}
}

// TestFetchFollowsRule: on a real store, a fetch the rule says loses is
// not made (no transfer, the tokens counted as skipped), and the same
// fetch is made once the measurements say it wins.
func TestFetchFollowsRule(t *testing.T) {
	s := redistest.Start(t)
	a := newTier(t, s.URL(0), nil)
	ns, tokens := "ns", prompt(1, 8)
	fps := putPrompt(t, a, ns, tokens)
	b := newTier(t, s.URL(0), nil)
	// A model that computes 10M tokens a second: a store at 1 MB/s loses.
	b.SetEstimates(Estimates{RTT: time.Millisecond, Bandwidth: 1e6, PrefillRate: 1e7})
	if n := fetched(b, ns, tokens, 0); n != 0 {
		t.Fatalf("fetched %d blocks the rule says to recompute", n)
	}
	if st := b.Stats(); st.SkippedTokens != 32 || st.BytesIn != 0 || st.Fetches != 0 {
		t.Fatalf("stats %+v, want 32 skipped tokens and no transfer", st)
	}
	// A model at 10 tokens a second: the store wins.
	b.SetEstimates(Estimates{RTT: time.Millisecond, Bandwidth: 1e6, PrefillRate: 10})
	if n := fetched(b, ns, tokens, 0); n != 8 {
		t.Fatalf("fetched %d blocks, want 8", n)
	}
	checkStaged(t, b, ns, tokens, fps, 8)
}

// TestBreaker: the breaker opens after the threshold of failures in a
// row, lets one probe through once its backoff passes, doubles the backoff
// when the probe fails, and closes when one succeeds.
func TestBreaker(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	b := breaker{clk: clk, threshold: 2, minBackoff: time.Second, maxBackoff: 3 * time.Second}
	step := func(want BreakerState, allow bool) {
		t.Helper()
		if got := b.allow(); got != allow {
			t.Fatalf("allow = %v, want %v", got, allow)
		}
		if st, _ := b.snapshot(); st != want {
			t.Fatalf("state %v, want %v", st, want)
		}
	}
	step(BreakerClosed, true)
	b.failure()
	b.success() // a success resets the count
	b.failure()
	step(BreakerClosed, true)
	b.failure()
	step(BreakerOpen, false)
	clk.Advance(time.Second)
	step(BreakerHalfOpen, true) // the probe
	step(BreakerHalfOpen, false)
	b.failure() // the probe failed: 2 s
	clk.Advance(1999 * time.Millisecond)
	step(BreakerOpen, false)
	clk.Advance(time.Millisecond)
	step(BreakerHalfOpen, true)
	b.failure() // 3 s, the maximum
	clk.Advance(3 * time.Second)
	step(BreakerHalfOpen, true)
	b.success()
	step(BreakerClosed, true)
	if _, opened := b.snapshot(); opened != 3 {
		t.Fatalf("opened %d times, want 3", opened)
	}
}
