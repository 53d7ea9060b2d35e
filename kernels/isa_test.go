package kernels

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestNoEVEXOutsideAVX512Kernels is a static guard against the class of
// bug that killed Q5_K models on AVX2-only CPUs: Go's assembler silently
// picks the AVX-512 (EVEX) encoding for an instruction form that has no
// VEX one (an immediate shift of a memory operand, say), so an "AVX2"
// kernel faults with SIGILL on a CPU without AVX-512, while every test
// passes on one with it. It builds the daemon, then disassembles every
// assembly function of this module that the binary ships, except those
// defined in a *512*.s file (run only when the CPU has AVX-512), and
// fails on any instruction whose encoding starts with the EVEX prefix
// 0x62. It needs GNU objdump (Debian's binutils); without it the test
// skips, unless PREFIXD_REQUIRE_OBJDUMP is set, as CI sets it.
func TestNoEVEXOutsideAVX512Kernels(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		if os.Getenv("PREFIXD_REQUIRE_OBJDUMP") != "" {
			t.Fatal("objdump not found (install binutils)")
		}
		t.Skip("objdump not found (install binutils)")
	}
	if testing.Short() {
		t.Skip("builds the daemon")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	funcs, err := asmFuncs(root)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "prefixd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/prefixd")
	build.Dir = root
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	syms, err := textSymbols(bin)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, s := range syms {
		file, ok := funcs[strings.TrimSuffix(s.name, ".abi0")]
		if !ok || strings.Contains(filepath.Base(file), "512") {
			continue
		}
		checked++
		out, err := exec.Command(objdump, "-d", "--insn-width=15",
			"--start-address="+strconv.FormatUint(s.addr, 10),
			"--stop-address="+strconv.FormatUint(s.addr+s.size, 10), bin).Output()
		if err != nil {
			t.Fatalf("objdump %s: %v", s.name, err)
		}
		for _, line := range evexLines(out) {
			t.Errorf("%s (%s) has an AVX-512 (EVEX) instruction, which faults on AVX2-only CPUs:\n\t%s", s.name, file, line)
		}
	}
	// The AVX2 kernels of kernels/quant and kernels/cpu alone are dozens:
	// finding few means the symbol names no longer match and the test
	// checks nothing.
	t.Logf("checked %d assembly functions", checked)
	if checked < 20 {
		t.Fatalf("checked %d assembly functions; want the AVX2 kernels (symbol names changed?)", checked)
	}
}

// asmFuncs maps the linker name of every function defined in an amd64
// assembly file under root (package path "." name) to that file.
func asmFuncs(root string) (map[string]string, error) {
	text := regexp.MustCompile(`(?m)^TEXT\s+·(\w+)\(SB\)`)
	funcs := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_amd64.s") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := "github.com/prefixd/prefixd/" + filepath.ToSlash(rel)
		for _, m := range text.FindAllSubmatch(src, -1) {
			funcs[pkg+"."+string(m[1])] = path
		}
		return nil
	})
	return funcs, err
}

type symbol struct {
	name       string
	addr, size uint64
}

// textSymbols lists bin's text symbols with their addresses and sizes.
func textSymbols(bin string) ([]symbol, error) {
	out, err := exec.Command("go", "tool", "nm", "-size", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool nm: %w", err)
	}
	var syms []symbol
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[2] != "T" {
			continue
		}
		addr, err1 := strconv.ParseUint(f[0], 16, 64)
		size, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("go tool nm: line %q", sc.Text())
		}
		syms = append(syms, symbol{f[3], addr, size})
	}
	return syms, sc.Err()
}

// evexLines returns the lines of objdump -d output whose instruction is
// EVEX-encoded: its first byte, after any address-size or segment
// prefixes (the only ones EVEX allows before it), is 0x62.
func evexLines(dump []byte) []string {
	var bad []string
	for _, line := range strings.Split(string(dump), "\n") {
		f := strings.Split(line, "\t")
		if len(f) < 3 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		for _, b := range strings.Fields(f[1]) {
			if b == "67" || b == "2e" || b == "36" || b == "3e" || b == "26" || b == "64" || b == "65" {
				continue
			}
			if b == "62" {
				bad = append(bad, strings.TrimSpace(line))
			}
			break
		}
	}
	return bad
}
