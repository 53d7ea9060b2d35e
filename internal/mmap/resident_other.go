//go:build !linux

package mmap

// Resident returns data itself where there are no transparent huge pages
// to copy it into; release does nothing.
func Resident(data []byte) ([]byte, func() error, error) {
	return data, func() error { return nil }, nil
}

// Huge returns n zero bytes of the heap where there are no transparent
// huge pages; release does nothing.
func Huge(n int) ([]byte, func() error, error) {
	return make([]byte, n), func() error { return nil }, nil
}
