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
	f, size, err := openRegular(path)
	if err != nil {
		return nil, nil, err
	}
	if size == 0 {
		return []byte{}, noUnmap, nil
	}
	defer f.Close()
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, syscall.Munmap, nil
}

// openRegular opens path for File and Resident and returns its size; a
// size of 0 comes with no open file. Anything but a regular file is
// refused.
func openRegular(path string) (*os.File, int, error) {
	// Stat before opening: opening a named pipe blocks until a writer
	// comes.
	if st, err := os.Stat(path); err != nil {
		return nil, 0, err
	} else if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file (mode %v)", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && st.Size() != int64(int(st.Size())) {
		err = fmt.Errorf("%s: %d bytes do not fit the address space", path, st.Size())
	}
	if err != nil || st.Size() == 0 {
		f.Close()
		return nil, 0, err
	}
	return f, int(st.Size()), nil
}

func noUnmap([]byte) error { return nil }
