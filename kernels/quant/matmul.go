package quant

import "fmt"

// ParallelFor runs f over disjoint ranges [lo, hi) that cover [0, n),
// numbered part 0, 1, ..., possibly on several goroutines, and returns
// when all are done. The For method of a kernels/cpu Workers pool is one,
// passed as it is (no adapter closure, so nothing allocates per call). f
// must not be kept after it returns.
type ParallelFor func(n int, f func(part, lo, hi int))

// Multiplier multiplies activation rows by weight matrices kept in their
// file type. It holds the activations quantized for the running call, so
// calls allocate nothing once its buffers have grown to the largest batch.
// A Multiplier is not safe for concurrent use; give each model runner one.
type Multiplier struct {
	par ParallelFor

	a    acts
	call mmCall
	// runRows and quantRows are method values made once, so handing them
	// to par does not allocate on every call.
	runRows, quantRows func(part, lo, hi int)
}

// mmCall is the running MatMul's arguments.
type mmCall struct {
	dst, x        []float32
	w             []byte
	t             Type
	rows, out, in int
	rowBytes      int
}

// NewMultiplier returns a Multiplier that splits each product over par; a
// nil par runs everything on the calling goroutine.
func NewMultiplier(par ParallelFor) *Multiplier {
	if par == nil {
		par = func(n int, f func(part, lo, hi int)) { f(0, 0, n) }
	}
	m := &Multiplier{par: par}
	m.runRows, m.quantRows = m.matmulRange, m.quantizeRange
	return m
}

// minParallelBytes is the least work, in weight bytes times activation
// rows, worth splitting over the workers: handing a part to another
// goroutine costs about a microsecond, the time to stream some 20 KB.
const minParallelBytes = 64 << 10

// tileRows is how many weight rows are multiplied by every activation row
// before moving on, so a batch reads each weight row from memory once and
// each activation row from cache.
const tileRows = 4

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
	if t == Q8_K || !t.Valid() {
		return fmt.Errorf("quant: MatMul on %s weights is not supported", t)
	}
	rowBytes, err := t.RowSize(in)
	if err != nil {
		return err
	}
	if rows < 0 || out < 0 {
		return fmt.Errorf("quant: MatMul with %d rows and %d outputs", rows, out)
	}
	if len(w) != out*rowBytes || len(x) < rows*in || len(dst) < rows*out {
		return fmt.Errorf("quant: MatMul %d×%d·(%d×%d %s)ᵀ with len(dst)=%d len(x)=%d len(w)=%d (want %d)",
			rows, in, out, in, t, len(dst), len(x), len(w), out*rowBytes)
	}
	if rows == 0 || out == 0 {
		return nil
	}
	m.call = mmCall{dst: dst, x: x, w: w, t: t, rows: rows, out: out, in: in, rowBytes: rowBytes}
	m.a.prepare(t, x, rows*in)
	big := len(w)*rows >= minParallelBytes
	if m.a.blk != 0 {
		if blocks := rows * in / m.a.blk; big && rows > 1 {
			m.par(blocks, m.quantRows)
		} else {
			m.quantizeRange(0, 0, blocks)
		}
	}
	if tiles := (out + tileRows - 1) / tileRows; big {
		m.par(tiles, m.runRows)
	} else {
		m.matmulRange(0, 0, tiles)
	}
	m.call = mmCall{} // do not keep the caller's slices alive
	m.a.x = nil
	return nil
}

func (m *Multiplier) quantizeRange(_, lo, hi int) { m.a.quantizeBlocks(m.call.x, lo, hi) }

// matmulRange computes the output tiles [lo, hi): tileRows weight rows
// against every activation row, two activation rows per call where a
// kernel shares the weights' unpacking between them.
func (m *Multiplier) matmulRange(_, lo, hi int) {
	c := &m.call
	for o0 := lo * tileRows; o0 < min(hi*tileRows, c.out); o0 += tileRows {
		o1 := min(o0+tileRows, c.out)
		r := 0
		for ; r+2 <= c.rows; r += 2 {
			a0, a1 := m.a.row(r, c.in), m.a.row(r+1, c.in)
			for o := o0; o < o1; o++ {
				w := c.w[o*c.rowBytes : (o+1)*c.rowBytes]
				v0, v1, ok := dot2SIMD(c.t, w, &a0, &a1)
				if !ok {
					v0, v1 = dotRow(c.t, w, &a0), dotRow(c.t, w, &a1)
				}
				c.dst[r*c.out+o], c.dst[(r+1)*c.out+o] = v0, v1
			}
		}
		if r < c.rows {
			ar := m.a.row(r, c.in)
			for o := o0; o < o1; o++ {
				c.dst[r*c.out+o] = dotRow(c.t, c.w[o*c.rowBytes:(o+1)*c.rowBytes], &ar)
			}
		}
	}
}
