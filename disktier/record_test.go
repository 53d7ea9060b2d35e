package disktier

import (
	"errors"
	"slices"
	"testing"

	"github.com/prefixd/prefixd/kvcache"
)

func testRecord() *record {
	return &record{
		model: ModelFingerprint{1, 2, 3}, ns: "acme",
		fp: kvcache.Fingerprint{Lo: 0x1122334455667788, Hi: 0x99aabbccddeeff00}, parent: kvcache.Fingerprint{Lo: 7, Hi: 9},
		expires: 1_700_000_000_000_000_000, lastUsed: 1_699_999_999_000_000_000,
		tokens: []int32{1, -2, 3, 1 << 30}, data: []byte("the K/V bytes of one block"),
	}
}

func sameRecord(a, b *record) bool {
	return a.model == b.model && a.ns == b.ns && a.fp == b.fp && a.parent == b.parent && a.expires == b.expires &&
		a.lastUsed == b.lastUsed && slices.Equal(a.tokens, b.tokens) && slices.Equal(a.data, b.data)
}

// TestRecordRoundTrip: a record parses back to itself, and every
// truncation and every single flipped bit of it fails as ErrCorrupt.
func TestRecordRoundTrip(t *testing.T) {
	r := testRecord()
	b := appendRecord(nil, r)
	if len(b) != r.size() {
		t.Fatalf("encoded %d bytes, size says %d", len(b), r.size())
	}
	got, err := parseRecord(b)
	if err != nil || !sameRecord(&got, r) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for n := range len(b) {
		if _, err := parseRecord(b[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a record torn at %d of %d bytes parsed: %v", n, len(b), err)
		}
	}
	for i := range len(b) {
		for bit := range 8 {
			c := slices.Clone(b)
			c[i] ^= 1 << bit
			if _, err := parseRecord(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a record with bit %d of byte %d flipped parsed: %v", bit, i, err)
			}
		}
	}
}

// FuzzParseRecord: parsing any bytes never panics and never accepts what
// does not re-encode to the same bytes; a valid record round-trips.
func FuzzParseRecord(f *testing.F) {
	f.Add(appendRecord(nil, testRecord()))
	f.Add(appendRecord(nil, &record{}))
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		if again := appendRecord(nil, &r); !slices.Equal(again, b) {
			t.Fatalf("accepted bytes that re-encode differently")
		}
	})
}
