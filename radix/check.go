package radix

import "fmt"

// Check verifies the tree's invariants: edges of whole blocks, children
// sorted and distinct by their first block, parent pointers and depths,
// the leaf list equal to the set of
// leaves, and counters equal to a recount. It is O(tree); tests call it
// after every operation.
func (t *Tree) Check() error {
	var total Stats
	leaves := 0
	for ns, root := range t.roots {
		if !root.root || root.ns != ns || root.parent != nil || len(root.tokens) != 0 {
			return fmt.Errorf("namespace %q: malformed root", ns)
		}
		if len(root.children) == 0 {
			return fmt.Errorf("namespace %q: empty root kept", ns)
		}
		var s Stats
		if err := t.checkNode(root, &s, &leaves); err != nil {
			return fmt.Errorf("namespace %q: %w", ns, err)
		}
		if got := t.stats[ns]; got == nil || *got != s {
			return fmt.Errorf("namespace %q: stats %+v, recount %+v", ns, got, s)
		}
		total.Nodes += s.Nodes
		total.Blocks += s.Blocks
		total.Tokens += s.Tokens
	}
	if len(t.stats) != len(t.roots) {
		return fmt.Errorf("%d stats entries for %d namespaces", len(t.stats), len(t.roots))
	}
	if total != t.total {
		return fmt.Errorf("total %+v, recount %+v", t.total, total)
	}
	listed := 0
	for n := t.leaf.nextLeaf; n != &t.leaf; n = n.nextLeaf {
		if !n.IsLeaf() || n.removed || !n.listed || n.nextLeaf.prevLeaf != n {
			return fmt.Errorf("leaf list holds a node that is not a live leaf (depth %d)", n.depth)
		}
		if listed++; listed > leaves {
			break
		}
	}
	if listed != leaves {
		return fmt.Errorf("leaf list has %d nodes, tree has %d leaves", listed, leaves)
	}
	return nil
}

func (t *Tree) checkNode(n *Node, s *Stats, leaves *int) error {
	if !n.root {
		switch {
		case n.removed:
			return fmt.Errorf("removed node still linked at depth %d", n.depth)
		case len(n.blocks) == 0 || len(n.tokens) != len(n.blocks)*t.bs:
			return fmt.Errorf("edge of %d tokens with %d blocks", len(n.tokens), len(n.blocks))
		case n.depth != n.parent.depth+len(n.tokens):
			return fmt.Errorf("depth %d, parent %d + edge %d", n.depth, n.parent.depth, len(n.tokens))
		case n.pins < 0:
			return fmt.Errorf("negative pins %d", n.pins)
		case n.IsLeaf() != n.listed:
			return fmt.Errorf("leaf=%v but listed=%v at depth %d", n.IsLeaf(), n.listed, n.depth)
		}
		s.Nodes++
		s.Blocks += len(n.blocks)
		s.Tokens += len(n.tokens)
		if n.IsLeaf() {
			*leaves++
		}
	}
	if len(n.firsts) != len(n.children) {
		return fmt.Errorf("node at depth %d: %d first tokens for %d children", n.depth, len(n.firsts), len(n.children))
	}
	for i, c := range n.children {
		if c.parent != n || c.ns != n.ns {
			return fmt.Errorf("child %d of node at depth %d has wrong parent or namespace", i, n.depth)
		}
		if i > 0 && compareBlock(n.children[i-1].tokens[:t.bs], c.tokens[:t.bs]) >= 0 {
			return fmt.Errorf("children of node at depth %d not sorted by first block", n.depth)
		}
		if n.firsts[i] != c.tokens[0] {
			return fmt.Errorf("node at depth %d: first token of child %d recorded %d, is %d", n.depth, i, n.firsts[i], c.tokens[0])
		}
		if err := t.checkNode(c, s, leaves); err != nil {
			return err
		}
	}
	return nil
}
