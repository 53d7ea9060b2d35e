//go:build cgo && amd64

// The kernels with bf16 elements.
#define PREFIXD_KV_BF16 1
#define PREFIXD_EMU_NS kv_bf16
#define PREFIXD_EMU_TABLE prefixd_emu_table_bf16
#include "kernels.inc"
