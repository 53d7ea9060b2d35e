package remotetier

import (
	"bytes"
	"errors"
	"testing"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/kvcache"
)

// FuzzVerify: whatever bytes a store returns, verify never panics, and it
// accepts only the exact encoding of the block asked for: any value it
// accepts re-encodes to the same bytes, under this model, namespace,
// fingerprint, parent and tokens, with the block's K/V size.
func FuzzVerify(f *testing.F) {
	tr, err := New(Config{URL: "redis://127.0.0.1:1/0", Model: testModel, BlockTokens: testBlockTokens, BlockBytes: testBlockBytes})
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Close()
	nsHash := NamespaceHash("ns")
	tokens := []int32{1, 2, 3, 4}
	fp, parent := kvcache.Fingerprint{Lo: 11, Hi: 12}, kvcache.Fingerprint{Lo: 13, Hi: 14}
	good := &disktier.Record{Model: testModel, Namespace: nsHash, FP: fp, Parent: parent, Expires: 5, LastUsed: 4,
		Tokens: tokens, Data: blockData("ns", 0)}
	f.Add(disktier.AppendRecord(nil, good))
	f.Add([]byte("PFXDKV\r\n"))
	f.Add([]byte{})
	short := *good
	short.Data = short.Data[:10]
	f.Add(disktier.AppendRecord(nil, &short))
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := tr.verify(v, nsHash, fp, parent, tokens)
		if err != nil {
			if !errors.Is(err, disktier.ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		want := *good
		want.Data, want.Expires, want.LastUsed = b.Data, b.Expires, b.LastUsed
		if again := disktier.AppendRecord(nil, &want); !bytes.Equal(again, v) {
			t.Fatal("accepted a value that is not the block's encoding")
		}
	})
}
