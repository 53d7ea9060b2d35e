package kvevents_test

import (
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
)

// TestPolicyDetail: each namespace's events reveal what the policy says.
// A namespace under Full publishes its token ids and lora_name "<model>:
// <ns>", as before; under Hashes its blocks' hashes with no token ids and
// no lora_name (the wire format keeps its 8 fields, token_ids an empty
// array); under None nothing, removals and the host tier included.
func TestPolicyDetail(t *testing.T) {
	policy, err := kvevents.ParsePolicy("hashes, acme=full, quiet=none")
	if err != nil {
		t.Fatal(err)
	}
	const bs = 4
	var batches []kvevents.Batch
	col, err := kvevents.NewCollector(kvevents.CollectorConfig{Model: modelName, BlockSize: bs, Policy: policy,
		Emit: func(b kvevents.Batch) { batches = append(batches, b) }})
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{11, 12, 13, 14, 15, 16, 17, 18}
	id := blockstore.BlockID(0)
	for _, ns := range []string{"acme", "", "other", "quiet"} {
		fps := chain(ns, prompt, bs)
		col.Stored(ns, kvcache.Fingerprint{}, prompt, []blockstore.BlockID{id, id + 1}, fps)
		col.TierStored(kvcache.TierHost, ns, kvcache.Fingerprint{}, fps[0], prompt[:bs])
		col.Removed(ns, []blockstore.BlockID{id + 1}, fps[1:])
		id += 2
	}
	col.EndStep()
	if len(batches) != 1 {
		t.Fatalf("%d batches", len(batches))
	}
	payload, b := decodeBatch(t, batches[0])
	stored := map[string]int{} // lora_name ("" for nil) -> BlockStored events
	tokens := map[string]int{} // lora_name -> token ids published
	removed := 0
	for _, raw := range b.Events {
		var tag []any
		msgpack.Unmarshal(raw, &tag)
		switch tag[0] {
		case "BlockStored":
			var ev blockStored
			if err := msgpack.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.TokenIDs == nil || len(tag) != 8 {
				t.Fatalf("BlockStored %v: want 8 fields and token_ids an array", tag)
			}
			name := ""
			if ev.LoraName != nil {
				name = *ev.LoraName
			}
			stored[name]++
			tokens[name] += len(ev.TokenIDs)
		case "BlockRemoved":
			var ev blockRemoved
			msgpack.Unmarshal(raw, &ev)
			removed += len(ev.BlockHashes)
		}
	}
	acme := kvevents.TenantModel(modelName, "acme")
	// acme: its GPU chain and host block in full. The default namespace
	// and "other": two stored events each, with neither tokens nor name.
	if stored[acme] != 2 || tokens[acme] != 3*bs {
		t.Errorf("acme (full): %d stored events, %d token ids; want 2 and %d", stored[acme], tokens[acme], 3*bs)
	}
	if stored[""] != 4 || tokens[""] != 0 {
		t.Errorf("hashes-only namespaces: %d stored events, %d token ids; want 4 and 0", stored[""], tokens[""])
	}
	if len(stored) != 2 {
		t.Errorf("lora names published: %v", stored)
	}
	if removed != 3 {
		t.Errorf("%d blocks removed, want 3 (none of quiet's)", removed)
	}
	if strings.Contains(string(payload), "quiet") || strings.Contains(string(payload), "other") {
		t.Error("a namespace under hashes or none is named in the payload")
	}
}

func TestParsePolicy(t *testing.T) {
	for _, c := range []struct {
		in, out string
		ns      map[string]kvevents.Detail
	}{
		{"", "full", map[string]kvevents.Detail{"x": kvevents.Full}},
		{"none", "none", map[string]kvevents.Detail{"x": kvevents.None, "": kvevents.None}},
		{"a=hashes", "full,a=hashes", map[string]kvevents.Detail{"a": kvevents.Hashes, "b": kvevents.Full}},
		{" b = none , hashes, a=full", "hashes,a=full,b=none", map[string]kvevents.Detail{"a": kvevents.Full, "b": kvevents.None, "c": kvevents.Hashes}},
	} {
		p, err := kvevents.ParsePolicy(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if p.String() != c.out {
			t.Errorf("%q reads as %q, want %q", c.in, p, c.out)
		}
		for ns, want := range c.ns {
			if got := p.For(ns); got != want {
				t.Errorf("%q: namespace %q gets %v, want %v", c.in, ns, got, want)
			}
		}
	}
	for in, want := range map[string]string{
		"partial":       `detail "partial"`,
		"full,none":     "two details",
		"=none":         "names no namespace",
		"a=none,a=full": `"a" listed twice`,
		"a=":            `detail ""`,
	} {
		if _, err := kvevents.ParsePolicy(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}
