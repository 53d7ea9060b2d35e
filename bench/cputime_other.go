//go:build !unix

package bench

import "time"

// cpuTime is 0: the process's CPU time is read on Unix only.
func cpuTime() time.Duration { return 0 }
