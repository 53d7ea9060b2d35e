package disktier

import "github.com/prefixd/prefixd/kvcache"

// Record is one block in the disk tier's record format (see the package
// documentation), exported because the remote tier (package remotetier)
// stores the same records as its values: one format, one parser, one fuzz
// test for both tiers.
type Record struct {
	Model     ModelFingerprint
	Namespace string // the remote tier stores a hash of the namespace here
	FP        kvcache.Fingerprint
	Parent    kvcache.Fingerprint
	Expires   int64 // the block's TTL deadline, Unix ns
	LastUsed  int64 // Unix ns
	Tokens    []int32
	Data      []byte // the block's K/V bytes
}

// AppendRecord appends r's encoding to dst and returns it.
func AppendRecord(dst []byte, r *Record) []byte {
	return appendRecord(dst, &record{model: r.Model, ns: r.Namespace, fp: r.FP, parent: r.Parent,
		expires: r.Expires, lastUsed: r.LastUsed, tokens: r.Tokens, data: r.Data})
}

// RecordSize returns the length of the encoding of a record with a
// namespace of nsLen bytes, tokens token IDs and dataLen K/V bytes.
func RecordSize(nsLen, tokens, dataLen int) int {
	return headerSize + nsLen + 4*tokens + crcSize + dataLen + crcSize
}

// ParseRecord parses and checks a whole record (magic, version, lengths and
// both CRCs); an error wraps ErrCorrupt. The record's Data aliases b. It
// does not compare the model, namespace, fingerprint or tokens with what
// the caller asked for: the caller must.
func ParseRecord(b []byte) (Record, error) {
	r, err := parseRecord(b)
	if err != nil {
		return Record{}, err
	}
	return Record{Model: r.model, Namespace: r.ns, FP: r.fp, Parent: r.parent,
		Expires: r.expires, LastUsed: r.lastUsed, Tokens: r.tokens, Data: r.data}, nil
}
