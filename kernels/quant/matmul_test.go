package quant

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

// weightTypes are the types MatMul takes as weights.
var weightTypes = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}

// randWeights returns out random rows of in values quantized as t.
func randWeights(t testing.TB, rng *rand.Rand, typ Type, out, in int) []byte {
	t.Helper()
	rs, err := typ.RowSize(in)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]byte, out*rs)
	for o := range out {
		if err := Quantize(typ, w[o*rs:(o+1)*rs], randRow(rng, in)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// goroutineFor splits [0, n) into up to four parts on their own goroutines.
func goroutineFor(n int, f func(part, lo, hi int)) {
	var wg sync.WaitGroup
	parts := min(4, n)
	for p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(p, p*n/parts, (p+1)*n/parts)
		}()
	}
	wg.Wait()
}

// checkMatMul compares MatMul with a float64 product of the dequantized
// weights and x. The bound is what quantizing the activations may cost:
// each x value moves by at most half its block's step (amax/254 for the
// 8-bit blocks), so a dot product moves by at most Σ|w|·step/2, plus
// float32 rounding.
func checkMatMul(t *testing.T, m *Multiplier, typ Type, w []byte, x []float32, rows, out, in int) {
	t.Helper()
	dst := make([]float32, rows*out)
	if err := m.MatMul(dst, x, w, typ, rows, out, in); err != nil {
		t.Fatal(err)
	}
	rs, _ := typ.RowSize(in)
	wf := make([]float32, in)
	for o := range out {
		if err := Dequantize(typ, wf, w[o*rs:(o+1)*rs]); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			xr := x[r*in : (r+1)*in]
			var want, bound, mag float64
			for i := range in {
				want += float64(wf[i]) * float64(xr[i])
				mag += math.Abs(float64(wf[i]) * float64(xr[i]))
			}
			if bs := actBlock(typ); bs > 0 {
				for b := 0; b < in; b += bs {
					_, amax := absMax(xr[b : b+bs])
					for i := b; i < b+bs; i++ {
						bound += math.Abs(float64(wf[i])) * float64(amax) / 254
					}
				}
			}
			bound = bound*1.001 + 2e-6*mag + 1e-6
			if got := float64(dst[r*out+o]); math.Abs(got-want) > bound {
				t.Fatalf("%s %d×%d·%d: dst[%d][%d] = %v, want %v ± %.3g", typ, rows, in, out, r, o, got, want, bound)
			}
		}
	}
}

func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range weightTypes {
		for _, sh := range []struct{ rows, out, in int }{{1, 1, 256}, {1, 7, 512}, {3, 33, 256}, {5, 13, 768}, {2, 70, 1024}} {
			w := randWeights(t, rng, typ, sh.out, sh.in)
			x := randRow(rng, sh.rows*sh.in)
			checkMatMul(t, NewMultiplier(nil), typ, w, x, sh.rows, sh.out, sh.in)
		}
	}
}

// TestMatMulBatchRows runs MatMul on every row count from 2 to 20, so
// the eight-, four- and two-row kernels and the single-row one each take
// the remainders, against the pure-Go dot product of each quantized row
// and the float64 product of the dequantized weights; 9 weight rows leave
// the tiles a remainder, and 5 blocks per row the Q8_0 family a single
// last block.
func TestMatMulBatchRows(t *testing.T) { forEachLevel(t, testMatMulBatchRows) }

func testMatMulBatchRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	const out = 9
	for _, typ := range weightTypes {
		in := 5 * max(actBlock(typ), 8)
		rs, _ := typ.RowSize(in)
		w := randWeights(t, rng, typ, out, in)
		for rows := 2; rows <= 20; rows++ {
			x := randRow(rng, rows*in)
			dst := make([]float32, rows*out)
			if err := NewMultiplier(nil).MatMul(dst, x, w, typ, rows, out, in); err != nil {
				t.Fatal(err)
			}
			a := testActs(typ, x, rows, in)
			for r := range rows {
				ar := a.row(r, in)
				for o := range out {
					row := w[o*rs : (o+1)*rs]
					if want := dotGo(typ, row, &ar); math.Abs(float64(dst[r*out+o]-want)) > 1e-5*absDot(typ, row, x[r*in:(r+1)*in]) {
						t.Fatalf("%s, %d rows: dst[%d][%d] = %v, Go %v", typ, rows, r, o, dst[r*out+o], want)
					}
				}
			}
			checkMatMul(t, NewMultiplier(nil), typ, w, x, rows, out, in)
		}
	}
}

// testActs returns the first rows×in values of x as weights of type t
// take them: float32, or quantized to Q8_0 (their scales block-major too)
// or Q8_K blocks.
func testActs(t Type, x []float32, rows, in int) acts {
	a := acts{blk: actBlock(t)}
	a.prepare(x, rows*in)
	if a.blk != 0 {
		a.quantizeBlocks(x, 0, len(a.d))
	}
	if a.blk == QK && rows > 0 {
		a.scalesByBlock(rows)
		a.spreadScales(rows, in)
	}
	return a
}

// raggedMatMuls runs MatMul on random weights of type typ, of rows of in
// values, and rows random activation rows, for weight-row counts that are
// not multiples of batchRows or tileRows (under one run, one run and
// more, several runs), on one goroutine and split over goroutines; check
// gets each result with the activations as MatMul quantized them.
func raggedMatMuls(t *testing.T, rng *rand.Rand, typ Type, in, rows int, check func(w []byte, x []float32, a *acts, out int, dst []float32)) {
	t.Helper()
	for _, out := range []int{1, tileRows - 1, batchRows - 1, batchRows + 5, 2*batchRows + tileRows + 3} {
		w := randWeights(t, rng, typ, out, in)
		x := randRow(rng, rows*in)
		a := testActs(typ, x, rows, in)
		for _, m := range []*Multiplier{NewMultiplier(nil), NewMultiplier(goroutineFor)} {
			dst := make([]float32, rows*out)
			if err := m.MatMul(dst, x, w, typ, rows, out, in); err != nil {
				t.Fatal(err)
			}
			check(w, x, &a, out, dst)
		}
	}
}

// TestMatMulQuadRowsRagged: the four- and eight-row kernels take up to
// batchRows weight rows per call. Over ragged weight-row counts
// (raggedMatMuls) and activation rows that leave none to seven over an
// eight and none to three over a four, every output of an eight- or
// four-row call (three left over take one more, as the last four rows)
// equals bit for bit the four-row kernel's result for its weight row
// alone, and the rows left over the Go dot product. One block per row is
// the Q8_0 family's single last block alone; three, a pair and one. With
// AVX2 only, the four-row kernels take Q8_0 and the K-quants four rows at
// a time.
func TestMatMulQuadRowsRagged(t *testing.T) { forEachLevel(t, testMatMulQuadRowsRagged) }

func testMatMulQuadRowsRagged(t *testing.T) {
	if !haveSIMD {
		t.Skip("no four-row kernels in this build or on this CPU")
	}
	rng := rand.New(rand.NewPCG(27, 28))
	for _, typ := range []Type{Q8_0, Q4_0, Q4_K, Q5_K, Q6_K} {
		if typ == Q4_0 && !have512 {
			continue // no AVX2 four-row kernel
		}
		for _, blocks := range []int{1, 3} {
			in := blocks * actBlock(typ)
			rs := rowBytes(typ, in)
			for _, rows := range []int{4, 5, 6, 7, 8, 9, 11, 12, 15, 16, 17} {
				grouped := rows &^ 3 // the rows eight- and four-row calls cover
				if rows-grouped == 3 {
					grouped = rows // the last four rows, in one more call
				}
				raggedMatMuls(t, rng, typ, in, rows, func(w []byte, x []float32, a *acts, out int, dst []float32) {
					for o := range out {
						row := w[o*rs : (o+1)*rs]
						for r := range grouped {
							var one [4]float32
							r0 := min(r&^3, rows-4)
							if !dotNSIMD(4, typ, row, a, r0, in, one[:], 1) {
								t.Fatalf("%s: no four-row kernel", typ)
							}
							if got, v := dst[r*out+o], one[r-r0]; math.Float32bits(got) != math.Float32bits(v) {
								t.Fatalf("%s %d×%d·%d: dst[%d][%d] = %v, four-row kernel on one weight row %v", typ, rows, in, out, r, o, got, v)
							}
						}
						for r := grouped; r < rows; r++ {
							ar := a.row(r, in)
							if got, want := dst[r*out+o], dotGo(typ, row, &ar); math.Abs(float64(got-want)) > 1e-5*absDot(typ, row, x[r*in:(r+1)*in]) {
								t.Fatalf("%s %d×%d·%d: dst[%d][%d] = %v, Go %v", typ, rows, in, out, r, o, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestMatMulPairRowsRagged: without the four-row kernels, activation rows
// go two at a time through the two-row kernels, each call taking up to
// batchRows weight rows. Over ragged weight-row counts (raggedMatMuls; 16
// blocks a row make the products big enough to split) and 2, 3 and 5
// activation rows, every output of a pair equals bit for bit the two-row
// kernel's result for its weight row alone, and the row left over the
// single-row kernel's; so do all rows of Q4_0, which has no two-row
// kernel, and of every type in a build without assembly.
func TestMatMulPairRowsRagged(t *testing.T) {
	saved, saved4 := have512, have4AVX2
	defer func() { have512, have4AVX2 = saved, saved4 }()
	have512, have4AVX2 = false, false
	rng := rand.New(rand.NewPCG(29, 30))
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q4_0} {
		for _, blocks := range []int{1, 3, 16} {
			in := blocks * max(actBlock(typ), 16)
			rs := rowBytes(typ, in)
			for _, rows := range []int{2, 3, 5} {
				raggedMatMuls(t, rng, typ, in, rows, func(w []byte, _ []float32, a *acts, out int, dst []float32) {
					for o := range out {
						row := w[o*rs : (o+1)*rs]
						for r := range rows {
							var one [2]float32
							if r >= rows&^1 || !dot2SIMD(typ, row, a, r&^1, in, one[:], 1) {
								ar := a.row(r, in)
								dotRows(typ, row, rs, &ar, one[r&1:r&1+1])
							}
							if got, v := dst[r*out+o], one[r&1]; math.Float32bits(got) != math.Float32bits(v) {
								t.Fatalf("%s %d×%d·%d: dst[%d][%d] = %v, kernel on one weight row %v", typ, rows, in, out, r, o, got, v)
							}
						}
					}
				})
			}
		}
	}
}

// TestMatMulFloatOddLength: float rows of a length the assembly's 8-wide
// loops do not take fall back to Go, for one row and for pairs.
func TestMatMulFloatOddLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range []Type{F32, F16, BF16} {
		for _, rows := range []int{1, 3} {
			const out, in = 5, 12
			checkMatMul(t, NewMultiplier(nil), typ, randWeights(t, rng, typ, out, in), randRow(rng, rows*in), rows, out, in)
		}
	}
}

// TestMatMulParallel runs products big enough to be split over goroutines
// (and under -race, checks the parts do not share writes).
func TestMatMulParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pool := newTestPool(3)
	defer pool.Close()
	for _, m := range []*Multiplier{NewMultiplier(goroutineFor), NewMultiplier(pool.For)} {
		for _, typ := range []Type{F16, Q8_0, Q4_K, Q6_K, Q5_1} {
			const out, in = 131, 1024 // odd row count, not a multiple of the tile
			w := randWeights(t, rng, typ, out, in)
			for _, rows := range []int{1, 3} {
				checkMatMul(t, m, typ, w, randRow(rng, rows*in), rows, out, in)
			}
		}
	}
}

// TestMatMulZeroBlocks: all-zero activation blocks (d = 0) and weights
// give exact zeros, with no division by zero.
func TestMatMulZeroBlocks(t *testing.T) {
	for _, typ := range weightTypes {
		rs, _ := typ.RowSize(512)
		w := make([]byte, 2*rs)
		rng := rand.New(rand.NewPCG(7, 8))
		if err := Quantize(typ, w[rs:], randRow(rng, 512)); err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 512)
		copy(x[256:], randRow(rng, 256))
		checkMatMul(t, NewMultiplier(nil), typ, w, x, 1, 2, 512)
	}
}

// TestMatMulEmptyRows: rows of no values give zero sums, for one row and
// for the batched paths, on every weight type.
func TestMatMulEmptyRows(t *testing.T) {
	for _, typ := range weightTypes {
		for _, rows := range []int{1, 2, 4, 7} {
			dst := make([]float32, rows*3)
			for i := range dst {
				dst[i] = 1
			}
			if err := NewMultiplier(nil).MatMul(dst, nil, nil, typ, rows, 3, 0); err != nil {
				t.Fatalf("%s, %d rows: %v", typ, rows, err)
			}
			for i, v := range dst {
				if v != 0 {
					t.Fatalf("%s, %d rows: dst[%d] = %v, want 0", typ, rows, i, v)
				}
			}
		}
	}
}

func TestMatMulErrors(t *testing.T) {
	m := NewMultiplier(nil)
	dst, x := make([]float32, 4), make([]float32, 512)
	for name, err := range map[string]error{
		"partial block":  m.MatMul(dst, x, make([]byte, 34), Q8_0, 1, 1, 31),
		"short weights":  m.MatMul(dst, x, make([]byte, 143), Q4_K, 1, 1, 256),
		"short x":        m.MatMul(dst, x[:100], make([]byte, 144), Q4_K, 1, 1, 256),
		"short dst":      m.MatMul(dst[:1], x, make([]byte, 288), Q4_K, 1, 2, 256),
		"Q8_K weights":   m.MatMul(dst, x, make([]byte, 292), Q8_K, 1, 1, 256),
		"unknown type":   m.MatMul(dst, x, make([]byte, 292), Type(99), 1, 1, 256),
		"negative shape": m.MatMul(dst, x, nil, Q8_0, -1, 0, 32),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestMatMulAllocs: a warmed-up Multiplier allocates nothing per call,
// also when calls alternate between weight types, as in a Q4_K_M model.
func TestMatMulAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m := NewMultiplier(nil)
	const out, in = 64, 512
	types := []Type{F16, Q8_0, Q4_K, Q6_K, Q5_0}
	ws := make([][]byte, len(types))
	for i, typ := range types {
		ws[i] = randWeights(t, rng, typ, out, in)
	}
	// 2 rows, 6 (four at a time, then two) and 10 (eight, then two).
	const rows = 10
	x, dst := randRow(rng, rows*in), make([]float32, rows*out)
	all := func() {
		for i, typ := range types {
			for r := 2; r <= rows; r += 4 {
				if err := m.MatMul(dst, x, ws[i], typ, r, out, in); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	all()
	if n := testing.AllocsPerRun(10, all); n != 0 {
		t.Errorf("%v allocations per round of MatMuls", n)
	}
}

// TestMatMuls: several products from the same x in one call give what
// each gives alone, across all three activation families, in parallel
// too, and a bad product fails the whole call before anything is written.
func TestMatMuls(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const rows, in = 3, 512
	types := []Type{Q4_K, F16, Q6_K, Q4_K, Q5_0, Q8_0, BF16}
	outs := []int{37, 8, 5, 0, 70, 1, 9} // an empty matrix among them
	x := randRow(rng, rows*in)
	pool := newTestPool(2)
	defer pool.Close()
	var ps []Product
	var want [][]float32
	single := NewMultiplier(nil)
	for i, typ := range types {
		w := randWeights(t, rng, typ, outs[i], in)
		ps = append(ps, Product{Dst: make([]float32, rows*outs[i]), W: w, Type: typ, Out: outs[i]})
		want = append(want, make([]float32, rows*outs[i]))
		if err := single.MatMul(want[i], x, w, typ, rows, outs[i], in); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*Multiplier{NewMultiplier(nil), NewMultiplier(pool.For)} {
		if err := m.MatMuls(x, rows, in, ps...); err != nil {
			t.Fatal(err)
		}
		for i := range ps {
			if !reflect.DeepEqual(ps[i].Dst, want[i]) {
				t.Fatalf("%s product %d differs from its MatMul", ps[i].Type, i)
			}
		}
	}
	bad := append([]Product{}, ps...)
	bad[2].Dst = make([]float32, rows*outs[2])
	bad[4].W = bad[4].W[:len(bad[4].W)-1]
	if err := NewMultiplier(nil).MatMuls(x, rows, in, bad...); err == nil {
		t.Fatal("no error for a short weight matrix")
	}
	for _, v := range bad[2].Dst {
		if v != 0 {
			t.Fatal("MatMuls wrote results before failing")
		}
	}
	m := NewMultiplier(nil)
	call := func() {
		if err := m.MatMuls(x, rows, in, ps[0], ps[1], ps[2]); err != nil {
			t.Fatal(err)
		}
	}
	call()
	if n := testing.AllocsPerRun(10, call); n != 0 {
		t.Errorf("%v allocations per MatMuls", n)
	}
}
