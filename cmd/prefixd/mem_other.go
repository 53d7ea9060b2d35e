//go:build !linux

package main

// physicalMemory returns 0 (unknown) off Linux: serve then does not check
// the KV pool against the machine's memory.
func physicalMemory() int64 { return 0 }
