// Package kvevents publishes what prefixd's KV cache holds in vLLM's KV
// cache event wire format, so that KV-aware routers built for vLLM (llm-d's
// precise prefix-cache scorer, Dynamo-style KV routers) can route each
// request to the replica that caches its prefix.
//
// # Wire format
//
// Each message on the PUB socket has three frames: the topic
// "kv@<pod-id>@<model>", a sequence number (8 bytes, big-endian, from 0,
// one per message) and a msgpack payload, the batch
//
//	[ts float64 (Unix seconds), [event, ...], data_parallel_rank (always nil)]
//
// whose events are positional arrays, tag first:
//
//	["BlockStored", block_hashes []uint64, parent_block_hash uint64|nil,
//	 token_ids []int32, block_size int, lora_id int|nil, medium string, lora_name string|nil]
//	["BlockRemoved", block_hashes []uint64, medium string]
//	["AllBlocksCleared"]
//
// as vllm/distributed/kv_events.py writes them. Each stored block carries
// the medium it is stored on: "GPU" (the device pool), "CPU" (the host
// tier) or "DISK" (the disk tier). A block's hash is the low word of its
// chained fingerprint (kvcache.Chain over the namespace salt, every token
// before it and its own tokens, computed once by the radix tree when the
// block is inserted and carried with it through every tier), never 0; 0 would mean "no parent". A
// BlockStored names a parent only when the parent is published and not
// removed since, and a block whose parent is unknown to subscribers is
// not published at all: a router that chained it from the root would
// believe a prefix the replica does not hold.
//
// The replay socket (ROUTER) answers a request [identity, "", start_seq
// (8 bytes, big-endian)] with [identity, "", seq, payload] for every
// buffered message from start_seq on and then the end marker [identity,
// "", -1 (8 bytes), ""], as vLLM's publisher does.
//
// # Tenants
//
// A namespace's blocks are never published as another's: blocks of the
// default namespace "" carry no LoRA fields, and blocks of namespace ns
// carry a lora_id derived from ns and (under the Full detail, below)
// lora_name TenantModel(model, ns),
// as vLLM marks blocks computed under a LoRA adapter. Routers key blocks
// on model (or LoRA) name plus tokens, so the same prompt of two tenants
// is two different prefixes to them, as it is to prefixd. The topic stays
// one per replica, so replayed messages (which carry no topic) lose
// nothing.
//
// # What events reveal
//
// Neither socket authenticates its subscribers (vLLM's do not either). A
// BlockStored's token_ids are the cached prompt itself to anyone holding
// the model's tokenizer, and its lora_name names the tenant. A Policy
// chooses per namespace what goes out: Full (the above, which routers
// that rebuild block keys from token_ids, such as llm-d's precise
// prefix-cache scorer, need), Hashes (block hashes, parent and medium;
// token_ids an empty array and lora_name nil, so such routers match none
// of the namespace's blocks) or None (no event of the namespace). Hashes
// still show the cache's occupancy and churn, and they are not secret:
// the chain (eviction.Chain, salted with a hash of the namespace name) is
// deterministic, so whoever guesses a prompt and the tenant's name can
// check whether a replica caches it. Only None hides a namespace.
//
// # Threading
//
// The engine's scheduler goroutine feeds a Collector through the
// radix.Observer and eviction.Observer calls and EndStep; EndStep hands at
// most one batch per iteration, and only a non-empty one, to the
// Publisher's goroutine through a bounded queue without ever blocking: a
// batch that finds the queue full is merged into the next message, never
// dropped, since a lost batch would leave no gap in the sequence numbers
// for a subscriber to notice and replay.
package kvevents
