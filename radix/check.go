package radix

import (
	"fmt"
	"slices"
)

// Check verifies the tree's invariants: edges of whole blocks, children
// sorted and distinct by their first block, parent pointers, namespaces and
// depths, every block's fingerprint equal to its chain from the root,
// pins non-negative and at least the sum of the children's, each
// namespace's leaf list equal to its set of leaves, the namespace list
// equal to the namespace table, and counters equal to a recount. It is
// O(tree); tests call it after every operation.
func (t *Tree) Check() error {
	var total Stats
	spaces := 0
	for sp := t.order.next; sp != &t.order; sp = sp.next {
		if spaces++; spaces > len(t.spaces) || t.spaces[sp.name] != sp || sp.next.prev != sp {
			return fmt.Errorf("namespace list does not match the table at %q", sp.name)
		}
		if err := t.checkSpace(sp); err != nil {
			return fmt.Errorf("namespace %q: %w", sp.name, err)
		}
		total.Nodes += sp.stats.Nodes
		total.Blocks += sp.stats.Blocks
		total.Tokens += sp.stats.Tokens
	}
	if spaces != len(t.spaces) {
		return fmt.Errorf("namespace list has %d entries, table %d", spaces, len(t.spaces))
	}
	if total != t.total {
		return fmt.Errorf("total %+v, sum over namespaces %+v", t.total, total)
	}
	return nil
}

func (t *Tree) checkSpace(sp *space) error {
	root := &sp.root
	if root.sp != sp || root.parent != nil || len(root.tokens) != 0 || root.pins != 0 || root.listed {
		return fmt.Errorf("malformed root")
	}
	if len(root.children) == 0 {
		return fmt.Errorf("empty namespace kept")
	}
	var s Stats
	leaves := 0
	if err := t.checkNode(root, &s, &leaves); err != nil {
		return err
	}
	if s != sp.stats {
		return fmt.Errorf("stats %+v, recount %+v", sp.stats, s)
	}
	listed := 0
	for n := sp.leaves.nextLeaf; n != &sp.leaves; n = n.nextLeaf {
		if !n.IsLeaf() || n.removed || !n.listed || n.sp != sp || n.nextLeaf.prevLeaf != n {
			return fmt.Errorf("leaf list holds a node that is not a live leaf here (depth %d)", n.depth)
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
	if n.parent != nil {
		switch {
		case n.removed:
			return fmt.Errorf("removed node still linked at depth %d", n.depth)
		case len(n.blocks) == 0 || len(n.tokens) != len(n.blocks)*t.bs:
			return fmt.Errorf("edge of %d tokens with %d blocks", len(n.tokens), len(n.blocks))
		case n.depth != n.parent.depth+len(n.tokens):
			return fmt.Errorf("depth %d, parent %d + edge %d", n.depth, n.parent.depth, len(n.tokens))
		case len(n.fps) != len(n.blocks):
			return fmt.Errorf("edge of %d blocks with %d fingerprints", len(n.blocks), len(n.fps))
		case !slices.Equal(n.fps, t.chain(nil, n.parent.lastFingerprint(), n.sp.salt, n.tokens)):
			return fmt.Errorf("fingerprints at depth %d do not chain from the parent's", n.depth)
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
	childPins := 0
	for i, c := range n.children {
		if c.parent != n || c.sp != n.sp {
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
		childPins += int(c.pins)
	}
	if n.parent != nil && (n.pins < 0 || int(n.pins) < childPins) {
		return fmt.Errorf("node at depth %d has %d pins, its children %d", n.depth, n.pins, childPins)
	}
	return nil
}
