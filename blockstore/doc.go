// Package blockstore is prefixd's paged KV cache: a pool of fixed-size
// physical blocks, per-sequence block tables that map logical blocks to
// physical ones, reference counts, and copy-on-write.
//
// A block's reference count is the number of block tables that hold it plus
// one if the prefix cache holds it. A block is on the free list exactly when
// its count is zero. Nothing is copied until a sequence writes into a block
// that someone else also holds; then the writer gets a private copy of the
// slots written so far and the shared original is left untouched.
//
// The K/V bytes themselves live in a Storage, implemented by a compute
// backend; the pool only decides which block holds what and when bytes must
// be copied.
//
// A Pool and its Tables are not safe for concurrent use: prefixd's engine
// owns them from its single scheduler goroutine.
package blockstore
