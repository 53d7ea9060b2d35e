package cpu

import "math"

// RMSNorm sets out = x / rms(x) * weight, rms(x) = sqrt(mean(x²) + eps),
// eps being the small constant of the model's config (1e-5 in llama2.c).
// out may alias x.
func RMSNorm(out, x, weight []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	scale := float32(1 / math.Sqrt(float64(ss/float32(len(x))+eps)))
	weight = weight[:len(x)]
	out = out[:len(x)]
	for i, v := range x {
		out[i] = v * scale * weight[i]
	}
}

// RoPE rotates x (nHeads heads of headDim) in place for position pos, in
// the adjacent-pair form of llama2.c and GGUF llama: each pair (x[2i],
// x[2i+1]) of a head turns by pos·theta^(-2i/headDim) radians. headDim
// must be even.
func RoPE(x []float32, pos, nHeads, headDim int, theta float32) {
	for i := 0; i < headDim; i += 2 {
		freq := math.Pow(float64(theta), -float64(i)/float64(headDim))
		sin, cos := math.Sincos(float64(pos) * freq)
		s, c := float32(sin), float32(cos)
		for h := range nHeads {
			j := h*headDim + i
			x0, x1 := x[j], x[j+1]
			x[j] = x0*c - x1*s
			x[j+1] = x0*s + x1*c
		}
	}
}

// SwiGLU sets out = silu(gate) * up, silu(g) = g·sigmoid(g). out may alias
// gate.
func SwiGLU(out, gate, up []float32) {
	up = up[:len(gate)]
	out = out[:len(gate)]
	for i, g := range gate {
		out[i] = g / (1 + expf(-g)) * up[i]
	}
}

// Softmax turns x into probabilities in place, subtracting the maximum
// first so large logits do not overflow. x must not be empty.
func Softmax(x []float32) {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	var sum float32
	for i, v := range x {
		x[i] = expf(v - m)
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
}

// Add sets dst += x.
func Add(dst, x []float32) {
	x = x[:len(dst)]
	for i := range dst {
		dst[i] += x[i]
	}
}
