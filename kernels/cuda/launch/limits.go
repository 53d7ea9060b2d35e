package launch

import (
	"errors"
	"fmt"
)

// ErrLimits means a launch exceeds the device's launch limits or those of
// the kernel: cuLaunchKernel would fail it (CUDA_ERROR_INVALID_VALUE or
// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) with no word of which limit.
var ErrLimits = errors.New("launch: over the launch limits")

// Limits are a device's launch limits, read from its attributes
// (kernels/cuda) or, on the emulator, those of the GPUs prefixd runs on.
type Limits struct {
	MaxThreads   int  // threads per block
	MaxBlock     Dim3 // block size in each dimension
	MaxGrid      Dim3 // grid size in each dimension
	MaxRegisters int  // 32-bit registers one block may use
}

// GPULimits are the limits of every GPU prefixd runs on (compute
// capability 8.0 and later; 3.0 and later share them): what the emulator
// enforces.
var GPULimits = Limits{
	MaxThreads:   1024,
	MaxBlock:     Dim3{1024, 1024, 64},
	MaxGrid:      Dim3{1<<31 - 1, 65535, 65535},
	MaxRegisters: 65536,
}

// Kernel is what one compiled kernel allows; a zero field is unknown and
// not checked.
type Kernel struct {
	// MaxThreads is the most threads per block the kernel launches with:
	// its __launch_bounds__, or fewer where its registers do not fit the
	// device (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK).
	MaxThreads int
	// Registers is the registers each thread uses
	// (CU_FUNC_ATTRIBUTE_NUM_REGS).
	Registers int
}

// Check returns an error wrapping ErrLimits that names the limit if a
// launch of kernel (described by k) over grid with block threads per
// block would exceed l or k. Devices call it before every launch.
func (l Limits) Check(kernel string, k Kernel, grid, block Dim3) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s grid %v block %v: %s", ErrLimits, kernel, grid, block, fmt.Sprintf(format, a...))
	}
	dims := []struct {
		name   string
		v, max int
	}{
		{"grid x", grid.X, l.MaxGrid.X}, {"grid y", grid.Y, l.MaxGrid.Y}, {"grid z", grid.Z, l.MaxGrid.Z},
		{"block x", block.X, l.MaxBlock.X}, {"block y", block.Y, l.MaxBlock.Y}, {"block z", block.Z, l.MaxBlock.Z},
	}
	for _, d := range dims {
		if d.v < 1 || d.v > d.max {
			return fail("%s is %d, the device allows 1..%d", d.name, d.v, d.max)
		}
	}
	threads := block.X * block.Y * block.Z
	if threads > l.MaxThreads {
		return fail("%d threads per block, the device allows %d", threads, l.MaxThreads)
	}
	if k.MaxThreads > 0 && threads > k.MaxThreads {
		return fail("%d threads per block, the kernel allows %d (its launch bounds or registers)", threads, k.MaxThreads)
	}
	if k.Registers > 0 && l.MaxRegisters > 0 && k.Registers*threads > l.MaxRegisters {
		return fail("%d threads × %d registers need %d registers, the device has %d per block",
			threads, k.Registers, k.Registers*threads, l.MaxRegisters)
	}
	return nil
}
