//go:build cgo && amd64

// The kernels with f16 elements.
#define PREFIXD_KV_F16 1
#define PREFIXD_EMU_NS kv_f16
#define PREFIXD_EMU_TABLE prefixd_emu_table_f16
#include "kernels.inc"
