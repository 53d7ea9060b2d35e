package kvevents_test

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
)

// chain returns the fingerprints of the whole blocks of tokens in
// namespace ns, as the radix tree computes them.
func chain(ns string, tokens []int32, bs int) []kvcache.Fingerprint {
	return kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, bs)
}

// decodeBatch encodes a Collector's batch as the publisher sends it and
// decodes it as a subscriber does.
func decodeBatch(t *testing.T, batch kvevents.Batch) ([]byte, eventBatch) {
	t.Helper()
	payload, err := batch.AppendMsgpack(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b eventBatch
	if err := msgpack.Unmarshal(payload, &b); err != nil {
		t.Fatal(err)
	}
	return payload, b
}
