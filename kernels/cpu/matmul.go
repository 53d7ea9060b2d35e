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
// tiles that stay in cache while every input row passes over them, two
// input rows at a time so each weight load feeds two products.
func matmulCols(c, a, b []float32, m, n, k, j0, j1 int) {
	const tile = 32
	for jt := j0; jt < j1; jt += tile {
		je := min(jt+tile, j1)
		i := 0
		for ; i+2 <= m; i += 2 {
			a0, a1 := a[i*k:(i+1)*k], a[(i+1)*k:(i+2)*k]
			for j := jt; j < je; j++ {
				c[i*n+j], c[(i+1)*n+j] = dot2(a0, a1, b[j*k:(j+1)*k])
			}
		}
		if i < m {
			ai := a[i*k : (i+1)*k]
			for j := jt; j < je; j++ {
				c[i*n+j] = Dot(ai, b[j*k:(j+1)*k])
			}
		}
	}
}

// Dot returns the dot product of a and b[:len(a)]. It keeps four partial
// sums, by index mod 4, exactly as dot2 does for each row, so a row's
// result never depends on which kernel (which batch position) computed it.
func Dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dot2(a0, a1, b []float32) (float32, float32) {
	n := len(a0)
	b, a1 = b[:n], a1[:n]
	var p0, p1, p2, p3, q0, q1, q2, q3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		b0, b1, b2, b3 := b[i], b[i+1], b[i+2], b[i+3]
		p0 += a0[i] * b0
		p1 += a0[i+1] * b1
		p2 += a0[i+2] * b2
		p3 += a0[i+3] * b3
		q0 += a1[i] * b0
		q1 += a1[i+1] * b1
		q2 += a1[i+2] * b2
		q3 += a1[i+3] * b3
	}
	for ; i < n; i++ {
		p0 += a0[i] * b[i]
		q0 += a1[i] * b[i]
	}
	return (p0 + p1) + (p2 + p3), (q0 + q1) + (q2 + q3)
}
