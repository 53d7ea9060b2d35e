//go:build !purego

#include "textflag.h"

// The F16 K/V cache's conversions. They need AVX and F16C; half_amd64.go
// calls them only when the CPU has both. n8 counts elements and must be a
// positive multiple of 8; rows must be positive.

// func halfRowsF16C(dst *float32, src *uint16, lds, rows, n8, n int)
// sets dst[r*n+i] to the float32 value of the half src[r*lds+i] for
// r < rows, i < n8.
TEXT ·halfRowsF16C(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R9
	SHLQ $1, R9
	MOVQ rows+24(FP), CX
	MOVQ n8+32(FP), BX
	MOVQ n+40(FP), R8
	SHLQ $2, R8

halfrow:
	XORQ AX, AX

halfcol:
	VCVTPH2PS (SI)(AX*2), Y0
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, BX
	JB        halfcol
	ADDQ      R8, DI
	ADDQ      R9, SI
	DECQ      CX
	JNZ       halfrow
	VZEROUPPER
	RET

// func toHalfF16C(dst *uint16, src *float32, n8 int)
// sets dst[i] to src[i] rounded to the nearest half, ties to even
// (rounding control 0), for i < n8.
TEXT ·toHalfF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), BX
	XORQ AX, AX

tohalf:
	VMOVUPS   (SI)(AX*4), Y0
	VCVTPS2PH $0, Y0, (DI)(AX*2)
	ADDQ      $8, AX
	CMPQ      AX, BX
	JB        tohalf
	VZEROUPPER
	RET

// func dotsHalfAVX(q *float32, k *uint16, ldk, n, k8 int, c *float32)
// sets c[j] to the dot product of q and row j of k (k8 halves, ldk
// apart), for j < n: dotAVX's products and additions in dotAVX's order
// on each half made float32 as it loads, plus +0 as Dot adds its empty
// tail, so c[j] has Dot's bits on the row converted by halfRowsF16C.
TEXT ·dotsHalfAVX(SB), NOSPLIT, $0-48
	MOVQ   q+0(FP), SI
	MOVQ   k+8(FP), DI
	MOVQ   ldk+16(FP), R10
	SHLQ   $1, R10
	MOVQ   n+24(FP), CX
	MOVQ   k8+32(FP), BX
	SHLQ   $2, BX
	MOVQ   BX, R8
	ANDQ   $-128, R8
	MOVQ   c+40(FP), DX
	VXORPS X8, X8, X8

dotshrow:
	XORQ   AX, AX
	XORQ   R9, R9
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dotsh32:
	CMPQ        AX, R8
	JAE         dotsh8
	VCVTPH2PS   (DI)(R9*1), Y4
	VCVTPH2PS   16(DI)(R9*1), Y5
	VCVTPH2PS   32(DI)(R9*1), Y6
	VCVTPH2PS   48(DI)(R9*1), Y7
	VFMADD231PS (SI)(AX*1), Y4, Y0
	VFMADD231PS 32(SI)(AX*1), Y5, Y1
	VFMADD231PS 64(SI)(AX*1), Y6, Y2
	VFMADD231PS 96(SI)(AX*1), Y7, Y3
	ADDQ        $128, AX
	ADDQ        $64, R9
	JMP         dotsh32

dotsh8:
	CMPQ        AX, BX
	JAE         dotshsum
	VCVTPH2PS   (DI)(R9*1), Y4
	VFMADD231PS (SI)(AX*1), Y4, Y0
	ADDQ        $32, AX
	ADDQ        $16, R9
	JMP         dotsh8

dotshsum:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VADDSS       X8, X0, X0
	VMOVSS       X0, (DX)
	ADDQ         $4, DX
	ADDQ         R10, DI
	DECQ         CX
	JNZ          dotshrow
	VZEROUPPER
	RET
