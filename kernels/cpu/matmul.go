package cpu

// MatMul sets c[m×n] = a[m×k] · bᵀ, where b is [n×k] row-major: weights
// stored output-major, as llama2.c and GGUF store them. It covers prefill
// (m = tokens) and batched decode (m = rows; m = 1 is matrix-vector),
// splitting the output columns across the workers.
func MatMul(w *Workers, c, a, b []float32, m, n, k int) {
	if m == 0 || n == 0 {
		return
	}
	_, _, _ = c[m*n-1], a[m*k-1], b[n*k-1]
	w.For(n, func(_, lo, hi int) { matmulCols(c, a, b, m, n, k, lo, hi) })
}

// matmulCols computes columns [j0, j1) of c. Weight rows are taken in
// tiles that stay in cache while every input row passes over them, four
// input rows at a time so each weight load feeds four products.
func matmulCols(c, a, b []float32, m, n, k, j0, j1 int) {
	const tile = 32
	for jt := j0; jt < j1; jt += tile {
		je := min(jt+tile, j1)
		i := 0
		for ; i+4 <= m; i += 4 {
			a0, a1, a2, a3 := a[i*k:(i+1)*k], a[(i+1)*k:(i+2)*k], a[(i+2)*k:(i+3)*k], a[(i+3)*k:(i+4)*k]
			for j := jt; j < je; j++ {
				s0, s1, s2, s3 := dot4(a0, a1, a2, a3, b[j*k:(j+1)*k])
				c[i*n+j], c[(i+1)*n+j], c[(i+2)*n+j], c[(i+3)*n+j] = s0, s1, s2, s3
			}
		}
		for ; i < m; i++ {
			ai := a[i*k : (i+1)*k]
			for j := jt; j < je; j++ {
				c[i*n+j] = Dot(ai, b[j*k:(j+1)*k])
			}
		}
	}
}

// Dot returns the dot product of a and b[:len(a)].
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dot4(a0, a1, a2, a3, b []float32) (s0, s1, s2, s3 float32) {
	b = b[:len(a0)]
	a1, a2, a3 = a1[:len(a0)], a2[:len(a0)], a3[:len(a0)]
	for i, bv := range b {
		s0 += a0[i] * bv
		s1 += a1[i] * bv
		s2 += a2[i] * bv
		s3 += a3[i] * bv
	}
	return
}
