// Package eviction decides when cached KV blocks leave the prefix cache and
// runs the host-memory tier they can be demoted to.
//
// A Manager wraps the radix tree and the block pool. Every request that
// uses a cached prefix refreshes it: the prefix's nodes record the use
// time, one more hit, the request's priority, and a TTL deadline that is
// the latest of (use time + TTL) over the requests that used them. A
// prefix's priority is the highest a request gave it until that request's
// TTL runs out, then its latest use's. Blocks leave by:
//
//   - TTL: Sweep removes expired, unpinned leaves, cascading upward as
//     parents become leaves; its cost per expiry is O(log n) (a lazy
//     min-heap of deadlines, never a scan of the tree).
//   - Pressure: Reclaim evicts unpinned leaves whose blocks no running
//     sequence holds, lowest priority first, then least recently used,
//     until enough blocks are free; with a host tier, their K/V is demoted
//     to host memory first, and a later Admit promotes it back.
//   - Flush: everything, or one namespace, on an operator's request.
//
// Operator pins keep a prefix through TTL and pressure, within a budget.
// A Manager is not safe for concurrent use: prefixd's engine owns it from
// its scheduler goroutine. Its Counters may be read from any goroutine.
package eviction
