package speculate

import (
	"fmt"
	"slices"
)

// Check verifies every namespace's invariants: its token count equal to a
// recount of its sequences and within MaxNamespaceTokens, the namespace
// count within MaxNamespaces, its trie's structure (trie.check) and the
// trie equal, node for node and count for count, to one built afresh from
// the sequences it keeps, so eviction left nothing behind. It is
// O(tokens × MaxDepth); tests call it after every operation.
func (s *Speculator) Check() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.spaces) > s.cfg.MaxNamespaces {
		return fmt.Errorf("%d namespaces kept, limit %d", len(s.spaces), s.cfg.MaxNamespaces)
	}
	for ns, sp := range s.spaces {
		sp.mu.RLock()
		err := sp.check(s.cfg)
		sp.mu.RUnlock()
		if err != nil {
			return fmt.Errorf("namespace %q: %w", ns, err)
		}
	}
	return nil
}

func (sp *space) check(cfg Config) error {
	n := 0
	for _, q := range sp.seqs {
		n += len(q)
	}
	if n != sp.tokens || n > cfg.MaxNamespaceTokens {
		return fmt.Errorf("%d tokens counted, %d recounted, limit %d", sp.tokens, n, cfg.MaxNamespaceTokens)
	}
	if err := sp.trie.check(); err != nil {
		return err
	}
	fresh := newTrie(cfg.MaxDepth)
	for _, q := range sp.seqs {
		fresh.add(q)
	}
	return sameTrie(sp.trie, fresh)
}

// sameTrie reports the first difference of paths or counts between a and
// b, which must each pass check.
func sameTrie(a, b *trie) error {
	if a.live() != b.live() {
		return fmt.Errorf("%d nodes, %d when rebuilt", a.live(), b.live())
	}
	type pair struct{ a, b int32 }
	stack := []pair{{0, 0}}
	var path []int32
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		na, nb := &a.nodes[p.a], &b.nodes[p.b]
		path = path[:0]
		for c := p.a; c != 0; c = a.nodes[c].parent {
			path = append(path, a.nodes[c].token)
		}
		slices.Reverse(path)
		if na.count != nb.count || na.cont != nb.cont {
			return fmt.Errorf("path %v: count %d cont %d, %d %d when rebuilt", path, na.count, na.cont, nb.count, nb.cont)
		}
		for c := na.child; c != none; c = a.nodes[c].next {
			d := b.child(p.b, a.nodes[c].token)
			if d == none {
				return fmt.Errorf("path %v: child %d absent when rebuilt", path, a.nodes[c].token)
			}
			stack = append(stack, pair{c, d})
		}
	}
	return nil
}
