//go:build !unix

package mmap

import "os"

// File reads path into memory where there is no mmap; unmap does
// nothing.
func File(path string) ([]byte, func([]byte) error, error) {
	data, err := os.ReadFile(path)
	return data, func([]byte) error { return nil }, err
}
