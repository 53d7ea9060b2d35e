package mmap

import (
	"fmt"
	"io"
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page where the base page is
// 4 KiB (x86-64, and arm64 as Linux distributions build it).
const hugePage = 2 << 20

// Resident reads path into memory of the process's own, asked of Linux
// in transparent huge pages (MADV_HUGEPAGE, where THP is "always" or
// "madvise"), aligned to them, and then made read-only, so a stray write
// faults as it would on File's mapping. Decoding a token reads every
// weight: in 2 MiB pages the TLB covers the weights and the prefetchers
// run on across what were 4 KiB page boundaries. Unlike File, the copy
// is resident from the start, counted as used, and not shared with other
// processes reading the file. unmap releases it. Files are refused as by
// File.
func Resident(path string) ([]byte, func([]byte) error, error) {
	f, size, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	if size == 0 {
		return []byte{}, noUnmap, nil
	}
	defer f.Close()
	// Over-allocate by a huge page to align the start: the slack is never
	// touched, so it takes no memory.
	region, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("allocating %d bytes for %s: %w", size, path, err)
	}
	unmap := func([]byte) error { return syscall.Munmap(region) }
	start := -int(uintptr(unsafe.Pointer(&region[0]))) & (hugePage - 1)
	data := region[start : start+size : start+size]
	_ = syscall.Madvise(data, syscall.MADV_HUGEPAGE) // refused where THP is "never"
	if _, err := io.ReadFull(f, data); err != nil {
		_ = unmap(nil)
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := syscall.Mprotect(data, syscall.PROT_READ); err != nil {
		_ = unmap(nil)
		return nil, nil, fmt.Errorf("mprotect %s: %w", path, err)
	}
	return data, unmap, nil
}
