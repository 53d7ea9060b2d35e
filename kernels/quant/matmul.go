package quant

import "fmt"

// ParallelFor runs f over disjoint ranges [lo, hi) that cover [0, n),
// possibly on several goroutines, and returns when all are done. part
// numbers the goroutine running a range (0, 1, ...): no two run under one
// number at once, but one may run several ranges. The For method of a
// kernels/cpu Workers pool is one, passed as it is (no adapter closure,
// so nothing allocates per call). f must not be kept after it returns.
type ParallelFor func(n int, f func(part, lo, hi int))

// Multiplier multiplies activation rows by weight matrices kept in their
// file type. It holds the activations quantized for the running call, so
// calls allocate nothing once its buffers have grown to the largest batch.
// A Multiplier is not safe for concurrent use; give each model runner one.
type Multiplier struct {
	par ParallelFor

	// The activations as each family of weight types takes them: float32
	// rows, Q8_0 blocks (Q4_0 ... Q8_0), Q8_K blocks (the K-quants).
	fa, q8, q8k acts
	quant       *acts // the family quantizeRange works on

	x        []float32
	rows, in int
	prods    []product // the running call's products
	tiles    int       // output tiles over all of prods
	// runTiles and quantRows are method values made once, so handing them
	// to par does not allocate on every call.
	runTiles, quantRows func(part, lo, hi int)
}

// Product is one weight matrix of a MatMuls call and where its result
// goes.
type Product struct {
	Dst  []float32 // rows×Out results, row-major
	W    []byte    // Out rows of in values of Type, each Type.RowSize(in) bytes
	Type Type
	Out  int
	// Packed is W as PackQ8_0 returned it (Q8_0 only), or nil: where the
	// CPU runs the packed kernels they take its rows, else W's.
	Packed []byte
}

// product is a Product being computed.
type product struct {
	Product
	rowBytes  int
	a         *acts
	firstTile int // its first tile in the call's numbering
}

// NewMultiplier returns a Multiplier that splits each product over par; a
// nil par runs everything on the calling goroutine.
func NewMultiplier(par ParallelFor) *Multiplier {
	if par == nil {
		par = func(n int, f func(part, lo, hi int)) { f(0, 0, n) }
	}
	m := &Multiplier{par: par, q8: acts{blk: QK}, q8k: acts{blk: QKK}}
	m.runTiles, m.quantRows = m.tileRange, m.quantizeRange
	return m
}

// minParallelBytes is the least work, in weight bytes times activation
// rows, worth splitting over the workers: handing a part to another
// goroutine costs about a microsecond, the time to stream some 20 KB.
const minParallelBytes = 64 << 10

// tileRows is the unit in which the output rows are split over the
// workers.
const tileRows = 4

// batchRows is how many weight rows a batch multiplies by every
// activation row before moving on, so it reads each weight row from
// memory once and from cache for the other activation rows. A four-row
// kernel reads four bytes of activations per weight value of half a byte
// to a byte, so the more weight rows each call takes, the longer its
// activations stay in L1; the weights, 74 KB for 32 rows of 4096 Q4_K
// values, stay in L2. Measured on a 2-core Zen 4, one thread's CPU time
// per product of 16 rows by 4096×4096 weights: at 4, 16, 32 and 64 rows
// Q4_K 2.8, 2.26, 2.15, 2.09 ms; Q6_K 3.2, 2.3, 2.17, 2.09; Q8_0 3.7,
// 3.1, 2.97, 2.97. The 110M model's projections (dim 768) take the same
// time at all four.
const batchRows = 32

// MatMul sets dst[r*out+o] = Σ_i x[r*in+i]·W[o][i] for r < rows, o < out,
// where w holds W, out rows of in values of type t, each row
// t.RowSize(in) bytes (GGUF's layout, out×in). For the quantized types it
// first quantizes each row of x to 8 bits per block (Q8_0 blocks of 32 for
// Q4_0 ... Q8_0, Q8_K blocks of 256 for the K-quants) and takes integer
// dot products, as llama.cpp does; F16 and BF16 weights are converted on
// the fly against float32 x. The output rows are split over the workers.
// It returns an error when t is not a weight type or a length does not
// match the shape.
func (m *Multiplier) MatMul(dst, x []float32, w []byte, t Type, rows, out, in int) error {
	return m.MatMuls(x, rows, in, Product{Dst: dst, W: w, Type: t, Out: out})
}

// MatMuls computes each product as MatMul would, all from the same rows of
// x: a layer's Q, K and V projections, or its gate and up projections. x
// is quantized once per family of weight types, not once per matrix, and
// the output rows of all the products are split over the workers in one
// parallel loop, so no worker waits at the end of each matrix. It keeps
// nothing of ps; on an error it computes nothing.
func (m *Multiplier) MatMuls(x []float32, rows, in int, ps ...Product) error {
	if rows < 0 || len(x) < rows*in {
		return fmt.Errorf("quant: MatMul of %d rows of %d values with len(x)=%d", rows, in, len(x))
	}
	m.prods = m.prods[:0]
	m.tiles = 0
	work := 0
	for _, p := range ps {
		rowBytes, err := checkProduct(&p, rows, in)
		if err != nil {
			m.prods = m.prods[:0]
			return err
		}
		m.prods = append(m.prods, product{Product: p, rowBytes: rowBytes, a: m.family(p.Type), firstTile: m.tiles})
		m.tiles += (p.Out + tileRows - 1) / tileRows
		work += len(p.W) * rows
	}
	if in == 0 { // sums of nothing, which the kernels do not take
		for _, p := range m.prods {
			clear(p.Dst[:rows*p.Out])
		}
	}
	if rows == 0 || m.tiles == 0 || in == 0 {
		clear(m.prods)
		m.prods = m.prods[:0]
		return nil
	}
	m.x, m.rows, m.in = x, rows, in
	big := work >= minParallelBytes
	for _, a := range []*acts{&m.fa, &m.q8, &m.q8k} {
		if !m.uses(a) {
			continue
		}
		n := rows
		if m.padsTriple(a) {
			n = 4
		}
		a.prepare(x, n*in)
		if a.blk == 0 {
			continue
		}
		m.quant = a
		if blocks := rows * in / a.blk; big && rows > 1 {
			m.par(blocks, m.quantRows)
		} else {
			m.quantizeRange(0, 0, blocks)
		}
		if a == &m.q8 && m.packs() {
			a.packActs(rows, in)
		}
		if a == &m.q8 && rows >= 4 {
			switch {
			case have512:
				a.spreadScales(rows, in)
			case q8ScalesByBlock():
				a.scalesByBlock(rows)
			}
		}
	}
	if big {
		m.par(m.tiles, m.runTiles)
	} else {
		m.tileRange(0, 0, m.tiles)
	}
	// Keep none of the caller's slices alive.
	clear(m.prods)
	m.prods, m.x, m.quant, m.fa.x = m.prods[:0], nil, nil, nil
	return nil
}

// checkProduct validates p against rows×in activations and returns the
// bytes of one of its weight rows.
func checkProduct(p *Product, rows, in int) (int, error) {
	if p.Type == Q8_K || !p.Type.Valid() {
		return 0, fmt.Errorf("quant: MatMul on %s weights is not supported", p.Type)
	}
	rowBytes, err := p.Type.RowSize(in)
	if err != nil {
		return 0, err
	}
	if p.Out < 0 || len(p.W) != p.Out*rowBytes || len(p.Dst) < rows*p.Out {
		return 0, fmt.Errorf("quant: MatMul %d×%d·(%d×%d %s)ᵀ with len(dst)=%d len(w)=%d (want %d)",
			rows, in, p.Out, in, p.Type, len(p.Dst), len(p.W), p.Out*rowBytes)
	}
	if p.Packed != nil && (p.Type != Q8_0 || len(p.Packed) != packedLen(p.Out, in)) {
		return 0, fmt.Errorf("quant: MatMul on %d packed bytes of a %d×%d %s matrix (want %d of Q8_0)",
			len(p.Packed), p.Out, in, p.Type, packedLen(p.Out, in))
	}
	return rowBytes, nil
}

// family returns the activations weights of type t take.
func (m *Multiplier) family(t Type) *acts {
	switch actBlock(t) {
	case 0:
		return &m.fa
	case QK:
		return &m.q8
	}
	return &m.q8k
}

// packs reports whether a product of the running call runs packed.
func (m *Multiplier) packs() bool {
	if !havePacked() {
		return false
	}
	for i := range m.prods {
		if m.prods[i].Packed != nil {
			return true
		}
	}
	return false
}

// uses reports whether a product of the running call takes a.
func (m *Multiplier) uses(a *acts) bool {
	for i := range m.prods {
		if m.prods[i].a == a {
			return true
		}
	}
	return false
}

func (m *Multiplier) quantizeRange(_, lo, hi int) { m.quant.quantizeBlocks(m.x, lo, hi) }

// tileRange computes the call's output tiles [lo, hi), numbered across
// its products in order.
func (m *Multiplier) tileRange(_, lo, hi int) {
	i := 0
	for t := lo; t < hi; {
		for m.prods[i].firstTile+(m.prods[i].Out+tileRows-1)/tileRows <= t {
			i++
		}
		p := &m.prods[i]
		end := min(hi, p.firstTile+(p.Out+tileRows-1)/tileRows)
		m.productRange(p, t-p.firstTile, end-p.firstTile)
		t = end
	}
}

// productRange computes tiles [lo, hi) of one product: up to batchRows
// weight rows at a time against every activation row, eight, four or
// two activation rows per call where a kernel shares the weights'
// unpacking between them, each call taking all the weight rows.
func (m *Multiplier) productRange(p *product, lo, hi int) {
	o0, o1 := lo*tileRows, min(hi*tileRows, p.Out)
	if p.Packed != nil && havePacked() {
		m.packedRange(p, o0, o1)
		return
	}
	m.rowMajorRange(p, o0, o1)
}

// rowMajorRange computes weight rows [start, end) of p from W.
func (m *Multiplier) rowMajorRange(p *product, start, end int) {
	in, out := m.in, p.Out
	if m.rows == 1 { // decode: one kernel call streams the whole range
		ar := p.a.row(0, in)
		dotRows(p.Type, p.W[start*p.rowBytes:end*p.rowBytes], p.rowBytes, &ar, p.Dst[start:end])
		return
	}
	for o0 := start; o0 < end; o0 += batchRows {
		o1 := min(o0+batchRows, end)
		w := p.W[o0*p.rowBytes : o1*p.rowBytes]
		r := m.groupRows(p, o0, o1)
		for ; r+2 <= m.rows; r += 2 {
			if !dot2SIMD(p.Type, w, p.a, r, in, p.Dst[r*out+o0:], out) {
				break
			}
		}
		for ; r < m.rows; r++ { // one left over, or rows without a two-row kernel
			ar := p.a.row(r, in)
			dotRows(p.Type, w, p.rowBytes, &ar, p.Dst[r*out+o0:r*out+o1])
		}
	}
}

// groupRows computes weight rows [o0, o1) of p against the activation
// rows eight at a time while a kernel takes eight, then four at a time
// while one takes four, one call for all the weight rows and each group,
// and returns how many activation rows it did: a multiple of 4, 0
// without such a kernel, or all of them where three are left over, which
// one more call takes as the last four (the first of them computed
// again, to the same bits) in less time than a pair and a single row
// (one thread, the 110M model's step: 7 rows 0.65 -> 0.53 ms for Q4_K,
// 0.78 -> 0.68 for Q8_0; with two left over it about evens out).
// Three K-quant rows alone (a short verify row, three sequences
// decoding) go through one four-row call as well (padsTriple), its
// results for the padding row dropped: one pass over the weights instead
// of two, with the rows' bits unchanged.
func (m *Multiplier) groupRows(p *product, o0, o1 int) int {
	in, out := m.in, p.Out
	w := p.W[o0*p.rowBytes : o1*p.rowBytes]
	r := 0
	for ; r+8 <= m.rows; r += 8 {
		if !dotNSIMD(8, p.Type, w, p.a, r, in, p.Dst[r*out+o0:], out) {
			break
		}
	}
	for ; r+4 <= m.rows; r += 4 {
		if !dotNSIMD(4, p.Type, w, p.a, r, in, p.Dst[r*out+o0:], out) {
			return r
		}
	}
	if r > 0 && m.rows-r == 3 {
		dotNSIMD(4, p.Type, w, p.a, m.rows-4, in, p.Dst[(m.rows-4)*out+o0:], out)
		return m.rows
	}
	if m.padsTriple(p.a) {
		var quad [4 * batchRows]float32
		n := o1 - o0
		if dotNSIMD(4, p.Type, w, p.a, 0, in, quad[:], n) {
			for i := range m.rows {
				copy(p.Dst[i*out+o0:i*out+o1], quad[i*n:(i+1)*n])
			}
			return m.rows
		}
	}
	return r
}

// padsTriple reports whether the running call sizes the activations a
// for four rows where it has three K-quant rows, so that groupRows takes
// them in one four-row call. Measured on one Zen 4 (BenchmarkMatMulBatch,
// 4096×4096, rows/s of 3 rows, one call against a pair and a row or three
// rows): AVX2 Q4_K 3304/2571, 1589/2202, 2379/2737 (even), AVX-512 Q4_K
// 4145/3791, 4148/3553, 4856/2993 and Q6_K 3184/2963, 3757/2991,
// 4419/3087. Padding two rows to four was slower on AVX-512 (Q4_K
// 2902/3327, 2735/3166, 3190/3216; Q6_K 1799/2715, 2485/3039, 2733/2945
// against a row at a time) and on AVX2 (against the pair kernels).
func (m *Multiplier) padsTriple(a *acts) bool {
	return a == &m.q8k && m.rows == 3 && QuadRows(Q4_K)
}

// QuadRows reports whether MatMul takes batches of weights of type t four
// or more activation rows at a time on this CPU and build, each weight
// block unpacked once for them (with AVX-512: Q8_0, Q4_0 and the
// K-quants; with AVX2 only: Q8_0 and the K-quants), rather than one or
// two: whether its integer products can stand against a float32 GEMM on
// prompts.
func QuadRows(t Type) bool {
	switch t {
	case Q8_0, Q4_K, Q5_K, Q6_K:
		return have512 || have4AVX2
	case Q4_0:
		return have512
	}
	return false
}
