package disktier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/prefixd/prefixd/kvcache"
)

const (
	magic      = "PFXDKV\r\n"
	version    = 1
	headerSize = 8 + 2 + 2 + 4 + 4 + 32 + 16 + 16 + 8 + 8
	crcSize    = 4
	// maxTokens and maxData bound what a header may claim, so a corrupt
	// length cannot make a reader allocate without limit.
	maxTokens = 1 << 16
	maxData   = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt means a record failed a check: its magic, version, lengths or
// CRC. A corrupt record is a miss.
var ErrCorrupt = errors.New("disktier: corrupt record")

// ModelFingerprint identifies everything that makes a block's K/V bytes
// mean what they mean: the weights (tensor names, shapes, types and
// content), the tokenizer, the K/V element type, the block size and
// layout, and the fingerprint's hash algorithm and byte order. Records
// written under one are never read under another.
type ModelFingerprint [32]byte

// record is one block as stored.
type record struct {
	model    ModelFingerprint
	ns       string
	fp       kvcache.Fingerprint
	parent   kvcache.Fingerprint
	expires  int64
	lastUsed int64
	tokens   []int32
	data     []byte
}

// size is the encoded length of r.
func (r *record) size() int {
	return RecordSize(len(r.ns), len(r.tokens), len(r.data))
}

// appendRecord appends r's encoding to dst.
func appendRecord(dst []byte, r *record) []byte {
	le := binary.LittleEndian
	start := len(dst)
	dst = append(dst, magic...)
	dst = le.AppendUint16(dst, version)
	dst = le.AppendUint16(dst, uint16(len(r.ns)))
	dst = le.AppendUint32(dst, uint32(len(r.tokens)))
	dst = le.AppendUint32(dst, uint32(len(r.data)))
	dst = append(dst, r.model[:]...)
	dst = le.AppendUint64(dst, r.fp.Lo)
	dst = le.AppendUint64(dst, r.fp.Hi)
	dst = le.AppendUint64(dst, r.parent.Lo)
	dst = le.AppendUint64(dst, r.parent.Hi)
	dst = le.AppendUint64(dst, uint64(r.expires))
	dst = le.AppendUint64(dst, uint64(r.lastUsed))
	dst = append(dst, r.ns...)
	for _, t := range r.tokens {
		dst = le.AppendUint32(dst, uint32(t))
	}
	dst = le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	dst = append(dst, r.data...)
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// header is what a record's fixed header and the variable fields before
// the K/V bytes say, enough to index it without reading the K/V.
type header struct {
	record
	nsLen, nTokens, dataLen int
}

// parseHeader parses the fixed header of b (at least headerSize bytes).
func parseHeader(b []byte) (header, error) {
	var h header
	if len(b) < headerSize {
		return h, fmt.Errorf("%w: %d bytes, shorter than a header", ErrCorrupt, len(b))
	}
	le := binary.LittleEndian
	if string(b[:8]) != magic {
		return h, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if v := le.Uint16(b[8:]); v != version {
		return h, fmt.Errorf("%w: format version %d, want %d", ErrCorrupt, v, version)
	}
	h.nsLen = int(le.Uint16(b[10:]))
	h.nTokens = int(le.Uint32(b[12:]))
	h.dataLen = int(le.Uint32(b[16:]))
	if h.nTokens > maxTokens || h.dataLen > maxData {
		return h, fmt.Errorf("%w: %d tokens and %d data bytes claimed", ErrCorrupt, h.nTokens, h.dataLen)
	}
	copy(h.model[:], b[20:52])
	h.fp = kvcache.Fingerprint{Lo: le.Uint64(b[52:]), Hi: le.Uint64(b[60:])}
	h.parent = kvcache.Fingerprint{Lo: le.Uint64(b[68:]), Hi: le.Uint64(b[76:])}
	h.expires = int64(le.Uint64(b[84:]))
	h.lastUsed = int64(le.Uint64(b[92:]))
	return h, nil
}

// varSize is the length of the namespace, the token IDs and the header's
// CRC after the fixed header.
func (h *header) varSize() int { return h.nsLen + 4*h.nTokens + crcSize }

// totalSize is the length of the whole record the header describes.
func (h *header) totalSize() int { return headerSize + h.varSize() + h.dataLen + crcSize }

// parseVar checks the header's CRC over fixed (the fixed header) and
// variable (the varSize bytes after it) and fills the namespace and
// tokens from variable.
func (h *header) parseVar(fixed, variable []byte) error {
	le := binary.LittleEndian
	n := len(variable) - crcSize
	sum := crc32.Update(crc32.Checksum(fixed[:headerSize], castagnoli), castagnoli, variable[:n])
	if sum != le.Uint32(variable[n:]) {
		return fmt.Errorf("%w: header CRC mismatch", ErrCorrupt)
	}
	h.ns = string(variable[:h.nsLen])
	h.tokens = make([]int32, h.nTokens)
	for i := range h.tokens {
		h.tokens[i] = int32(le.Uint32(variable[h.nsLen+4*i:]))
	}
	return nil
}

// parseRecord parses and checks a whole record: its header, its lengths
// against len(b) and its CRC. The record's data aliases b.
func parseRecord(b []byte) (record, error) {
	h, err := parseHeader(b)
	if err != nil {
		return record{}, err
	}
	if len(b) != h.totalSize() {
		return record{}, fmt.Errorf("%w: %d bytes, the header says %d", ErrCorrupt, len(b), h.totalSize())
	}
	body := b[:len(b)-crcSize]
	if want := binary.LittleEndian.Uint32(b[len(body):]); crc32.Checksum(body, castagnoli) != want {
		return record{}, fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
	}
	if err := h.parseVar(b, b[headerSize:headerSize+h.varSize()]); err != nil {
		return record{}, err
	}
	h.data = body[headerSize+h.varSize():]
	return h.record, nil
}
