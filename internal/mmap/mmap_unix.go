//go:build unix

package mmap

import (
	"fmt"
	"os"
	"syscall"
)

// File maps path read-only and shared, so its pages are the page cache's:
// resident memory grows only with what is read, and several processes
// serving one model share it. The bytes must not be written; unmap
// releases them, after which they must not be used.
// Anything but a regular file (a device such as /dev/zero, a pipe) is
// refused: its size says nothing of what reading it yields.
func File(path string) ([]byte, func([]byte) error, error) {
	// Stat before opening: opening a named pipe blocks until a writer
	// comes.
	if st, err := os.Stat(path); err != nil {
		return nil, nil, err
	} else if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file (mode %v)", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, func([]byte) error { return nil }, nil
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit the address space", path, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, syscall.Munmap, nil
}
