//go:build unix && !linux

package mmap

// Resident is File where there are no transparent huge pages to copy the
// file into.
func Resident(path string) ([]byte, func([]byte) error, error) { return File(path) }
