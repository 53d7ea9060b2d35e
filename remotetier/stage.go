package remotetier

import (
	"container/list"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvcache"
)

// staged is a block fetched and verified, waiting for admission to
// promote it into the device pool.
type staged struct {
	ns     string
	fp     kvcache.Fingerprint
	tokens []int32
	block  eviction.StoredBlock
	el     *list.Element
}

// stage holds fetched blocks until they are promoted, within a byte
// budget (the oldest leave first). It is safe for concurrent use.
type stage struct {
	mu      sync.Mutex
	budget  int64
	held    int64
	byFP    map[kvcache.Fingerprint]*staged
	order   list.List // of *staged, oldest first
	dropped atomic.Uint64
}

func (s *stage) init(budget int64) {
	s.budget = budget
	s.byFP = map[kvcache.Fingerprint]*staged{}
}

// put stages e, replacing an entry of the same fingerprint, and drops the
// oldest entries beyond the budget.
func (s *stage) put(e *staged) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byFP[e.fp]; ok {
		s.drop(old)
	}
	e.el = s.order.PushBack(e)
	s.byFP[e.fp] = e
	s.held += int64(len(e.block.Data))
	for s.held > s.budget && s.order.Len() > 1 {
		s.drop(s.order.Front().Value.(*staged))
		s.dropped.Add(1)
	}
}

// drop removes e. REQUIRES: mu held.
func (s *stage) drop(e *staged) {
	s.order.Remove(e.el)
	delete(s.byFP, e.fp)
	s.held -= int64(len(e.block.Data))
}

// get returns the staged block fp if it is namespace ns's with tokens.
func (s *stage) get(ns string, fp kvcache.Fingerprint, tokens []int32) (eviction.StoredBlock, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byFP[fp]
	if !ok || e.ns != ns || !slices.Equal(e.tokens, tokens) {
		return eviction.StoredBlock{}, false
	}
	return e.block, true
}

// remove drops the staged block fp if it is namespace ns's with tokens.
func (s *stage) remove(ns string, fp kvcache.Fingerprint, tokens []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byFP[fp]; ok && e.ns == ns && slices.Equal(e.tokens, tokens) {
		s.drop(e)
	}
}

// removeIf drops the staged blocks f selects.
func (s *stage) removeIf(f func(*staged) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for el := s.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*staged); f(e) {
			s.drop(e)
		}
		el = next
	}
}

// bytes returns the K/V bytes staged.
func (s *stage) bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// known remembers, until a time (half the key's expiry) and up to a bound
// (the oldest forgotten first), the fingerprints of blocks the store holds
// because this process wrote or fetched them, so a block demoted or
// offered again is not sent again. Forgetting costs only a redundant SET
// NX; remembering a block the store evicted early (volatile-lru) costs
// other replicas a miss until the entry's time. It is safe for concurrent
// use.
type known struct {
	mu   sync.Mutex
	max  int
	set  map[kvcache.Fingerprint]int64 // until when, Unix ns
	fifo []kvcache.Fingerprint         // a ring of the set's members, oldest at head
	head int
}

func (k *known) init(n int) {
	k.max = n
	k.set = make(map[kvcache.Fingerprint]int64, n)
}

func (k *known) has(fp kvcache.Fingerprint, now int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	until, ok := k.set[fp]
	return ok && now < until
}

func (k *known) add(fp kvcache.Fingerprint, until int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.set[fp]; ok {
		k.set[fp] = until
		return
	}
	if len(k.fifo) < k.max {
		k.fifo = append(k.fifo, fp)
	} else {
		delete(k.set, k.fifo[k.head])
		k.fifo[k.head] = fp
		k.head = (k.head + 1) % k.max
	}
	k.set[fp] = until
}

func (k *known) clear() {
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.set)
	k.fifo, k.head = k.fifo[:0], 0
}

// check verifies the staging area: the list and the map hold the same
// entries, each once, under its own fingerprint, and the byte count is
// the sum of their K/V bytes.
func (s *stage) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.order.Len() != len(s.byFP) {
		return fmt.Errorf("remotetier: %d staged in order, %d indexed", s.order.Len(), len(s.byFP))
	}
	var sum int64
	for el := s.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*staged)
		if s.byFP[e.fp] != e || e.el != el {
			return fmt.Errorf("remotetier: staged block %x is not indexed as itself", e.fp.Lo)
		}
		sum += int64(len(e.block.Data))
	}
	if sum != s.held {
		return fmt.Errorf("remotetier: %d staged bytes counted, %d held", s.held, sum)
	}
	return nil
}
