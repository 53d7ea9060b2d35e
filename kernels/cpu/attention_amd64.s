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
