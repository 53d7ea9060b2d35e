package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// The blocks below are written byte by byte, and the expected values come
// from each format's formula as ggml's dequantize_row_* states it, written
// out here independently of the decoder under test.

const (
	h1     = 0x3c00 // 1.0 as a half
	hHalf  = 0x3800 // 0.5
	hQuart = 0x3400 // 0.25
	hEigth = 0x3000 // 0.125
	h2     = 0x4000 // 2.0
	hM1    = 0xbc00 // -1.0
)

func le16(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func seq(n int, f func(i int) byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = f(i)
	}
	return b
}

func checkGolden(t *testing.T, typ Type, blk []byte, want []float32) {
	t.Helper()
	if len(blk) != typ.BlockBytes() {
		t.Fatalf("%s: test block has %d bytes, the format %d", typ, len(blk), typ.BlockBytes())
	}
	got := make([]float32, len(want))
	if err := Dequantize(typ, got, blk); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
			t.Fatalf("%s value %d = %v, want %v", typ, i, got[i], want[i])
		}
	}
}

func TestGoldenFloats(t *testing.T) {
	halves := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff, 0x8000, 0x7c00, 0xfc00, 0x3555, 0x0400}
	wantH := []float32{1, -2, 65504, 1.0 / (1 << 24), 1023.0 / (1 << 24), float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0.333251953125, 1.0 / (1 << 14)}
	var b []byte
	for _, h := range halves {
		b = append(b, le16(h)...)
	}
	checkGolden(t, F16, b[:2], wantH[:1])
	got := make([]float32, len(halves))
	if err := Dequantize(F16, got, b); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != wantH[i] || math.Signbit(float64(got[i])) != math.Signbit(float64(wantH[i])) {
			t.Errorf("F16 %#04x = %v, want %v", halves[i], got[i], wantH[i])
		}
	}
	checkGolden(t, F16, le16(0x7e00), []float32{float32(math.NaN())})

	// bfloat16 is the top half of a float32.
	checkGolden(t, BF16, le16(0x3f80), []float32{1})
	checkGolden(t, BF16, le16(0xc0a0), []float32{-5})
	checkGolden(t, BF16, le16(0x7f80), []float32{float32(math.Inf(1))})
	checkGolden(t, BF16, le16(0x3eaa), []float32{0.33203125})
	checkGolden(t, F32, []byte{0, 0, 0xc0, 0x3f}, []float32{1.5})
}

func TestGoldenQ8_0(t *testing.T) {
	qs := seq(32, func(i int) byte { return byte(int8(i*8 - 128)) })
	qs[31] = 0x7f // 127
	want := make([]float32, 32)
	for i := range want {
		q := float32(i*8 - 128)
		if i == 31 {
			q = 127
		}
		want[i] = 0.5 * q
	}
	checkGolden(t, Q8_0, cat(le16(hHalf), qs), want)
}

func TestGoldenQ4_0(t *testing.T) {
	// qs[j] = j | (15-j)<<4: value j is j, value j+16 is 15-j; minus 8, times d = 2.
	qs := seq(16, func(j int) byte { return byte(j | (15-j)<<4) })
	want := make([]float32, 32)
	for j := range 16 {
		want[j] = 2 * float32(j-8)
		want[j+16] = 2 * float32(15-j-8)
	}
	checkGolden(t, Q4_0, cat(le16(h2), qs), want)
}

func TestGoldenQ4_1(t *testing.T) {
	qs := seq(16, func(j int) byte { return byte(j | ((j+1)%16)<<4) })
	want := make([]float32, 32)
	for j := range 16 {
		want[j] = 0.5*float32(j) - 1
		want[j+16] = 0.5*float32((j+1)%16) - 1
	}
	checkGolden(t, Q4_1, cat(le16(hHalf), le16(hM1), qs), want)
}

func TestGoldenQ5(t *testing.T) {
	// qh = 0xa5a50f0f little-endian: values 0-3 and 8-11 have the fifth bit,
	// 16+{0,2,5,7,8,10,13,15} too. Every qs byte is 0x3c: low nibble 12
	// (values 0..15), high nibble 3 (values 16..31).
	qh := []byte{0x0f, 0x0f, 0xa5, 0xa5}
	qs := seq(16, func(int) byte { return 0x3c })
	high := map[int]bool{0: true, 1: true, 2: true, 3: true, 8: true, 9: true, 10: true, 11: true,
		16: true, 18: true, 21: true, 23: true, 24: true, 26: true, 29: true, 31: true}
	want0, want1 := make([]float32, 32), make([]float32, 32)
	for j := range 32 {
		q := 12
		if j >= 16 {
			q = 3
		}
		if high[j] {
			q += 16
		}
		want0[j] = 1 * float32(q-16)     // Q5_0: d = 1, offset 16
		want1[j] = 0.25*float32(q) + 0.5 // Q5_1: d = 0.25, m = 0.5
	}
	checkGolden(t, Q5_0, cat(le16(h1), qh, qs), want0)
	checkGolden(t, Q5_1, cat(le16(hQuart), le16(hHalf), qh, qs), want1)
}

// kScales are the 12 scale bytes of a Q4_K/Q5_K block encoding, by hand,
// scales 1, 2, 3, 4, 33, 45, 62, 63 and minimums 5, 6, 7, 8, 17, 50, 0, 63:
// bytes 0-3 hold scales 0-3 in their low six bits and the top two bits of
// scales 4-7; bytes 4-7 the same for the minimums; bytes 8-11 the low
// nibbles of scales 4-7 (low) and minimums 4-7 (high).
var (
	kScales = []byte{0x81, 0x82, 0xc3, 0xc4, 0x45, 0xc6, 0x07, 0xc8, 0x11, 0x2d, 0x0e, 0xff}
	kSc     = []float32{1, 2, 3, 4, 33, 45, 62, 63}
	kMin    = []float32{5, 6, 7, 8, 17, 50, 0, 63}
)

func TestGoldenQ4_K(t *testing.T) {
	qs := seq(128, func(i int) byte { return byte(i * 7) })
	want := make([]float32, 256)
	// Chunk c of 64 values reads qs[32c:32c+32]: low nibbles with sub-block
	// 2c's scale and minimum, then high nibbles with sub-block 2c+1's.
	for c := range 4 {
		for l := range 32 {
			q := qs[32*c+l]
			want[64*c+l] = 0.5*kSc[2*c]*float32(q&15) - 0.25*kMin[2*c]
			want[64*c+32+l] = 0.5*kSc[2*c+1]*float32(q>>4) - 0.25*kMin[2*c+1]
		}
	}
	checkGolden(t, Q4_K, cat(le16(hHalf), le16(hQuart), kScales, qs), want)
}

func TestGoldenQ5_K(t *testing.T) {
	qh := seq(32, func(l int) byte { return byte(l*37 + 11) })
	qs := seq(128, func(i int) byte { return byte(i*13 + 5) })
	want := make([]float32, 256)
	for c := range 4 {
		for l := range 32 {
			lo, hi := float32(qs[32*c+l]&15), float32(qs[32*c+l]>>4)
			if qh[l]&(1<<(2*c)) != 0 {
				lo += 16
			}
			if qh[l]&(1<<(2*c+1)) != 0 {
				hi += 16
			}
			want[64*c+l] = 2*kSc[2*c]*lo - 1*kMin[2*c]
			want[64*c+32+l] = 2*kSc[2*c+1]*hi - 1*kMin[2*c+1]
		}
	}
	checkGolden(t, Q5_K, cat(le16(h2), le16(h1), kScales, qh, qs), want)
}

func TestGoldenQ6_K(t *testing.T) {
	ql := seq(128, func(i int) byte { return byte(i*11 + 3) })
	qh := seq(64, func(i int) byte { return byte(i*29 + 7) })
	sc := []int8{-128, -5, 1, 127, 3, -1, 0, 2, 9, -9, 17, 64, -64, 4, 5, 6}
	scb := seq(16, func(i int) byte { return byte(sc[i]) })
	want := make([]float32, 256)
	// ggml's loop: per half n of 128 values, for l < 32, four quants.
	for n := range 2 {
		L, H := ql[64*n:], qh[32*n:]
		s := sc[8*n:]
		for l := range 32 {
			is := l / 16
			q1 := int(L[l]&15|(H[l]>>0&3)<<4) - 32
			q2 := int(L[l+32]&15|(H[l]>>2&3)<<4) - 32
			q3 := int(L[l]>>4|(H[l]>>4&3)<<4) - 32
			q4 := int(L[l+32]>>4|(H[l]>>6&3)<<4) - 32
			want[128*n+l] = 0.125 * float32(s[is]) * float32(q1)
			want[128*n+l+32] = 0.125 * float32(s[is+2]) * float32(q2)
			want[128*n+l+64] = 0.125 * float32(s[is+4]) * float32(q3)
			want[128*n+l+96] = 0.125 * float32(s[is+6]) * float32(q4)
		}
	}
	checkGolden(t, Q6_K, cat(ql, qh, scb, le16(hEigth)), want)
}

func TestGoldenQ8_K(t *testing.T) {
	qs := seq(256, func(i int) byte { return byte(i*3 + 1) })
	d := make([]byte, 4)
	binary.LittleEndian.PutUint32(d, math.Float32bits(0.75))
	want := make([]float32, 256)
	for i := range want {
		want[i] = 0.75 * float32(int8(byte(i*3+1)))
	}
	checkGolden(t, Q8_K, cat(d, qs, make([]byte, 32)), want)
}

func TestF32ToF16(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {1.0 / 3, 0x3555}, {65504, 0x7bff},
		{65520, 0x7c00},                             // halfway to 65536: ties to even, overflows
		{65519, 0x7bff},                             // below halfway
		{1 + 1.0/2048, 0x3c00},                      // tie, even stays
		{1 + 3.0/2048, 0x3c02},                      // tie, odd rounds up
		{1.0 / (1 << 25), 0},                        // half the smallest subnormal: to even (0)
		{3.0 / (1 << 25), 0x0002},                   // 1.5 subnormal units: to even (2)
		{1.0 / (1 << 24), 0x0001},                   // the smallest subnormal
		{float32(math.Inf(-1)), 0xfc00}, {1e-30, 0}, // underflow
	} {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := F32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("F32ToF16(NaN) = %#04x, not a NaN", h)
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{{1, 0x3f80}, {-5, 0xc0a0}, {1.0 / 3, 0x3eab}, {math.Float32frombits(0x3f808000), 0x3f80}, {math.Float32frombits(0x3f818000), 0x3f82}} {
		if got := F32ToBF16(c.f); got != c.want {
			t.Errorf("F32ToBF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestRowSizeErrors(t *testing.T) {
	if n, err := Q4_K.RowSize(512); err != nil || n != 288 {
		t.Errorf("Q4_K.RowSize(512) = %d, %v; want 288", n, err)
	}
	if _, err := Q4_K.RowSize(100); err == nil {
		t.Error("Q4_K.RowSize(100): no error for a partial block")
	}
	if _, err := Type(4).RowSize(32); err == nil {
		t.Error("type 4 (removed from ggml) accepted")
	}
	if err := Dequantize(Q8_0, make([]float32, 32), make([]byte, 33)); err == nil {
		t.Error("Dequantize accepted 33 bytes for one Q8_0 block")
	}
	if err := Quantize(Q6_K, make([]byte, 210), make([]float32, 255)); err == nil {
		t.Error("Quantize accepted 255 values for Q6_K")
	}
}

// allTypes lists every type; the quantized ones are the dot kernels' too.
var allTypes = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q8_K}

func TestBlockBytes(t *testing.T) {
	// sizeof(block_*) in ggml-common.h.
	want := map[Type]int{F32: 4, F16: 2, BF16: 2, Q8_0: 34, Q4_0: 18, Q4_1: 20, Q5_0: 22, Q5_1: 24,
		Q4_K: 144, Q5_K: 176, Q6_K: 210, Q8_K: 292}
	for _, typ := range allTypes {
		if typ.BlockBytes() != want[typ] {
			t.Errorf("%s: %d bytes per block, ggml has %d", typ, typ.BlockBytes(), want[typ])
		}
	}
}

// FuzzDequantize decodes arbitrary bytes as every type: no panic, and the
// row is accepted whenever its length is whole blocks.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(0), []byte{0, 0, 0xc0, 0x3f})
	f.Add(uint8(10), cat(le16(hHalf), le16(hQuart), kScales, make([]byte, 128)))
	f.Add(uint8(255), make([]byte, 210))
	f.Fuzz(func(t *testing.T, pick uint8, data []byte) {
		typ := allTypes[int(pick)%len(allTypes)]
		blocks := len(data) / typ.BlockBytes()
		dst := make([]float32, blocks*typ.BlockSize())
		if err := Dequantize(typ, dst, data[:blocks*typ.BlockBytes()]); err != nil {
			t.Fatalf("%s, %d blocks: %v", typ, blocks, err)
		}
		// The assembly decoders, where they ran, match the Go one bit for bit.
		want := make([]float32, len(dst))
		dequantGo(typ, want, data[:blocks*typ.BlockBytes()])
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s, %d blocks: value %d is %#08x, Go gives %#08x", typ, blocks, i, math.Float32bits(dst[i]), math.Float32bits(want[i]))
			}
		}
		if err := Dequantize(typ, dst, append(data[:blocks*typ.BlockBytes():blocks*typ.BlockBytes()], 0)); err == nil {
			t.Fatalf("%s accepted a row one byte long", typ)
		}
	})
}
