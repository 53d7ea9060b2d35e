//go:build !purego

#include "textflag.h"

// func maxAVX(s *float32, n8 int, m float32) float32
// returns the largest of m and s[0..n8), n8 a positive multiple of 8,
// skipping NaNs as `if x > m { m = x }` does: VMAXPS with the new values
// as its first source and the running maximum as its second returns the
// second where either is NaN.
TEXT ·maxAVX(SB), NOSPLIT, $0-28
	MOVQ         s+0(FP), SI
	MOVQ         n8+8(FP), CX
	VBROADCASTSS m+16(FP), Y0
	VMOVAPS      Y0, Y1
	XORQ         AX, AX

max16:
	LEAQ    16(AX), DX
	CMPQ    DX, CX
	JA      max8
	VMOVUPS (SI)(AX*4), Y2
	VMOVUPS 32(SI)(AX*4), Y3
	VMAXPS  Y0, Y2, Y0
	VMAXPS  Y1, Y3, Y1
	MOVQ    DX, AX
	JMP     max16

max8:
	CMPQ    AX, CX
	JAE     maxreduce
	VMOVUPS (SI)(AX*4), Y2
	VMAXPS  Y0, Y2, Y0

maxreduce:
	VMAXPS       Y0, Y1, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0x4e, X0, X1
	VMAXPS       X0, X1, X0
	VPERMILPS    $0xb1, X0, X1
	VMAXPS       X0, X1, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func scaleAddAVX(acc, add *float32, n8 int, c float32)
// sets acc[i] = acc[i]·c + add[i] (one rounding, by FMA) for i < n8, n8
// a positive multiple of 8.
TEXT ·scaleAddAVX(SB), NOSPLIT, $0-28
	MOVQ         acc+0(FP), DI
	MOVQ         add+8(FP), SI
	MOVQ         n8+16(FP), CX
	VBROADCASTSS c+24(FP), Y0
	XORQ         AX, AX

scaleadd:
	VMOVUPS      (DI)(AX*4), Y1
	VFMADD213PS  (SI)(AX*4), Y0, Y1
	VMOVUPS      Y1, (DI)(AX*4)
	ADDQ         $8, AX
	CMPQ         AX, CX
	JB           scaleadd
	VZEROUPPER
	RET

// func accumHalfAVX(acc *float32, w *float32, v *uint16, ldv int, rows int, d int)
// adds Σ_j w[j]·v[j*ldv+i] to acc[i] for i < d, j < rows, d a positive
// multiple of 8, the v being halves, each made float32 as it is loaded:
// accumAVX's additions in accumAVX's order, on the values an F16 cache
// holds, without converting them into a buffer first.
TEXT ·accumHalfAVX(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ ldv+24(FP), R10
	SHLQ $1, R10
	MOVQ rows+32(FP), CX
	MOVQ d+40(FP), BX
	SHLQ $2, BX
	XORQ AX, AX

hchunk64:
	MOVQ    BX, R8
	SUBQ    AX, R8
	CMPQ    R8, $256
	JB      hchunk8
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y1
	VMOVUPS 64(DI)(AX*1), Y2
	VMOVUPS 96(DI)(AX*1), Y3
	VMOVUPS 128(DI)(AX*1), Y4
	VMOVUPS 160(DI)(AX*1), Y5
	VMOVUPS 192(DI)(AX*1), Y6
	VMOVUPS 224(DI)(AX*1), Y7
	MOVQ    AX, R9
	SHRQ    $1, R9
	ADDQ    DX, R9
	XORQ    R11, R11

hrows64:
	CMPQ         R11, CX
	JAE          hstore64
	VBROADCASTSS (SI)(R11*4), Y8
	VCVTPH2PS    (R9), Y9
	VCVTPH2PS    16(R9), Y10
	VCVTPH2PS    32(R9), Y11
	VCVTPH2PS    48(R9), Y12
	VFMADD231PS  Y9, Y8, Y0
	VFMADD231PS  Y10, Y8, Y1
	VFMADD231PS  Y11, Y8, Y2
	VFMADD231PS  Y12, Y8, Y3
	VCVTPH2PS    64(R9), Y9
	VCVTPH2PS    80(R9), Y10
	VCVTPH2PS    96(R9), Y11
	VCVTPH2PS    112(R9), Y12
	VFMADD231PS  Y9, Y8, Y4
	VFMADD231PS  Y10, Y8, Y5
	VFMADD231PS  Y11, Y8, Y6
	VFMADD231PS  Y12, Y8, Y7
	ADDQ         R10, R9
	INCQ         R11
	JMP          hrows64

hstore64:
	VMOVUPS Y0, (DI)(AX*1)
	VMOVUPS Y1, 32(DI)(AX*1)
	VMOVUPS Y2, 64(DI)(AX*1)
	VMOVUPS Y3, 96(DI)(AX*1)
	VMOVUPS Y4, 128(DI)(AX*1)
	VMOVUPS Y5, 160(DI)(AX*1)
	VMOVUPS Y6, 192(DI)(AX*1)
	VMOVUPS Y7, 224(DI)(AX*1)
	ADDQ    $256, AX
	JMP     hchunk64

hchunk8:
	CMPQ    AX, BX
	JAE     hdone
	VMOVUPS (DI)(AX*1), Y0
	MOVQ    AX, R9
	SHRQ    $1, R9
	ADDQ    DX, R9
	XORQ    R11, R11

hrows8:
	CMPQ         R11, CX
	JAE          hstore8
	VBROADCASTSS (SI)(R11*4), Y8
	VCVTPH2PS    (R9), Y9
	VFMADD231PS  Y9, Y8, Y0
	ADDQ         R10, R9
	INCQ         R11
	JMP          hrows8

hstore8:
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	JMP     hchunk8

hdone:
	VZEROUPPER
	RET
