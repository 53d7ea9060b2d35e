package remotetier

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/kvcache"
)

// ErrorKind classifies the tier's errors, for the errors metric.
type ErrorKind int

// Error kinds. Every one means recompute; Corrupt counts values that
// failed verification (the store itself worked).
const (
	ErrTimeout ErrorKind = iota // a deadline passed: the store is slow or unreachable
	ErrConn                     // the connection failed or was refused
	ErrFull                     // the store refused a write for memory (OOM)
	ErrCorrupt                  // a value failed verification
	ErrOther                    // any other error the store returned
	ErrTLS                      // the TLS handshake failed: the store's certificate did not verify, or it speaks no TLS
	numErrorKinds
)

var errorKindNames = [numErrorKinds]string{"timeout", "connection", "full", "corrupt", "other", "tls"}

// String returns the kind's metric label.
func (k ErrorKind) String() string { return errorKindNames[k] }

// errorKind classifies err.
func errorKind(err error) ErrorKind {
	var ne net.Error
	var cert *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &cert), errors.As(err, &header), errors.As(err, &alert):
		return ErrTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ErrTimeout
	case errors.Is(err, disktier.ErrCorrupt):
		return ErrCorrupt
	case strings.HasPrefix(err.Error(), "OOM "):
		return ErrFull
	case errors.As(err, &ne), errors.Is(err, net.ErrClosed), strings.Contains(err.Error(), "EOF"),
		strings.Contains(err.Error(), "connection"):
		return ErrConn
	}
	return ErrOther
}

// counters are the tier's running totals.
type counters struct {
	lookupTokens, hitTokens, missTokens, skippedTokens, breakerTokens atomic.Uint64
	fetches, writes, dropped, breakerSkips, bytesIn, bytesOut         atomic.Uint64
	leasesLed, leasesFollowed, leaseGaveUp                            atomic.Uint64
	errors                                                            [numErrorKinds]atomic.Uint64
	fetchLatency                                                      prometheus.Histogram
}

func (c *counters) init() {
	c.fetchLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "prefixd_remote_tier_fetch_seconds",
		Help:    "Time of one fetch from the remote tier: its pipelined lookup and its pipelined transfer.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 0.1 ms .. 3.3 s
	})
}

// Stats returns the tier's state and running totals, without allocating:
// engine.Stats reads it on every call (each /metrics scrape and /v1/stats).
func (t *Tier) Stats() kvcache.RemoteTierStats {
	m := &t.m
	e := t.est.get()
	s := kvcache.RemoteTierStats{
		LookupTokens: m.lookupTokens.Load(), HitTokens: m.hitTokens.Load(), MissTokens: m.missTokens.Load(),
		SkippedTokens: m.skippedTokens.Load(), BreakerTokens: m.breakerTokens.Load(), Fetches: m.fetches.Load(),
		Writes: m.writes.Load(), Dropped: m.dropped.Load(), BreakerSkips: m.breakerSkips.Load(),
		BytesIn: m.bytesIn.Load(), BytesOut: m.bytesOut.Load(), StagedBytes: t.stage.bytes(),
		LeasesLed: m.leasesLed.Load(), LeasesFollowed: m.leasesFollowed.Load(), LeaseWaitsGivenUp: m.leaseGaveUp.Load(),
		Errors: kvcache.RemoteErrors{Timeout: m.errors[ErrTimeout].Load(), Connection: m.errors[ErrConn].Load(),
			Full: m.errors[ErrFull].Load(), Corrupt: m.errors[ErrCorrupt].Load(), Other: m.errors[ErrOther].Load(),
			TLS: m.errors[ErrTLS].Load()},
		RTT: e.RTT, Bandwidth: e.Bandwidth, PrefillRate: e.PrefillRate,
	}
	st, opened := t.br.snapshot()
	s.Breaker, s.BreakerOpened = st.String(), opened
	return s
}

var (
	descTokens  = prometheus.NewDesc("prefixd_remote_tier_tokens_total", "Prompt tokens looked up in the remote tier, by outcome: hit (promoted), miss (not held or failing verification), skipped (recomputing was estimated faster), breaker (not looked up: the breaker was open).", []string{"outcome"}, nil)
	descBytes   = prometheus.NewDesc("prefixd_remote_tier_bytes_total", "Value bytes moved to (out) and from (in) the remote tier.", []string{"direction"}, nil)
	descWrites  = prometheus.NewDesc("prefixd_remote_tier_writes_total", "Blocks offered to the remote tier, by outcome: written, dropped (full queue), breaker (open breaker).", []string{"outcome"}, nil)
	descLeases  = prometheus.NewDesc("prefixd_remote_tier_leases_total", "Fetches that missed blocks in the store, by what they did about the fleet's lease on computing them: led (took it and computed them), followed (waited for the replica computing them), gave_up (waited the longest allowed, then computed the rest).", []string{"outcome"}, nil)
	descErrors  = prometheus.NewDesc("prefixd_remote_tier_errors_total", "Remote tier errors by kind; each means recompute.", []string{"kind"}, nil)
	descBreaker = prometheus.NewDesc("prefixd_remote_tier_breaker_state", "The remote tier's circuit breaker: 1 for the state it is in.", []string{"state"}, nil)
	descOpened  = prometheus.NewDesc("prefixd_remote_tier_breaker_opened_total", "Times the remote tier's circuit breaker opened.", nil, nil)
	descEst     = prometheus.NewDesc("prefixd_remote_tier_estimate", "The fetch rule's measurements: rtt_seconds, bandwidth_bytes_per_second, prefill_tokens_per_second (0: not measured).", []string{"measure"}, nil)
)

// collector exports a Tier's Stats.
type collector struct{ t *Tier }

// Collector returns a Prometheus collector of the tier's metrics, its
// fetch latency histogram included, for the server's registry.
func (t *Tier) Collector() prometheus.Collector { return collector{t} }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTokens, descBytes, descWrites, descLeases, descErrors, descBreaker, descOpened, descEst} {
		ch <- d
	}
	c.t.m.fetchLatency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.t.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(descTokens, s.HitTokens, "hit")
	counter(descTokens, s.MissTokens, "miss")
	counter(descTokens, s.SkippedTokens, "skipped")
	counter(descTokens, s.BreakerTokens, "breaker")
	counter(descBytes, s.BytesIn, "in")
	counter(descBytes, s.BytesOut, "out")
	counter(descWrites, s.Writes, "written")
	counter(descWrites, s.Dropped, "dropped")
	counter(descWrites, s.BreakerSkips, "breaker")
	counter(descLeases, s.LeasesLed, "led")
	counter(descLeases, s.LeasesFollowed, "followed")
	counter(descLeases, s.LeaseWaitsGivenUp, "gave_up")
	for k, v := range []uint64{s.Errors.Timeout, s.Errors.Connection, s.Errors.Full, s.Errors.Corrupt, s.Errors.Other, s.Errors.TLS} {
		counter(descErrors, v, ErrorKind(k).String())
	}
	for _, st := range []BreakerState{BreakerClosed, BreakerOpen, BreakerHalfOpen} {
		v := 0.0
		if st.String() == s.Breaker {
			v = 1
		}
		gauge(descBreaker, v, st.String())
	}
	counter(descOpened, s.BreakerOpened)
	gauge(descEst, s.RTT.Seconds(), "rtt_seconds")
	gauge(descEst, s.Bandwidth, "bandwidth_bytes_per_second")
	gauge(descEst, s.PrefillRate, "prefill_tokens_per_second")
	c.t.m.fetchLatency.Collect(ch)
}

// observeFetch records a fetch's latency.
func (c *counters) observeFetch(d time.Duration) { c.fetchLatency.Observe(d.Seconds()) }
