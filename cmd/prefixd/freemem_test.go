package main

import (
	"io/fs"
	"strconv"
	"strings"
	"testing"
)

// fakeFiles serves files by path, as os.ReadFile would, from a map.
func fakeFiles(files map[string]string) readFile {
	return func(name string) ([]byte, error) {
		s, ok := files[name]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return []byte(s), nil
	}
}

// meminfo is the head of a real /proc/meminfo with MemAvailable set to kB.
func meminfo(kB string) string {
	return "MemTotal:       24684092 kB\nMemFree:        23835460 kB\nMemAvailable:   " + kB + " kB\nBuffers:           14664 kB\n"
}

func TestParseMemAvailable(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     int64
		err      string
	}{
		{"real", meminfo("24166936"), 24166936 << 10, ""},
		{"zero", "MemAvailable: 0 kB\n", 0, ""},
		{"no newline at the end", "MemFree: 1 kB\nMemAvailable: 3 kB", 3 << 10, ""},
		{"missing", "MemTotal: 5 kB\nMemFree: 3 kB\n", 0, "no MemAvailable line"},
		{"empty", "", 0, "no MemAvailable line"},
		{"not kB", "MemAvailable: 3 MB\n", 0, "not a count of kB"},
		{"no unit", "MemAvailable: 3\n", 0, "not a count of kB"},
		{"negative", "MemAvailable: -3 kB\n", 0, "not a count of kB"},
		{"not a number", "MemAvailable: lots kB\n", 0, "not a count of kB"},
		{"overflows bytes", "MemAvailable: 9223372036854775807 kB\n", 0, "not a count of kB"},
		{"largest", "MemAvailable: 4503599627370496 kB\n", 1 << 62, ""},
		// A name that only starts like it is another line.
		{"prefix of another name", "MemAvailableX: 3 kB\n", 0, "no MemAvailable line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseMemAvailable([]byte(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %d, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

// availableMemoryCases are the table of TestAvailableMemory, and the seeds
// of FuzzAvailableMemory.
var availableMemoryCases = []struct {
	name  string
	files map[string]string
	want  freeMemory
	err   string
}{
	{"no cgroup file", map[string]string{"/proc/meminfo": meminfo("1048576")}, freeMemory{1 << 30, "MemAvailable"}, ""},
	{"cgroup v1 only (as this machine)", map[string]string{
		"/proc/meminfo":     meminfo("1048576"),
		"/proc/self/cgroup": "9:name=systemd:/\n4:memory:/process_api/d330047c\n1:cpu:/\n",
	}, freeMemory{1 << 30, "MemAvailable"}, ""},
	{"host root cgroup: no memory.max", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
	}, freeMemory{1 << 30, "MemAvailable"}, ""},
	{"no limit", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
		"/sys/fs/cgroup/memory.max": "max\n", "/sys/fs/cgroup/memory.current": "1000\n",
	}, freeMemory{1 << 30, "MemAvailable"}, ""},
	{"container limit below MemAvailable", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
		"/sys/fs/cgroup/memory.max": "536870912\n", "/sys/fs/cgroup/memory.current": "134217728\n",
	}, freeMemory{384 << 20, "cgroup / memory.max"}, ""},
	{"container limit above MemAvailable", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
		"/sys/fs/cgroup/memory.max": "4294967296\n", "/sys/fs/cgroup/memory.current": "0\n",
	}, freeMemory{1 << 30, "MemAvailable"}, ""},
	{"limit on a parent (a Kubernetes pod)", map[string]string{
		"/proc/meminfo":     meminfo("1048576"),
		"/proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
		"/sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max", "/sys/fs/cgroup/kubepods/pod1/ctr/memory.current": "100",
		"/sys/fs/cgroup/kubepods/pod1/memory.max": "268435456", "/sys/fs/cgroup/kubepods/pod1/memory.current": "67108864",
		"/sys/fs/cgroup/kubepods/memory.max": "536870912", "/sys/fs/cgroup/kubepods/memory.current": "67108864",
	}, freeMemory{192 << 20, "cgroup /kubepods/pod1 memory.max"}, ""},
	{"a path with a colon", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/a:b\n",
		"/sys/fs/cgroup/a:b/memory.max": "1024", "/sys/fs/cgroup/a:b/memory.current": "0",
	}, freeMemory{1024, "cgroup /a:b memory.max"}, ""},
	{"usage above the limit", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
		"/sys/fs/cgroup/memory.max": "1000", "/sys/fs/cgroup/memory.current": "5000",
	}, freeMemory{0, "cgroup / memory.max"}, ""},
	{"bad memory.max", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
		"/sys/fs/cgroup/memory.max": "lots", "/sys/fs/cgroup/memory.current": "0",
	}, freeMemory{}, `cgroup /: memory.max "lots" is not a byte count or max`},
	{"bad memory.current", map[string]string{
		"/proc/meminfo": meminfo("1048576"), "/proc/self/cgroup": "0::/\n",
		"/sys/fs/cgroup/memory.max": "1000", "/sys/fs/cgroup/memory.current": "-1",
	}, freeMemory{}, `memory.current "-1" is not a byte count`},
	{"no meminfo (not Linux)", map[string]string{}, freeMemory{}, "not exist"},
	{"no MemAvailable", map[string]string{"/proc/meminfo": "MemTotal: 5 kB\n"}, freeMemory{}, "/proc/meminfo: no MemAvailable line"},
}

func TestAvailableMemory(t *testing.T) {
	for _, c := range availableMemoryCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := availableMemory(fakeFiles(c.files))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// FuzzAvailableMemory: whatever the files hold, availableMemory returns an
// error or a figure no larger than MemAvailable; one that a cgroup set is
// that cgroup's headroom, computed here from the files directly. Every
// level of the cgroup path reads the same memory.max and memory.current.
func FuzzAvailableMemory(f *testing.F) {
	for _, c := range availableMemoryCases {
		f.Add(c.files["/proc/meminfo"], c.files["/proc/self/cgroup"], c.files["/sys/fs/cgroup/memory.max"], c.files["/sys/fs/cgroup/memory.current"])
	}
	f.Fuzz(func(t *testing.T, meminfo, procCgroup, memMax, memCurrent string) {
		read := func(name string) ([]byte, error) {
			switch {
			case name == "/proc/meminfo":
				return []byte(meminfo), nil
			case name == "/proc/self/cgroup":
				return []byte(procCgroup), nil
			case !strings.HasPrefix(name, cgroupRoot+"/"):
				t.Fatalf("read %q, outside the files it may read", name)
			case strings.HasSuffix(name, "/memory.max"):
				return []byte(memMax), nil
			case strings.HasSuffix(name, "/memory.current"):
				return []byte(memCurrent), nil
			}
			t.Fatalf("read %q", name)
			return nil, nil
		}
		got, err := availableMemory(read)
		if err != nil {
			return
		}
		avail, err := parseMemAvailable([]byte(meminfo))
		if err != nil {
			t.Fatalf("availableMemory succeeded on a meminfo parseMemAvailable refuses: %v", err)
		}
		if got.source == "MemAvailable" {
			if got.bytes != avail {
				t.Fatalf("got %d from MemAvailable, which is %d", got.bytes, avail)
			}
			return
		}
		dir, ok := strings.CutPrefix(got.source, "cgroup ")
		if !ok || !strings.HasSuffix(dir, " memory.max") || !strings.HasPrefix(dir, "/") || strings.Contains(dir, "/../") {
			t.Fatalf("source %q", got.source)
		}
		limit, err1 := strconv.ParseInt(strings.TrimSpace(memMax), 10, 64)
		used, err2 := strconv.ParseInt(strings.TrimSpace(memCurrent), 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("a cgroup figure %+v from memory.max %q and memory.current %q", got, memMax, memCurrent)
		}
		if want := max(limit-used, 0); got.bytes != want || got.bytes >= avail {
			t.Fatalf("got %d; memory.max %d less memory.current %d is %d, MemAvailable %d", got.bytes, limit, used, want, avail)
		}
	})
}
