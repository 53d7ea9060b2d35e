package main

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// freeMemory is the memory new allocations may take: bytes, and the
// figure that set it, for the start-up log.
type freeMemory struct {
	bytes  int64
	source string
}

// readFile reads a whole file by path: os.ReadFile, or a test's fake
// files.
type readFile func(name string) ([]byte, error)

// cgroupRoot is where Linux mounts the cgroup v2 hierarchy.
const cgroupRoot = "/sys/fs/cgroup"

// availableMemory returns the memory the machine leaves to new
// allocations: /proc/meminfo's MemAvailable, lowered to the headroom
// (memory.max less memory.current) of this process's cgroup v2, or of a
// cgroup above it, where one sets a lower limit, since operators run
// prefixd in containers whose limit MemAvailable does not see. Page cache
// charged to a cgroup counts in memory.current, so the cgroup figure errs
// low. It fails where there is no MemAvailable (not Linux) or a file
// reads as something other than the kernel writes; a process outside any
// cgroup v2 (cgroup v1 only) gets MemAvailable.
func availableMemory(read readFile) (freeMemory, error) {
	b, err := read("/proc/meminfo")
	if err != nil {
		return freeMemory{}, err
	}
	avail, err := parseMemAvailable(b)
	if err != nil {
		return freeMemory{}, fmt.Errorf("/proc/meminfo: %w", err)
	}
	free := freeMemory{avail, "MemAvailable"}
	b, err = read("/proc/self/cgroup")
	if err != nil {
		return free, nil
	}
	dir, ok := cgroupV2Path(b)
	for ok {
		limit, errLimit := read(path.Join(cgroupRoot, dir, "memory.max"))
		used, errUsed := read(path.Join(cgroupRoot, dir, "memory.current"))
		// The root cgroup, and one without the memory controller, has
		// neither file: no limit there.
		if errLimit == nil && errUsed == nil {
			room, limited, err := cgroupHeadroom(limit, used)
			if err != nil {
				return freeMemory{}, fmt.Errorf("cgroup %s: %w", dir, err)
			}
			if limited && room < free.bytes {
				free = freeMemory{room, "cgroup " + dir + " memory.max"}
			}
		}
		ok = dir != "/"
		dir = path.Dir(dir)
	}
	return free, nil
}

// parseMemAvailable returns the MemAvailable line of /proc/meminfo in
// bytes (the file counts kB, which are KiB).
func parseMemAvailable(meminfo []byte) (int64, error) {
	for line := range strings.Lines(string(meminfo)) {
		rest, ok := strings.CutPrefix(line, "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("MemAvailable line %q is not a count of kB", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > (1<<62)>>10 {
			return 0, fmt.Errorf("MemAvailable %q is not a count of kB", f[0])
		}
		return kb << 10, nil
	}
	return 0, errors.New("no MemAvailable line (Linux before 3.14?)")
}

// cgroupV2Path returns this process's cgroup v2 path from
// /proc/self/cgroup: the line of hierarchy 0 with no controllers,
// "0::/path". ok is false for a process in no cgroup v2.
func cgroupV2Path(procCgroup []byte) (dir string, ok bool) {
	for line := range strings.Lines(string(procCgroup)) {
		// The path may hold colons: only the first two separate.
		p, found := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::")
		if found && strings.HasPrefix(p, "/") {
			return path.Clean(p), true // Clean drops any ".." above the root
		}
	}
	return "", false
}

// cgroupHeadroom returns memory.max less memory.current, at least 0;
// limited is false where memory.max is "max" (no limit).
func cgroupHeadroom(memoryMax, memoryCurrent []byte) (room int64, limited bool, err error) {
	limit := string(bytes.TrimSpace(memoryMax))
	if limit == "max" {
		return 0, false, nil
	}
	maxBytes, err := strconv.ParseInt(limit, 10, 64)
	if err != nil || maxBytes < 0 {
		return 0, false, fmt.Errorf("memory.max %q is not a byte count or max", limit)
	}
	used, err := strconv.ParseInt(string(bytes.TrimSpace(memoryCurrent)), 10, 64)
	if err != nil || used < 0 {
		return 0, false, fmt.Errorf("memory.current %q is not a byte count", bytes.TrimSpace(memoryCurrent))
	}
	return maxBytes - min(used, maxBytes), true, nil
}
