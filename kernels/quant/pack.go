package quant

import (
	"encoding/binary"
	"math"
	"slices"
)

// Packed Q8_0 weights: where the CPU has AVX-512 VNNI, PackQ8_0 lays a
// Q8_0 matrix out in groups of packRows weight rows, so that one zmm lane
// holds one weight row's sums and a block costs 12 instructions for 16
// weight rows and one activation row, against about 50 in the row-major
// kernels (which sum a block in eight lanes and reduce them at the end).
// Per group and block: the 16 rows' scales as float32s, then the quants,
// +128 as unsigned bytes, four bytes of each row at a time (bytes 4k..4k+3
// of rows 0..15, then 4k+4.., k < 8).
const (
	packRows       = 16
	packBlockBytes = packRows*4 + packRows*QK
)

// PackQ8_0 returns the out×in Q8_0 matrix w packed for this CPU's packed
// kernels, its first out/16·16 rows (the rest stay in w), or nil where the
// CPU or build has none (below AVX-512 VNNI, or PREFIXD_CPU caps it) or
// the matrix has fewer than 16 rows. Pass it as Product.Packed with w.
func PackQ8_0(w []byte, out, in int) []byte {
	n := PackedQ8_0Size(out, in)
	if n == 0 {
		return nil
	}
	return PackQ8_0Into(make([]byte, n), w, out, in)
}

// PackedQ8_0Size is the length of PackQ8_0's result for an out×in
// matrix, or 0 where it packs none.
func PackedQ8_0Size(out, in int) int {
	if !havePacked() || in%QK != 0 || in == 0 || out < packRows {
		return 0
	}
	return packedLen(out, in)
}

// PackQ8_0Into is PackQ8_0 writing into p, which holds
// PackedQ8_0Size(out, in) bytes (memory the caller chose, such as huge
// pages), and returns it; nil where PackQ8_0 packs nothing.
func PackQ8_0Into(p, w []byte, out, in int) []byte {
	n := PackedQ8_0Size(out, in)
	nb, rowBytes := in/QK, in/QK*34
	if n == 0 || len(w) < out*rowBytes || len(p) != n {
		return nil
	}
	ng := out / packRows
	for g := range ng {
		for b := range nb {
			dst := p[(g*nb+b)*packBlockBytes:]
			for r := range packRows {
				blk := w[(g*packRows+r)*rowBytes+b*34:]
				binary.LittleEndian.PutUint32(dst[4*r:], math.Float32bits(half(blk)))
				for k := range QK / 4 {
					for i := range 4 {
						dst[packRows*4+k*packRows*4+r*4+i] = blk[2+4*k+i] ^ 0x80
					}
				}
			}
		}
	}
	return p
}

// PacksQ8_0 reports whether this CPU multiplies Q8_0 matrices of 16 rows
// or more from packed copies (PackQ8_0) rather than where they lie.
func PacksQ8_0() bool { return havePacked() }

// packedLen is the length of the packed form of out×in Q8_0 weights.
func packedLen(out, in int) int { return out / packRows * (in / QK) * packBlockBytes }

// packActs lays out the quantized rows of a (Q8_0 blocks, rows×in
// values) block-major for the packed kernels: pq the quants of block b of
// row r at 32·(b·rows+r), pd its scale and pc its offset term −128·Σq at
// b·rows+r (the weights go in as unsigned q+128).
func (a *acts) packActs(rows, in int) {
	nb := in / QK
	n := rows * nb
	a.pq = slices.Grow(a.pq[:0], n*QK)[:n*QK]
	a.pd = slices.Grow(a.pd[:0], n)[:n]
	a.pc = slices.Grow(a.pc[:0], n)[:n]
	for r := range rows {
		for b := range nb {
			i, j := b*rows+r, r*nb+b
			copy(a.pq[i*QK:(i+1)*QK], a.qs[j*QK:(j+1)*QK])
			a.pd[i] = a.d[j]
			a.pc[i] = -128 * (a.sums[2*j] + a.sums[2*j+1])
		}
	}
}

// packedRange computes weight rows [o0, o1) of the packed product p: the
// groups of 16 whose first row lies in the range (all 16 rows of each,
// past o1 too), then rows from the end of the last group on through the
// row-major kernels, so that ranges that split the output between them
// compute every row once.
func (m *Multiplier) packedRange(p *product, o0, o1 int) {
	in, out := m.in, p.Out
	nb, ng := in/QK, out/packRows
	g0, g1 := (o0+packRows-1)/packRows, min(ng, (o1+packRows-1)/packRows)
	if g1 > g0 {
		w := p.Packed[g0*nb*packBlockBytes : g1*nb*packBlockBytes]
		a := p.a
		for r := 0; r < m.rows; {
			n := 1
			switch left := m.rows - r; {
			case left >= 8:
				n = 8
			case left >= 4:
				n = 4
			case m.rows >= 4 && left == 3:
				// The last three as the last four, the first of them
				// again (to the same bits): one call in place of three.
				r, n = m.rows-4, 4
			}
			dotPacked(n, w, a.pq[r*QK:], a.pd[r:], a.pc[r:], nb, g1-g0, m.rows, p.Dst[r*out+g0*packRows:], out)
			r += n
		}
	}
	if tail := max(o0, ng*packRows); tail < o1 {
		m.rowMajorRange(p, tail, o1)
	}
}
