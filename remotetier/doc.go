// Package remotetier is the cache tier that replicas share: a Redis or
// Valkey store every replica reaches, below the device pool, the host tier
// and the disk tier (an eviction.Tier of medium kvcache.TierRemote). A
// replica writes the blocks it computes through to the store; another
// replica whose prompt continues into them fetches them instead of
// recomputing them, when fetching is estimated to be faster.
//
// # Client
//
// It speaks to the store through github.com/redis/go-redis/v9, pinned at
// v9.23.0: the client Redis maintains, which parses redis:// and rediss://
// URLs (TLS, user, password, database) as redis-cli does, pipelines any
// commands in one round trip, honours context deadlines per call, and
// speaks RESP2, which Redis 7 and Valkey both serve. A rediss:// URL
// speaks TLS (1.2 or later), verifying the store's certificate against
// Config.CAFile or the system's authorities; a handshake that fails is
// counted as a tls error and logged as a warning. valkey-go (v1.0.79)
// pipelines automatically but would add its own URL dialect and a larger
// API for nothing this tier uses.
//
// # Keys and values
//
// A block's key names the model, the namespace and the block:
//
//	pfxkv:1:<model>:<namespace>:<fingerprint>
//
// where <model> is the hex of the first 16 bytes of the model fingerprint
// (disktier.ModelFingerprint: weights, tokenizer, K/V element type, block
// size and layout, hash algorithm and byte order), <namespace> the hex of
// the first 16 bytes of the SHA-256 of the namespace (NamespaceHash: the
// store never sees a tenant's name, and a tenant's keys are not another's)
// and <fingerprint> the 32 hex digits of the block's chained fingerprint
// (kvcache.Chain, salted by the namespace). The "1" changes with the key
// or value format.
//
// A value is the disk tier's record (disktier.Record, written by
// disktier.AppendRecord: one format for both tiers), whose namespace field
// holds the namespace hash: magic, format version, the full model
// fingerprint, the fingerprint and its parent, TTL deadline and last use,
// the block's token IDs, a CRC-32C of that header, the K/V bytes and a
// CRC-32C of the whole value.
//
// # Writes
//
// Put encodes the block and queues it, never waiting: a full queue
// (Config.QueueBlocks) or an open breaker drops it, counted. One writer
// goroutine sends what is queued in one pipeline of SET NX with an expiry
// of Config.TTL or, if later, the block's own TTL deadline: concurrent
// writers of a block leave the first value, and the store may evict the
// keys early under its volatile-lru policy. A block this process wrote or
// fetched is not sent again for half its expiry.
//
// # Fetches
//
// Fetch, which the engine calls off its scheduler goroutine before it
// admits a request, looks the prompt's whole chain (beyond what is cached
// locally) up in one pipelined round trip (STRLEN of each key), decides
// by the rule (Estimates.Fetch: the measured round trip plus the bytes
// over the measured bandwidth, against the tokens over the measured
// prefill rate), then transfers the run in one more pipelined round trip,
// under a deadline (Config.MaxFetchWait, and never past the estimated time
// to recompute). Every value is verified before use (disktier.ParseRecord's
// checks, then the model fingerprint, the namespace hash, the fingerprint
// and parent, every token ID and the K/V size): one that fails is a miss,
// counted as corrupt, and deleted so that a writer can replace it. Verified
// blocks wait in a bounded staging area (Config.StageBytes) until
// admission promotes them (Get, Delete).
//
// # Leases
//
// Requests that arrive at several replicas while their shared prefix is
// being computed would each compute it: the store misses it until the
// first writes it. A fetch that misses blocks therefore takes the fleet's
// lease on computing them, or follows it. A block's lease is its key with
// ":computing", holding its holder's token for Config.LeaseTTL; the
// holder's tier renews its leases every third of that until it releases
// them, so they outlive a slow holder and not a dead one. If the first
// block missing is leased by another replica, the fetch waits, polling in
// one pipelined round trip how far the chain reaches and who holds the
// lease on the first block still missing, until that block's lease is
// released or has expired with the block unwritten (its holder died, or
// gave up), or the chain has not grown for Config.MaxLeaseWait; it then
// fetches what was written and leases what is still missing, which its
// replica computes. Otherwise it leases every missing block not leased by
// another, atomically (a script: of replicas that miss a block at once,
// exactly one leads); its replica's engine releases the leases (a
// compare-and-delete script, queued after the blocks' writes, so a
// follower never sees a released lease before the blocks) once the
// prompt is computed or the request gives up its blocks. Leases sit under
// the namespace's keys (a tenant never waits on another; a flush ends
// them), and every lease round trip goes through the breaker and a
// deadline: a store that dies or hangs ends a wait at once, and the
// request computes. Config.NoLease turns them off.
//
// # Failures
//
// No failure changes an answer: a store that is down, slow, full or
// returns garbage makes the tier stage nothing, and the request computes
// its prompt. Errors are counted by kind (ErrorKind). After
// Config.BreakerFailures failures in a row a circuit breaker opens and
// the tier sends nothing for a backoff that doubles with every failed
// probe, so a dead store costs a request nothing.
//
// Blocks in the store are not published as KV events: they are not this
// replica's, and a router that sent a request here for them would find
// what any replica finds.
//
// The password comes from the URL or from the environment (PasswordEnv);
// neither it nor a prompt's tokens appear in a log line or an error.
package remotetier
