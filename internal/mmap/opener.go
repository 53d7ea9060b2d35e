package mmap

// Opener brings the file at path into memory read-only, as File and
// Resident do; unmap releases the bytes, after which they must not be
// used.
type Opener func(path string) (data []byte, unmap func([]byte) error, err error)
