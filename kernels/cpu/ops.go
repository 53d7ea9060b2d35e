package cpu

import (
	"math"

	"github.com/prefixd/prefixd/kernels"
)

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
	rope(x, pos, nHeads, headDim, theta, kernels.RopeAdjacent, nil)
}

// RoPEHalves is RoPE in the rotate-half form of Hugging Face checkpoints:
// pair i of a head is (x[i], x[i+headDim/2]), turned by the same angle as
// RoPE's pair i.
func RoPEHalves(x []float32, pos, nHeads, headDim int, theta float32) {
	rope(x, pos, nHeads, headDim, theta, kernels.RopeHalves, nil)
}

// rope turns pair i of every head, whose elements layout places, by
// pos·theta^(-2i/headDim)/factors[i] radians; factors is nil or
// headDim/2 long (Llama 3's per-pair frequency divisors).
func rope(x []float32, pos, nHeads, headDim int, theta float32, layout kernels.RopeLayout, factors []float32) {
	var buf [512]float32 // on the stack: the row operations allocate nothing up to this head size
	cs := buf[:]
	if headDim > len(buf) {
		cs = make([]float32, headDim)
	}
	ropeAngles(cs, pos, headDim, theta, factors)
	ropeRotate(x, cs, nHeads, headDim, layout)
}

// ropeAngles sets cs[2i], cs[2i+1] to the cosine and sine of rope's angle
// for pair i < headDim/2 at position pos.
func ropeAngles(cs []float32, pos, headDim int, theta float32, factors []float32) {
	for i := range headDim / 2 {
		freq := math.Pow(float64(theta), -float64(2*i)/float64(headDim))
		if factors != nil {
			freq /= float64(factors[i])
		}
		sin, cos := math.Sincos(float64(pos) * freq)
		cs[2*i], cs[2*i+1] = float32(cos), float32(sin)
	}
}

// ropeRotate turns pair i of every head of x, whose elements layout
// places, by the angle whose cosine and sine are cs[2i] and cs[2i+1].
func ropeRotate(x, cs []float32, nHeads, headDim int, layout kernels.RopeLayout) {
	half := headDim / 2
	for i := range half {
		c, s := cs[2*i], cs[2*i+1]
		a, b := 2*i, 2*i+1
		if layout == kernels.RopeHalves {
			a, b = i, i+half
		}
		for h := range nHeads {
			j0, j1 := h*headDim+a, h*headDim+b
			x0, x1 := x[j0], x[j1]
			x[j0] = x0*c - x1*s
			x[j1] = x0*s + x1*c
		}
	}
}

// SwiGLU sets out = silu(gate) * up, silu(g) = g·sigmoid(g). out may alias
// gate.
func SwiGLU(out, gate, up []float32) {
	up = up[:len(gate)]
	out = out[:len(gate)]
	for i := simdSwiGLU(out, gate, up); i < len(gate); i++ {
		g := gate[i]
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
