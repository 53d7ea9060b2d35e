package speculate

import (
	"fmt"
	"slices"
)

// Check verifies every namespace's invariants: its token count equal to a
// recount of its sequences and within MaxNamespaceTokens, the namespace
// count within MaxNamespaces, its trie's structure (trie.check) and the
// trie holding the same paths with the same counts as one built afresh
// from the sequences it keeps, so eviction left nothing behind. It is
// O(tokens × MaxDepth²) and allocates; tests call it after every
// operation.
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
	if sp.trie.tokens > cfg.MaxNamespaceTokens {
		return fmt.Errorf("%d tokens kept, limit %d", sp.trie.tokens, cfg.MaxNamespaceTokens)
	}
	if err := sp.trie.check(); err != nil {
		return err
	}
	fresh := newTrie(cfg.MaxDepth)
	for _, q := range sp.trie.texts {
		fresh.add(q)
	}
	return sameTrie(sp.trie, fresh)
}

// sameTrie reports the first difference of paths or counts between a and
// b, which must each pass check; their shapes may differ (a path of one
// occurrence may be a tail or a chain of nodes).
func sameTrie(a, b *trie) error {
	pa, pb := a.paths(), b.paths()
	if len(pa) != len(pb) {
		return fmt.Errorf("%d paths, %d when rebuilt", len(pa), len(pb))
	}
	for k, v := range pa {
		if pb[k] != v {
			return fmt.Errorf("path %s: count and continuations %v, %v when rebuilt", k, v, pb[k])
		}
	}
	return nil
}

// paths lists every path from the root, tails expanded, with its count and
// continuation count. It is O(tokens × depth²).
func (t *trie) paths() map[string][2]int32 {
	out := map[string][2]int32{}
	for c := 1; c < len(t.nodes); c++ {
		cn := &t.nodes[c]
		if cn.count == 0 {
			continue // free
		}
		var path []int32
		for x := int32(c); x != 0; x = t.nodes[x].parent {
			path = append(path, t.nodes[x].token)
		}
		slices.Reverse(path)
		var tail []int32
		if cn.n > 0 {
			tail = t.text(cn.ref)[cn.pos : cn.pos+cn.n]
		}
		out[fmt.Sprint(path)] = [2]int32{cn.count, cn.cont + min(cn.n, 1)}
		for i, tok := range tail {
			path = append(path, tok)
			out[fmt.Sprint(path)] = [2]int32{1, min(int32(len(tail)-1-i), 1)}
		}
	}
	return out
}
