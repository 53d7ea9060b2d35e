package mmap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestResidentHugePages checks, where Linux's transparent huge pages are
// not switched off, that Resident's copy is backed by them
// (AnonHugePages in /proc/self/smaps).
func TestResidentHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || bytes.Contains(mode, []byte("[never]")) {
		t.Skipf("transparent huge pages are off here (%q, %v)", bytes.TrimSpace(mode), err)
	}
	data, release, err := Resident(bytes.Repeat([]byte{7}, 8*hugePage))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	huge, err := anonHugeBytes(uintptr(unsafe.Pointer(&data[0])))
	if err != nil {
		t.Fatal(err)
	}
	if huge == 0 {
		t.Errorf("none of the %d bytes is in huge pages (THP %q)", len(data), bytes.TrimSpace(mode))
	}
	t.Logf("%d of %d bytes in huge pages", huge, len(data))
}

// anonHugeBytes returns AnonHugePages of the mapping that holds addr.
func anonHugeBytes(addr uintptr) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			continue
		}
		if in && fields[0] == "AnonHugePages:" && len(fields) >= 2 {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no mapping holds %#x", addr)
}

// TestResidentReadOnlyAligned checks that Resident's copy starts on a huge
// page and that a write to it faults, as one to File's mapping does.
func TestResidentReadOnlyAligned(t *testing.T) {
	data, release, err := Resident(make([]byte, 3*hugePage+5))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if a := uintptr(unsafe.Pointer(&data[0])); a%hugePage != 0 {
		t.Errorf("the copy starts at %#x, not on a %d-byte page", a, hugePage)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	faulted := func(i int) (fault bool) {
		defer func() { fault = recover() != nil }()
		data[i] = 1
		return false
	}
	for _, i := range []int{0, hugePage + 7, len(data) - 1} {
		if !faulted(i) {
			t.Errorf("writing byte %d of the copy did not fault", i)
		}
	}
}
