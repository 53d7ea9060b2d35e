//go:build cgo && amd64

// The kernels with f32 elements.
#define PREFIXD_KV_F32 1
#define PREFIXD_EMU_NS kv_f32
#define PREFIXD_EMU_TABLE prefixd_emu_table_f32
#include "kernels.inc"
