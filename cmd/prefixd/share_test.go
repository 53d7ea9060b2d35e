package main

import (
	"io"
	"testing"
)

// TestNamespaceCacheShareFlag: --namespace-cache-share reaches the
// engine's configuration and is refused outside [0, 1].
func TestNamespaceCacheShareFlag(t *testing.T) {
	o, err := parseServe([]string{"--namespace-cache-share", "0.5"}, nil, io.Discard)
	if err != nil || o.nsCacheShare != 0.5 {
		t.Fatalf("%v %+v", err, o)
	}
	for _, bad := range []string{"-0.1", "1.5"} {
		if _, err := parseServe([]string{"--namespace-cache-share", bad}, nil, io.Discard); err == nil {
			t.Errorf("--namespace-cache-share %s accepted", bad)
		}
	}
}
