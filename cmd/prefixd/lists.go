package main

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
)

// parseDurations parses a comma-separated list of durations ("5s,1m").
func parseDurations(s string) ([]time.Duration, error) {
	var out []time.Duration
	for f := range splitComma(s) {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("bad duration %q", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range splitComma(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad positive integer %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// splitComma yields the non-empty, trimmed fields of a comma-separated
// list.
func splitComma(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for f := range strings.SplitSeq(s, ",") {
			if f = strings.TrimSpace(f); f != "" && !yield(f) {
				return
			}
		}
	}
}
