package mmap

import "unsafe"

// Move copies mapping (File's bytes, unmapped afterwards by unmap, or
// bytes in memory when unmap is nil) into Resident memory, and calls views
// with carry, which gives a view of mapping's bytes (a tensor's) the same
// bytes in the copy, before it unmaps mapping. It returns the copy and the
// unmap that releases it; an error unmapping the old bytes comes with the
// copy, in use by then. Where Resident copies nothing (not Linux, or no
// bytes), mapping and unmap come back as they are.
func Move(mapping []byte, unmap func([]byte) error, views func(carry func([]byte) []byte)) ([]byte, func([]byte) error, error) {
	data, release, err := Resident(mapping)
	if err != nil {
		return nil, nil, err
	}
	if len(mapping) == 0 || &data[0] == &mapping[0] {
		return mapping, unmap, nil
	}
	views(func(b []byte) []byte { return rebase(b, mapping, data) })
	if unmap != nil {
		err = unmap(mapping)
	}
	return data, func([]byte) error { return release() }, err
}

// rebase returns the bytes of to at the offset and length that b has in
// from, a slice of which b is part.
func rebase(b, from, to []byte) []byte {
	if len(b) == 0 {
		return to[:0:0]
	}
	off := int(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(unsafe.SliceData(from))))
	return to[off : off+len(b) : off+len(b)]
}
