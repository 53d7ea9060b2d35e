package kvevents_test

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
)

// TestMediumPerTier: each stored and removed block carries the medium of
// the tier it is in, as vLLM's events do: GPU for the device tree, CPU for
// the host tier, DISK for the disk tier; one block in two lower tiers is
// published in each, under the same hash.
func TestMediumPerTier(t *testing.T) {
	const bs = 4
	var batches []kvevents.Batch
	col, err := kvevents.NewCollector(kvevents.CollectorConfig{Model: modelName, BlockSize: bs,
		Emit: func(b kvevents.Batch) { batches = append(batches, b) }})
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	fps := chain("", prompt, bs)
	col.Stored("", kvcache.Fingerprint{}, prompt[:bs], []blockstore.BlockID{0}, fps[:1])
	col.TierStored(kvcache.TierHost, "", fps[0], fps[1], prompt[bs:])
	col.TierStored(kvcache.TierDisk, "", fps[0], fps[1], prompt[bs:])
	col.TierRemoved(kvcache.TierDisk, "", fps[1])
	col.EndStep()
	_, b := decodeBatch(t, batches[0])
	var got []string
	for _, raw := range b.Events {
		var tag []any
		msgpack.Unmarshal(raw, &tag)
		switch tag[0] {
		case "BlockStored":
			var ev blockStored
			msgpack.Unmarshal(raw, &ev)
			got = append(got, "stored "+*ev.Medium)
		case "BlockRemoved":
			var ev blockRemoved
			msgpack.Unmarshal(raw, &ev)
			got = append(got, "removed "+*ev.Medium)
		}
	}
	want := []string{"stored GPU", "stored CPU", "stored DISK", "removed DISK"}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}
