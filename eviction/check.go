package eviction

import (
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/radix"
)

// Checker is a Tier with an invariant checker of its own, which
// Manager.Check runs.
type Checker interface {
	Check() error
}

// Check verifies the Manager's invariants on top of the tree's (which
// include every block's fingerprint), the pool's and each lower tier's
// that is a Checker: every block the tree holds carries the pool's cache
// reference and no other block does, and the operator-pin accounting
// matches the pins. It is O(tree + pool + tiers); tests call it after
// every step.
func (m *Manager) Check() error {
	if err := m.tree.Check(); err != nil {
		return fmt.Errorf("tree: %w", err)
	}
	if err := m.pool.Check(); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	for _, t := range m.tiers {
		if c, ok := t.(Checker); ok {
			if err := c.Check(); err != nil {
				return fmt.Errorf("%s tier: %w", t.Medium(), err)
			}
		}
	}
	inTree := make(map[blockstore.BlockID]bool)
	var err error
	m.tree.Walk(func(n *radix.Node) bool {
		for _, id := range n.Blocks() {
			if inTree[id] {
				err = fmt.Errorf("block %d is in the tree twice", id)
				return false
			}
			inTree[id] = true
			if !m.pool.Cached(id) {
				err = fmt.Errorf("tree block %d has no cache reference", id)
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for i := range m.pool.NumBlocks() {
		if id := blockstore.BlockID(i); m.pool.Cached(id) && !inTree[id] {
			return fmt.Errorf("block %d has a cache reference but is not in the tree", id)
		}
	}
	pinned := map[blockstore.BlockID]int{}
	for _, p := range m.pins {
		if p.h.Node().Removed() {
			return fmt.Errorf("an operator-pinned node was removed")
		}
		for _, id := range p.blocks {
			if !inTree[id] {
				return fmt.Errorf("operator-pinned block %d left the tree", id)
			}
			pinned[id]++
		}
	}
	if len(pinned) != len(m.pinned) {
		return fmt.Errorf("%d blocks operator-pinned, recorded %d", len(pinned), len(m.pinned))
	}
	for id, c := range pinned {
		if m.pinned[id] != c {
			return fmt.Errorf("block %d pinned %d times by operators, recorded %d", id, c, m.pinned[id])
		}
	}
	return nil
}

// CheckPins verifies that every node's pin count is the number of the given
// handles (the caller's: a running sequence's Admit or Extend handle each)
// and operator pins whose path runs through it, so that no handle leaked
// and none was released twice. It is O(tree + handles x depth).
func (m *Manager) CheckPins(handles []radix.Handle) error {
	want := map[*radix.Node]int{}
	count := func(h radix.Handle) {
		for n := h.Node(); n != nil && !n.IsRoot(); n = n.Parent() {
			want[n]++
		}
	}
	for _, h := range handles {
		if n := h.Node(); n != nil && n.Removed() {
			return fmt.Errorf("a handle pins a removed node")
		}
		count(h)
	}
	for _, p := range m.pins {
		count(p.h)
	}
	var err error
	m.tree.Walk(func(n *radix.Node) bool {
		if n.Pins() != want[n] {
			err = fmt.Errorf("a node of %d tokens at depth %d has %d pins; handles account for %d",
				len(n.Tokens()), n.Depth(), n.Pins(), want[n])
			return false
		}
		delete(want, n)
		return true
	})
	if err == nil && len(want) > 0 {
		err = fmt.Errorf("%d pinned nodes are not in the tree", len(want))
	}
	return err
}
