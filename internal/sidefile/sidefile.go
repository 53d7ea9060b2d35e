// Package sidefile reads the small files that come beside a model or
// configure prefixd (config.json, tokenizer.json, a chat template, a
// config file) with a bound on their size. A model folder is input like
// any other: config.json linked to /dev/zero, or a named pipe, must be
// refused rather than read until memory runs out or forever.
package sidefile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Sizes for the limits of callers.
const (
	KiB = 1 << 10
	MiB = 1 << 20
)

// Read returns the contents of the regular file at path (a symbolic link
// is followed), refusing anything else (a device, a pipe, a directory)
// and a file of more than limit bytes. Every error names path; one for a
// missing file wraps fs.ErrNotExist.
func Read(path string, limit int64) ([]byte, error) {
	// Stat before opening: opening a named pipe would block until a
	// writer came.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := CheckRegular(path, st); err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have grown, or been replaced, since Stat: the reader
	// stops one byte past the limit either way.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(path, limit)
	}
	return b, nil
}

// CheckRegular refuses st, the information of path, unless it describes
// a regular file.
func CheckRegular(path string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (mode %v)", path, st.Mode().Type())
	}
	return nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s is larger than %s, the most read for it", path, Size(limit))
}

// Size writes a limit in the largest binary unit that divides it: 64 MiB,
// 1 KiB, 100 bytes.
func Size(n int64) string {
	switch {
	case n >= MiB && n%MiB == 0:
		return fmt.Sprintf("%d MiB", n/MiB)
	case n >= KiB && n%KiB == 0:
		return fmt.Sprintf("%d KiB", n/KiB)
	}
	return fmt.Sprintf("%d bytes", n)
}
