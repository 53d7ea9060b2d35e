package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kvcache"
)

// diskTierJSON is the disk tier's state in /v1/stats and GET /v1/cache.
type diskTierJSON struct {
	Blocks    int    `json:"blocks"`
	Bytes     int64  `json:"bytes"`
	Writes    uint64 `json:"writes"`
	Dropped   uint64 `json:"dropped_writes"`
	Evicted   uint64 `json:"evicted_blocks"`
	Corrupt   uint64 `json:"corrupt_records"`
	Hits      uint64 `json:"hit_blocks"`
	ReadBytes uint64 `json:"read_bytes"`
	Scanning  bool   `json:"scanning"`
}

func diskTierOf(s kvcache.TierStats) *diskTierJSON {
	return &diskTierJSON{Blocks: s.Blocks, Bytes: s.Bytes, Writes: s.Writes, Dropped: s.Dropped, Evicted: s.Evicted,
		Corrupt: s.Corrupt, Hits: s.Hits, ReadBytes: s.ReadBytes, Scanning: s.Scanning}
}

var (
	descDiskBytes    = desc("prefixd_disk_tier_bytes", "Bytes of records in the disk cache tier.")
	descDiskBlocks   = desc("prefixd_disk_tier_blocks", "Blocks in the disk cache tier.")
	descDiskWrites   = desc("prefixd_disk_tier_writes_total", "Blocks written to the disk tier.")
	descDiskDropped  = desc("prefixd_disk_tier_dropped_writes_total", "Blocks not written to the disk tier because its write queue was full.")
	descDiskEvicted  = desc("prefixd_disk_tier_evicted_blocks_total", "Records removed from the disk tier for its byte budget or their TTL.")
	descDiskCorrupt  = desc("prefixd_disk_tier_corrupt_records_total", "Disk tier records that failed a check (each a miss, removed).")
	descDiskReadByte = desc("prefixd_disk_tier_read_bytes_total", "Bytes read back from the disk tier for cache hits.")
	descDiskScanning = desc("prefixd_disk_tier_scanning", "1 while the start-up scan rebuilds the disk tier's index.")

	diskDescs = []*prometheus.Desc{descDiskBytes, descDiskBlocks, descDiskWrites, descDiskDropped, descDiskEvicted,
		descDiskCorrupt, descDiskReadByte, descDiskScanning}
)

// collectDisk exports the disk tier's series from st.
func collectDisk(ch chan<- prometheus.Metric, st *engine.Stats) {
	d := st.Disk
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{descDiskBytes, prometheus.GaugeValue, float64(d.Bytes)},
		{descDiskBlocks, prometheus.GaugeValue, float64(d.Blocks)},
		{descDiskWrites, prometheus.CounterValue, float64(d.Writes)},
		{descDiskDropped, prometheus.CounterValue, float64(d.Dropped)},
		{descDiskEvicted, prometheus.CounterValue, float64(d.Evicted)},
		{descDiskCorrupt, prometheus.CounterValue, float64(d.Corrupt)},
		{descDiskReadByte, prometheus.CounterValue, float64(d.ReadBytes)},
		{descDiskScanning, prometheus.GaugeValue, map[bool]float64{false: 0, true: 1}[d.Scanning]},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v)
	}
}
