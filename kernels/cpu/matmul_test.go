package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

var matMulShapes = []struct {
	name    string
	m, n, k int
}{
	{"scalar", 1, 1, 1},
	{"k=1", 5, 9, 1},
	{"matrix-vector", 1, 37, 70},
	{"matrix-vector long", 1, 12, 1031},
	{"below one tile", 2, 3, 8},
	{"one 3x4 tile", 3, 4, 16},
	{"odd everything", 7, 9, 31},
	{"tails in m, n, k", 4, 33, 17},
	{"square", 9, 64, 64},
	{"k not a multiple of 8", 64, 40, 130},
	{"m not a multiple of 3", 65, 20, 24},
	{"parallel with a column tail", 17, 67, 70},
	{"parallel matrix-vector", 1, 301, 300},
}

func TestMatMulMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, workers := range []int{1, 2, 3} {
		w := NewWorkers(workers)
		for _, s := range matMulShapes {
			a, b := randVec(r, s.m*s.k), randVec(r, s.n*s.k)
			want := naiveMatMul(a, b, s.m, s.n, s.k)
			t.Run(fmt.Sprintf("%s/%d workers", s.name, workers), func(t *testing.T) {
				eachKernel(t, func(t testing.TB) {
					got := randVec(r, s.m*s.n) // MatMul must overwrite, not accumulate
					MatMul(w, got, a, b, s.m, s.n, s.k)
					checkClose(t, "c", got, want, matMulTol(s.k))
				})
			})
		}
		w.Close()
	}
}

func TestMatMulPanicsOnShortSlices(t *testing.T) {
	w := NewWorkers(1)
	defer w.Close()
	for _, tc := range []struct {
		name       string
		lc, la, lb int
	}{
		{"short c", 5, 6, 6},
		{"short a", 6, 5, 6},
		{"short b", 6, 6, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			MatMul(w, make([]float32, tc.lc), make([]float32, tc.la), make([]float32, tc.lb), 2, 3, 3)
		})
	}
}

func TestMatMulAllocatesNothing(t *testing.T) {
	w := NewWorkers(2)
	defer w.Close()
	const m, n, k = 5, 64, 48
	a, b, c := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	if allocs := testing.AllocsPerRun(50, func() { MatMul(w, c, a, b, m, n, k) }); allocs != 0 {
		t.Fatalf("MatMul allocates %.1f times per call", allocs)
	}
}

func TestDotAndAccumMatchNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	eachKernel(t, func(t testing.TB) {
		for n := range 140 {
			a, b := randVec(r, n), randVec(r, n+3)
			var want float64
			for i := range n {
				want += float64(a[i]) * float64(b[i])
			}
			checkClose(t, "Dot", []float32{Dot(a, b)}, []float32{float32(want)}, matMulTol(n))

			// accum: n columns, 5 rows of V with a stride wider than n.
			const rows = 5
			stride := n + 2
			acc, wts, v := randVec(r, n), randVec(r, rows), randVec(r, rows*stride)
			wantAcc := make([]float32, n)
			for d := range n {
				s := float64(acc[d])
				for j := range rows {
					s += float64(wts[j]) * float64(v[j*stride+d])
				}
				wantAcc[d] = float32(s)
			}
			accum(acc, wts, v, stride)
			checkClose(t, "accum", acc, wantAcc, 1e-5)
		}
	})
}

func TestExpf(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    float32
		want float32
	}{
		{"zero", 0, 1},
		{"one", 1, float32(math.E)},
		{"minus infinity", float32(math.Inf(-1)), 0},
		{"plus infinity", float32(math.Inf(1)), float32(math.Inf(1))},
		{"overflow", 100, float32(math.Inf(1))},
		{"underflow", -200, 0},
	} {
		if got := expf(tc.x); got != tc.want {
			t.Errorf("%s: expf(%v) = %v, want %v", tc.name, tc.x, got, tc.want)
		}
	}
	if got := expf(float32(math.NaN())); got == got {
		t.Errorf("expf(NaN) = %v, want NaN", got)
	}
	// Relative error wherever the result is a normal float32, including
	// the cold paths beyond ±87 and every reduction boundary on the way.
	// (Below about -87.3 the result is subnormal and carries fewer bits.)
	worst := 0.0
	for x := float32(-87.3); x <= 88.7; x += 0.0123 {
		want := math.Exp(float64(x))
		if rel := math.Abs(float64(expf(x))-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Fatalf("expf relative error up to %g, want <= 3e-7", worst)
	}
}

// FuzzMatMul checks random shapes against the naive product with both
// kernel sets.
func FuzzMatMul(f *testing.F) {
	for i, s := range matMulShapes {
		f.Add(uint64(i), uint8(s.m), uint8(s.n), uint16(s.k))
	}
	w := NewWorkers(2)
	f.Cleanup(w.Close)
	f.Fuzz(func(t *testing.T, seed uint64, m, n uint8, k uint16) {
		mm, nn, kk := 1+int(m)%70, 1+int(n)%70, 1+int(k)%600
		r := rand.New(rand.NewPCG(seed, 1))
		a, b := randVec(r, mm*kk), randVec(r, nn*kk)
		want := naiveMatMul(a, b, mm, nn, kk)
		eachKernel(t, func(t testing.TB) {
			got := make([]float32, mm*nn)
			MatMul(w, got, a, b, mm, nn, kk)
			checkClose(t, "c", got, want, matMulTol(kk))
		})
	})
}

func TestExpSubMatchesExp(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	eachKernel(t, func(t testing.TB) {
		for n := range 40 {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(-r.Float64() * 30)
			}
			if n > 2 {
				s[1] = -95 // far below the max: weight ~0
			}
			const m = 2.5
			want := make([]float32, n)
			var wantSum float64
			for i, x := range s {
				e := math.Exp(float64(x - m)) // the float32 difference is the input

				want[i] = float32(e)
				wantSum += e
			}
			if n > 9 {
				s[9] = float32(math.NaN()) // must come out NaN, not a weight
				want[9] = s[9]
				wantSum = math.NaN()
			}
			sum := expSub(s, m)
			for i := range s {
				if math.IsNaN(float64(want[i])) {
					if !math.IsNaN(float64(s[i])) {
						t.Fatalf("n=%d: weight %d of a NaN score = %v", n, i, s[i])
					}
					continue
				}
				if d := math.Abs(float64(s[i]) - float64(want[i])); d > 3e-7*float64(want[i])+1e-37 {
					t.Fatalf("n=%d: weight %d = %v, want %v", n, i, s[i], want[i])
				}
			}
			if math.IsNaN(wantSum) != math.IsNaN(float64(sum)) || math.Abs(float64(sum)-wantSum) > 1e-6*wantSum+1e-37 {
				t.Fatalf("n=%d: sum %v, want %v", n, sum, wantSum)
			}
		}
	})
}
