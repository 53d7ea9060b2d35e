package mmap

import (
	"fmt"
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page where the base page is
// 4 KiB (x86-64, and arm64 as Linux distributions build it).
const hugePage = 2 << 20

// Resident returns a copy of data in memory of the process's own, asked
// of Linux in transparent huge pages (MADV_HUGEPAGE, where THP is
// "always" or "madvise"), aligned to them, and then made read-only, so a
// stray write faults as it would on File's mapping. Decoding a token
// reads every weight: in 2 MiB pages the TLB covers the weights and the
// prefetchers run on across what were 4 KiB page boundaries. Unlike a
// File mapping, the copy is resident from the start, counted as used, and
// not shared with other processes. release frees it.
func Resident(data []byte) ([]byte, func() error, error) {
	size := len(data)
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	// Over-allocate by a huge page to align the start: the slack is never
	// touched, so it takes no memory.
	region, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("allocating %d bytes: %w", size, err)
	}
	release := func() error { return syscall.Munmap(region) }
	start := -int(uintptr(unsafe.Pointer(&region[0]))) & (hugePage - 1)
	cp := region[start : start+size : start+size]
	_ = syscall.Madvise(cp, syscall.MADV_HUGEPAGE) // refused where THP is "never"
	copy(cp, data)
	if err := syscall.Mprotect(cp, syscall.PROT_READ); err != nil {
		_ = release()
		return nil, nil, fmt.Errorf("mprotect: %w", err)
	}
	return cp, release, nil
}
