package mmap

import (
	"fmt"
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page where the base page is
// 4 KiB (x86-64, and arm64 as Linux distributions build it).
const hugePage = 2 << 20

// Resident returns a copy of data in memory of the process's own, in
// transparent huge pages where Linux gives them (Huge), made read-only,
// so a stray write faults as it would on File's mapping. Decoding a token
// reads every weight: in 2 MiB pages the TLB covers the weights and the
// prefetchers run on across what were 4 KiB page boundaries. Unlike a
// File mapping, the copy is resident from the start, counted as used, and
// not shared with other processes. release frees it.
func Resident(data []byte) ([]byte, func() error, error) {
	cp, release, err := Huge(len(data))
	if err != nil || len(data) == 0 {
		return cp, release, err
	}
	copy(cp, data)
	if err := syscall.Mprotect(cp, syscall.PROT_READ); err != nil {
		_ = release()
		return nil, nil, fmt.Errorf("mprotect: %w", err)
	}
	return cp, release, nil
}

// Huge returns n zero bytes of writable memory of the process's own,
// aligned to and asked of Linux in transparent huge pages (MADV_HUGEPAGE,
// honoured where THP is "always" or "madvise"); pages never written take
// no memory. release frees them.
func Huge(n int) ([]byte, func() error, error) {
	if n == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	// Over-allocate by a huge page to align the start: the slack is never
	// touched, so it takes no memory.
	region, err := syscall.Mmap(-1, 0, n+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("allocating %d bytes: %w", n, err)
	}
	start := -int(uintptr(unsafe.Pointer(&region[0]))) & (hugePage - 1)
	b := region[start : start+n : start+n]
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // refused where THP is "never"
	return b, func() error { return syscall.Munmap(region) }, nil
}
