package launch

import (
	"slices"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
)

func TestStepBuilder(t *testing.T) {
	var b StepBuilder
	for range 2 { // the second round checks Reset
		b.Reset()
		if err := b.Add([]blockstore.BlockID{7, 3, 9}, 4, 5, 2); err != nil { // positions 5, 6: blocks 7, 3
			t.Fatal(err)
		}
		if err := b.Add([]blockstore.BlockID{2}, 4, 0, 1); err != nil {
			t.Fatal(err)
		}
		want := []int32{5, 6, 0 /* RowPos */, 0, 0, 2 /* RowBT */, 7, 3, 2 /* BT */}
		if got := b.Packed(); !slices.Equal(got, want) {
			t.Fatalf("packed %v, want %v", got, want)
		}
		st := b.Step(1000)
		// Positions 5, 6 and 0 read 6 + 7 + 1 positions of K/V.
		if st != (Step{Rows: 3, RowPos: 1000, RowBT: 1012, BT: 1024, MaxPos: 6, KVWork: 14}) {
			t.Errorf("step %+v", st)
		}
	}
	for name, err := range map[string]error{
		"table too short": b.Add([]blockstore.BlockID{1}, 4, 3, 2),
		"no rows":         b.Add([]blockstore.BlockID{1}, 4, 0, 0),
		"negative start":  b.Add([]blockstore.BlockID{1}, 4, -1, 1),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if b.Rows() != 3 {
		t.Errorf("refused adds changed the rows: %d", b.Rows())
	}
}
