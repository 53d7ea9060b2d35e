// Package kvcache is the vocabulary the prefix cache's parts and its users
// share: block fingerprints, the tiers a block can live in, the reasons it
// leaves, the counters and samples the cache reports, and the errors
// callers branch on. It holds no state and imports nothing of prefixd's, so
// that the radix tree, the eviction manager, the tiers, the engine, the
// server and the event publisher can all speak it without importing one
// another.
package kvcache
