package remotetier

import (
	"math"
	"sync"
	"time"
)

// ewmaWeight is the weight of a new measurement in the running estimates:
// about the last ten measurements count.
const ewmaWeight = 0.2

// Estimates are the measurements the fetch-or-recompute rule decides by.
// A zero field is not measured yet.
type Estimates struct {
	RTT         time.Duration // one pipelined round trip to the store
	Bandwidth   float64       // bytes per second the store delivers, beyond the round trip
	PrefillRate float64       // prompt tokens per second the model computes
}

// FetchTime is the estimated time to fetch bytes in one pipelined round
// trip: RTT + bytes / Bandwidth (the bytes term is 0 while the bandwidth
// is unmeasured).
func (e Estimates) FetchTime(bytes int64) time.Duration {
	d := e.RTT
	if e.Bandwidth > 0 {
		d += time.Duration(float64(bytes) / e.Bandwidth * float64(time.Second))
	}
	return d
}

// RecomputeTime is the estimated time to compute tokens prompt tokens, or
// 0 while the prefill rate is unmeasured.
func (e Estimates) RecomputeTime(tokens int) time.Duration {
	if e.PrefillRate <= 0 {
		return 0
	}
	return time.Duration(float64(tokens) / e.PrefillRate * float64(time.Second))
}

// Fetch is the rule: fetch tokens prompt tokens held in bytes bytes when
// the estimated fetch time beats recomputing them. Until the prefill rate
// is measured it fetches, so that a fetch measures the store's side. Since
// both times grow linearly with the blocks and the fetch adds one round
// trip, fetching part of a run never beats fetching all or none of it.
func (e Estimates) Fetch(tokens int, bytes int64) bool {
	if tokens <= 0 {
		return false
	}
	if e.PrefillRate <= 0 {
		return true
	}
	return e.FetchTime(bytes) < e.RecomputeTime(tokens)
}

// BreakEven returns the shortest run of tokens, at bytesPerToken bytes
// each in the store, that the rule fetches; ok is false when fetching
// never wins (the store delivers tokens no faster than the model computes
// them) or the estimates are not all measured.
func (e Estimates) BreakEven(bytesPerToken float64) (tokens int, ok bool) {
	if e.PrefillRate <= 0 || e.Bandwidth <= 0 {
		return 0, false
	}
	gain := 1/e.PrefillRate - bytesPerToken/e.Bandwidth // seconds saved per token fetched
	if gain <= 0 {
		return 0, false
	}
	n := int(math.Floor(e.RTT.Seconds()/gain)) + 1
	for n > 1 && e.Fetch(n-1, int64(float64(n-1)*bytesPerToken)) {
		n-- // rounding in the float division
	}
	for !e.Fetch(n, int64(float64(n)*bytesPerToken)) {
		n++
	}
	return n, true
}

// estimator keeps the Estimates as exponentially weighted moving averages
// of measurements. It is safe for concurrent use.
type estimator struct {
	mu sync.Mutex
	e  Estimates
}

func ewma(old, sample float64) float64 {
	if old == 0 {
		return sample
	}
	return old + ewmaWeight*(sample-old)
}

// get returns the current estimates.
func (s *estimator) get() Estimates {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

// roundTrip records a pipelined round trip that moved few bytes.
func (s *estimator) roundTrip(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.RTT = time.Duration(ewma(float64(s.e.RTT), float64(d)))
}

// transfer records a pipelined round trip of d that delivered bytes: its
// time beyond the estimated round trip is the bytes' transfer time.
func (s *estimator) transfer(bytes int64, d time.Duration) {
	if bytes <= 0 || d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := d - s.e.RTT
	if t < d/10 {
		t = d / 10 // a round trip shorter than the estimate: noise
	}
	s.e.Bandwidth = ewma(s.e.Bandwidth, float64(bytes)/t.Seconds())
}

// prefill records a forward pass that computed tokens prompt tokens in d.
func (s *estimator) prefill(tokens int, d time.Duration) {
	if tokens <= 0 || d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.PrefillRate = ewma(s.e.PrefillRate, float64(tokens)/d.Seconds())
}

// set replaces the estimates, for tests and for operators who measured.
func (s *estimator) set(e Estimates) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e = e
}
