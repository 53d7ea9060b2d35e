package kvcache

import "time"

// RemoteTierStats is the state and running totals of the tier replicas
// share (package remotetier), for metrics and /v1/stats. Tokens are
// counted in whole blocks.
type RemoteTierStats struct {
	LookupTokens  uint64 // prompt tokens looked up in the store, beyond what was cached locally
	HitTokens     uint64 // of those, promoted from fetched blocks
	MissTokens    uint64 // not in the store, or failing verification
	SkippedTokens uint64 // in the store, recomputed because the rule estimated it faster
	BreakerTokens uint64 // not looked up: the breaker was open
	Fetches       uint64 // transfers made
	Writes        uint64 // blocks written (SET NX that set)
	Dropped       uint64 // writes dropped: the queue was full
	BreakerSkips  uint64 // writes skipped: the breaker was open
	BytesIn       uint64 // value bytes fetched
	BytesOut      uint64 // value bytes written
	StagedBytes   int64  // K/V bytes fetched and not yet promoted
	Errors        RemoteErrors
	Breaker       string // closed, open or half_open
	BreakerOpened uint64 // times the breaker opened

	// Fetches that missed blocks in the store: took the fleet's lease on
	// computing them, waited for the replica holding it, or waited the
	// longest allowed (MaxLeaseWait) and gave up.
	LeasesLed, LeasesFollowed, LeaseWaitsGivenUp uint64

	// The fetch rule's measurements; zero while unmeasured.
	RTT         time.Duration
	Bandwidth   float64 // bytes per second
	PrefillRate float64 // prompt tokens per second
}

// RemoteErrors counts the remote tier's errors by kind; each meant
// recompute.
type RemoteErrors struct {
	Timeout    uint64 `json:"timeout"`    // a deadline passed: the store is slow or unreachable
	Connection uint64 `json:"connection"` // the connection failed or was refused
	Full       uint64 `json:"full"`       // the store refused a write for memory (OOM)
	Corrupt    uint64 `json:"corrupt"`    // a value failed verification
	Other      uint64 `json:"other"`      // any other error the store returned
	TLS        uint64 `json:"tls"`        // the TLS handshake failed (a certificate that did not verify)
}
