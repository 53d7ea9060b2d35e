// Package disktier is the cache tier on a local disk: blocks that leave
// the host tier (or the device pool, when there is no host tier) are
// written as self-verifying records, one file each, and read back into the
// device pool when a later request's prefix continues into them, across
// restarts of the process.
//
// # Records
//
// A record is one block, in one file named by its fingerprint
// (<dir>/<2 hex>/<32 hex>.kv), written to a temporary file and renamed
// into place, so a reader (or a restart) sees either the whole record or
// none of it. Its layout, little-endian:
//
//	magic      8 bytes  "PFXDKV\r\n"
//	version    uint16   1
//	ns length  uint16
//	tokens     uint32   the block's token count
//	data len   uint32   the K/V bytes
//	model      32 bytes the model fingerprint (Config.Model)
//	fp         2 x uint64 the block's chained fingerprint (kvcache)
//	parent     2 x uint64 the fingerprint of the block before it
//	expires    int64    the block's TTL deadline, Unix ns
//	last used  int64    Unix ns
//	namespace, token IDs (int32 each)
//	header crc uint32   CRC-32C (Castagnoli) of every byte before it
//	K/V bytes
//	crc        uint32   CRC-32C of every byte before it
//
// The header's CRC lets the start-up scan trust what it indexes (the
// namespace and token IDs a lookup compares) without reading the K/V
// bytes; the last CRC covers the whole record when it is read.
//
// A record is a hit only if all of it checks: magic, version, model
// fingerprint, namespace, fingerprint, every token ID of the block asked
// for (as the radix tree compares them) and the CRC. One that fails is a
// miss, counted as corrupt, logged once (the file is removed), never an
// answer. Records of another model fingerprint are never indexed, so never
// hit.
//
// # Guarantees
//
// Writes never block the caller: Put copies the block onto a bounded queue
// that one writer goroutine drains; a full queue drops the block (counted).
// A process killed at any moment (kill -9) loses at most the writes still
// queued or in flight: earlier records were renamed into place whole. Power
// loss may tear recent records (there is no fsync); the CRC turns a torn
// record into a miss. At start-up the index is rebuilt by scanning the
// directory in the background while the tier serves: a block is found
// once its record has been scanned.
//
// # Budget
//
// Records are kept within Config.CapacityBytes by least-recent use (a hit
// or a write refreshes a record), and each expires at the later of its
// block's TTL deadline and Config.TTL after its last use.
package disktier
