package bpe

import (
	"slices"
	"strings"
	"sync"
)

// Bounds of the word cache: natural text repeats a small set of words, so
// the first cacheWords distinct short pre-tokens serve most of any later
// text; longer ones are rare and cheap to merge relative to their length.
// Like Hugging Face tokenizers' cache, it stops growing when full rather
// than evicting, so a hit costs a read lock and a map lookup.
const (
	cacheWords  = 1 << 16
	cacheMaxLen = 32
)

// wordCache maps pre-tokens to their tokens. It is safe for concurrent
// use.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

func (c *wordCache) get(word string) ([]int32, bool) {
	if len(word) > cacheMaxLen {
		return nil, false
	}
	c.mu.RLock()
	ids, ok := c.m[word]
	c.mu.RUnlock()
	return ids, ok
}

// put stores a copy of ids, unless the word is long or the cache full.
func (c *wordCache) put(word string, ids []int32) {
	if len(word) > cacheMaxLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string][]int32)
	}
	if len(c.m) < cacheWords {
		c.m[strings.Clone(word)] = slices.Clone(ids)
	}
}
