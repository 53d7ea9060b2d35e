package server

import (
	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kvcache"
)

// remoteTierJSON is the shared tier's part of /v1/stats: tokens by
// outcome, bytes each way, errors by kind, the breaker and the fetch
// rule's measurements.
type remoteTierJSON struct {
	HitTokens     uint64               `json:"hit_tokens"`
	LookupTokens  uint64               `json:"lookup_tokens"`
	MissTokens    uint64               `json:"miss_tokens"`
	SkippedTokens uint64               `json:"skipped_tokens"`
	BreakerTokens uint64               `json:"breaker_tokens"`
	Fetches       uint64               `json:"fetches"`
	Writes        uint64               `json:"writes"`
	WritesDropped uint64               `json:"writes_dropped"`
	BreakerSkips  uint64               `json:"writes_breaker_skipped"`
	BytesIn       uint64               `json:"bytes_in"`
	BytesOut      uint64               `json:"bytes_out"`
	StagedBytes   int64                `json:"staged_bytes"`
	LeasesLed     uint64               `json:"leases_led"`
	LeasesFollow  uint64               `json:"leases_followed"`
	LeasesGaveUp  uint64               `json:"lease_waits_given_up"`
	Errors        kvcache.RemoteErrors `json:"errors"`
	Breaker       string               `json:"breaker"`
	BreakerOpened uint64               `json:"breaker_opened"`
	RTTSeconds    float64              `json:"rtt_seconds"`
	Bandwidth     float64              `json:"bandwidth_bytes_per_second"`
	PrefillRate   float64              `json:"prefill_tokens_per_second"`
}

// remoteTierOf reports st's remote tier; hits are the engine's count of
// tokens promoted from it.
func remoteTierOf(st *engine.Stats) *remoteTierJSON {
	r := &st.Remote
	return &remoteTierJSON{HitTokens: st.CacheHitRemote, LookupTokens: r.LookupTokens, MissTokens: r.MissTokens,
		SkippedTokens: r.SkippedTokens, BreakerTokens: r.BreakerTokens, Fetches: r.Fetches, Writes: r.Writes,
		WritesDropped: r.Dropped, BreakerSkips: r.BreakerSkips, BytesIn: r.BytesIn, BytesOut: r.BytesOut,
		StagedBytes: r.StagedBytes, LeasesLed: r.LeasesLed, LeasesFollow: r.LeasesFollowed, LeasesGaveUp: r.LeaseWaitsGivenUp, Errors: r.Errors, Breaker: r.Breaker, BreakerOpened: r.BreakerOpened,
		RTTSeconds: r.RTT.Seconds(), Bandwidth: r.Bandwidth, PrefillRate: r.PrefillRate}
}
