package kvevents

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestBatchGolden checks the payload byte for byte against msgpack written
// by hand from the spec and vLLM's field order.
func TestBatchGolden(t *testing.T) {
	b := Batch{TS: 1.5, Events: []Event{
		{Kind: BlockStored, Hashes: []uint64{1, 1<<64 - 1}, Tokens: []int32{1, 2, 3, -1}, BlockSize: 2, Medium: MediumGPU},
		{Kind: BlockStored, Hashes: []uint64{7}, Parent: 1, Tokens: []int32{5, 6}, BlockSize: 2, Medium: MediumCPU, LoraID: 3, LoraName: "m:t"},
		{Kind: BlockRemoved, Hashes: []uint64{300}, Medium: MediumCPU},
		{Kind: AllBlocksCleared},
	}}
	want := strings.Join([]string{
		"93",                 // [ts, events, data_parallel_rank]
		"cb3ff8000000000000", // 1.5
		"94",
		"98" + "ab426c6f636b53746f726564", // ["BlockStored",
		"9201cfffffffffffffffff",          //  [1, 2^64-1],
		"c0",                              //  parent nil,
		"94010203ff",                      //  [1, 2, 3, -1],
		"02" + "c0" + "a3475055" + "c0",   //  2, nil, "GPU", nil]
		"98" + "ab426c6f636b53746f726564",
		"9107" + "01" + "920506" + "02" + "03" + "a3435055" + "a36d3a74", // [7], 1, [5, 6], 2, 3, "CPU", "m:t"
		"93" + "ac426c6f636b52656d6f766564" + "91cd012c" + "a3435055",    // ["BlockRemoved", [300], "CPU"]
		"91" + "b0416c6c426c6f636b73436c6561726564",                      // ["AllBlocksCleared"]
		"c0",
	}, "")
	got, err := b.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := hex.DecodeString(want); !bytes.Equal(got, w) {
		t.Fatalf("payload\n got %x\nwant %s", got, want)
	}
}
