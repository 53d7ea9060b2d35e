//go:build cgo && amd64

package emu

import (
	"fmt"
	"math"
	"slices"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// MatMulT does what cuBLAS's GemmEx does for kernels/cuda (Exec.MatMulT):
// y (float32, m×n row-major) = a·wᵀ + beta·y, a being m×k and w n×k in the
// device's element type, each element widened exactly to float32 and the
// products accumulated in float32. Only the order of the sum differs from
// the GPU's. While the Device captures a graph, it checks and records the
// product instead.
func (d *Device) MatMulT(y, a, w launch.Ptr, m, n, k int, beta float32) error {
	for _, v := range []int{m, n, k} {
		if v <= 0 || v > math.MaxInt32 {
			return fmt.Errorf("%w: product of %d×%d by %d×%d", launch.ErrShape, m, k, n, k)
		}
	}
	es := d.dtype.Size()
	yb, err1 := d.span(y, 4*m*n)
	ab, err2 := d.span(a, es*m*k)
	wb, err3 := d.span(w, es*n*k)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			return fmt.Errorf("emu: MatMulT: %w", err)
		}
	}
	if d.cap.on {
		d.record(call{product: true, args: []uint64{uint64(y), uint64(a), uint64(w), uint64(m), uint64(n), uint64(k)}, beta: beta})
		return nil
	}
	d.af, d.wf, d.yf = slices.Grow(d.af[:0], m*k)[:m*k], slices.Grow(d.wf[:0], n*k)[:n*k], slices.Grow(d.yf[:0], m*n)[:m*n]
	af, wf, yf := d.af, d.wf, d.yf
	launch.Decode(d.dtype, af, ab)
	launch.Decode(d.dtype, wf, wb)
	launch.Decode(launch.F32, yf, yb)
	for i := range m {
		ar := af[i*k : (i+1)*k]
		for j := range n {
			wr := wf[j*k : (j+1)*k]
			var s float32
			for l, v := range ar {
				s += v * wr[l]
			}
			if beta != 0 {
				s += beta * yf[i*n+j]
			}
			yf[i*n+j] = s
		}
	}
	launch.Encode(launch.F32, yb, yf)
	return nil
}

// Live returns how many allocations are held: 0 after every owner has
// freed what it allocated.
func (d *Device) Live() int { return len(d.allocs) }
