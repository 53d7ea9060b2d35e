package main

import (
	"io"
	"testing"
)

// TestMaxTenantPriorityFlag: --max-tenant-priority defaults to 100, takes
// a positive int32, and is refused otherwise.
func TestMaxTenantPriorityFlag(t *testing.T) {
	o, err := parseServe(nil, nil, io.Discard)
	if err != nil || o.maxTenantPriority != 100 {
		t.Fatalf("default: %v %d", err, o.maxTenantPriority)
	}
	if o, err = parseServe([]string{"--max-tenant-priority", "7"}, nil, io.Discard); err != nil || o.maxTenantPriority != 7 {
		t.Fatalf("7: %v %d", err, o.maxTenantPriority)
	}
	for _, bad := range []string{"0", "-1", "2147483648"} {
		if _, err := parseServe([]string{"--max-tenant-priority", bad}, nil, io.Discard); err == nil {
			t.Errorf("--max-tenant-priority %s accepted", bad)
		}
	}
}
