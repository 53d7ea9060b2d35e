package kerneltest

import (
	"testing"

	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// RoPEAppendKV rotates the queries and keys of a prefill and of a decode
// batch, read from fused QKV rows, in one launch (adjacent pairs with and
// without frequency factors, and halves; with and without per-head q and
// k norms) and compares the queries it wrote, and the keys and values it
// stored in the pool, with the CPU's norm (cpu.RMSNorm of each head) and
// rotation of the same rows.
func RoPEAppendKV(t *testing.T, e *Env) {
	const theta = 10000
	for _, c := range attnCases[:2] {
		for _, v := range []struct {
			name    string
			layout  launch.RoPELayout
			factors bool
			norms   bool
		}{{"adjacent", launch.Adjacent, false, false}, {"adjacent factors", launch.Adjacent, true, false},
			{"halves", launch.Halves, false, false}, {"halves norms", launch.Halves, false, true},
			{"adjacent factors norms", launch.Adjacent, true, true}} {
			t.Run(c.name+" "+v.name, func(t *testing.T) {
				e := e.sub(t)
				s := e.setup(c)
				lay, kd, qd := s.lay, s.lay.KVDim(), c.nHeads*c.hd
				var factors []float32
				if v.factors {
					for i := range c.hd / 2 {
						factors = append(factors, 1+5*float32(i)/float32(c.hd/2))
					}
				}
				const eps = 1e-5
				var qn, kn []float32
				if v.norms {
					qn, kn = e.randF32(c.hd), e.randF32(c.hd)
				}
				rotate := func(x []float32, pos, heads int, w []float32) {
					for h := 0; w != nil && h < heads; h++ {
						head := x[h*c.hd : (h+1)*c.hd]
						cpu.RMSNorm(head, head, w, eps)
					}
					switch {
					case v.layout == launch.Halves:
						ropeHalves(x, pos, heads, c.hd, theta)
					case v.factors:
						ropeScaled(x, pos, heads, c.hd, theta, factors)
					default:
						cpu.RoPE(x[:heads*c.hd], pos, heads, c.hd, theta)
					}
				}
				qkv := e.floats(s.qkv)
				table := e.floats(launch.RoPETable(s.st.MaxPos+1, c.hd, theta, factors))
				qOut := e.alloc(4 * s.st.Rows * qd)
				a := launch.RoPEKV{QOut: qOut, Q: qkv, LDQ: s.ld, K: qkv + launch.Ptr(4*qd), V: qkv + launch.Ptr(4*(qd+kd)),
					LDKV: s.ld, NHeads: c.nHeads, Layer: s.layer, Layout: v.layout, Table: table, Eps: eps}
				if v.norms {
					a.QNorm, a.KNorm = e.floats(qn), e.floats(kn)
				}
				e.launch(launch.RoPEAppendKV(e.d, s.kv, lay, s.st, a))
				got := e.readFloats(qOut, s.st.Rows*qd)
				var gotQ, wantQ, gotKV, wantKV []float32
				r := 0
				for i, seq := range s.seqs {
					for j := range c.rows[i] {
						pos := c.starts[i] + j
						row := s.qkv[r*s.ld : (r+1)*s.ld]
						q, k := append([]float32(nil), row[:qd]...), append([]float32(nil), row[qd:qd+kd]...)
						rotate(q, pos, c.nHeads, qn)
						rotate(k, pos, c.kvHeads, kn)
						wantQ = append(wantQ, q...)
						gotQ = append(gotQ, got[r*qd:][:qd]...)
						wantKV = append(append(wantKV, k...), row[qd+kd:qd+2*kd]...)
						off := (int64(seq.Blocks[pos/c.bs])*lay.BlockElems() + lay.LayerOffset(s.layer) + int64(pos%c.bs*kd)) * int64(e.dt.Size())
						gotKV = append(gotKV, e.readElems(s.kv+launch.Ptr(off), kd)...)
						gotKV = append(gotKV, e.readElems(s.kv+launch.Ptr(off+int64(c.bs*kd*e.dt.Size())), kd)...)
						r++
					}
				}
				if err := RelErr(gotQ, wantQ); err > 1e-5 {
					t.Errorf("rotated queries: relative error %.3g", err)
				}
				e.close("stored keys and values", gotKV, wantKV)
			})
		}
	}
}
