package launch

// TensorCoreCheck launches tc_check on one warp: out (float32 [2][16][8])
// gets A·B twice, through Bt with ldmatrix and through B with
// ldmatrix.trans, a (16x16), bt (B as 8x16) and b (16x8) being 16-bit
// elements, IEEE half if f16 else bf16, each at a 16-byte boundary. It
// checks the tensor-core primitives' fragment layouts (kerneltest).
func TensorCoreCheck(d Device, out, a, bt, b Ptr, f16 bool) error {
	flag := 0
	if f16 {
		flag = 1
	}
	return d.Launch("tc_check", Dim3{1, 1, 1}, threads(32), P(out), P(a), P(bt), P(b), I(flag))
}
