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
		want := []int32{5, 6, 0 /* RowPos */, 0, 0, 2 /* RowBT */, 0, 2, 2, 1 /* Tiles */, 7, 3, 2 /* BT */}
		if got := b.Packed(); !slices.Equal(got, want) {
			t.Fatalf("packed %v, want %v", got, want)
		}
		st := b.Step(1000)
		// Positions 5, 6 and 0 read 6 + 7 + 1 positions of K/V.
		if st != (Step{Rows: 3, RowPos: 1000, RowBT: 1012, Tiles: 1024, NTiles: 2, BT: 1040, MaxPos: 6, KVWork: 14}) {
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

// TestStepTiles checks that a long sequence is cut into query tiles of
// PrefillTile rows, the last one short, after the rows of the sequences
// before it.
func TestStepTiles(t *testing.T) {
	var b StepBuilder
	table := make([]blockstore.BlockID, 20)
	for _, add := range [][2]int{{10, 1}, {3, 2*PrefillTile + 5}, {0, PrefillTile}} {
		if err := b.Add(table, 16, add[0], add[1]); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Step(0)
	p := b.Packed()
	got := p[st.Tiles/4:][:2*st.NTiles]
	want := []int32{0, 1, 1, PrefillTile, 1 + PrefillTile, PrefillTile, 1 + 2*PrefillTile, 5, 6 + 2*PrefillTile, PrefillTile}
	if !slices.Equal(got, want) {
		t.Errorf("tiles %v, want %v", got, want)
	}
	if rows := 1 + 2*PrefillTile + 5 + PrefillTile; int(st.Tiles) != 4*2*rows {
		t.Errorf("tiles at %d, want after the %d rows' positions and block-table offsets", st.Tiles, rows)
	}
}
