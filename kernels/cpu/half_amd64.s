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

