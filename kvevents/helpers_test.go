package kvevents_test

import "github.com/prefixd/prefixd/kvcache"

// chain returns the fingerprints of the whole blocks of tokens in
// namespace ns, as the radix tree computes them.
func chain(ns string, tokens []int32, bs int) []kvcache.Fingerprint {
	return kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, bs)
}
