//go:build !linux

package cpu

import "runtime"

// osYield lets other goroutines run; without sched_yield the OS threads
// share the cores as the OS decides.
func osYield() { runtime.Gosched() }
