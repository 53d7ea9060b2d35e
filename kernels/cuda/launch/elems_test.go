package launch

import (
	"math"
	"testing"
)

// TestF16Golden checks half rounding against hand-computed IEEE 754
// encodings, including ties to even, overflow and subnormals.
func TestF16Golden(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000},
		{65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00}, {float32(math.Inf(1)), 0x7c00},
		{1 + 0x1p-11, 0x3c00},   // halfway between 1 and 1+2^-10: to even, 1
		{1 + 3*0x1p-11, 0x3c02}, // halfway between 1+2^-10 and 1+2^-9: to even, 1+2^-9
		{1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{0x1p-14, 0x0400}, {0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.8p-25, 0x0001}, {3 * 0x1p-25, 0x0002},
		{0.1, 0x2e66}, {0.333333343, 0x3555},
	} {
		if got := ToF16(c.f); got != c.want {
			t.Errorf("ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("ToF16(NaN) = %#04x, not a NaN", h)
	}
}

// TestF16RoundTrip checks every non-NaN half survives widening and
// narrowing, and that values between two halves round to the nearer.
func TestF16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := FromF16(uint16(h))
		if f != f {
			continue
		}
		if got := ToF16(f); got != uint16(h) {
			t.Fatalf("ToF16(FromF16(%#04x) = %g) = %#04x", h, f, got)
		}
	}
}

func TestBF16Golden(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80}, {-1, 0xbf80}, {1 + 0x1p-8, 0x3f80}, {1 + 3*0x1p-8, 0x3f82}, {1 + 0x1p-8 + 0x1p-20, 0x3f81},
		{0.1, 0x3dcd}, {float32(math.MaxFloat32), 0x7f80}, {0x1p-133, 0x0001},
	} {
		if got := ToBF16(c.f); got != c.want {
			t.Errorf("ToBF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := ToBF16(float32(math.NaN())); FromBF16(h) == FromBF16(h) {
		t.Errorf("ToBF16(NaN) = %#04x, not a NaN", h)
	}
}
