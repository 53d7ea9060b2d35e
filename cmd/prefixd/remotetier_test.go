package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// TestRemoteTierFlags: --remote-tier takes redis:// and rediss:// URLs
// and refuses others without quoting the password; --remote-tier-ttl
// defaults to an hour and must be positive.
func TestRemoteTierFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--remote-tier", "redis://127.0.0.1:6379/0"}, true},
		{[]string{"--remote-tier", "rediss://:s3cret@cache.internal:6380/2", "--remote-tier-ttl", "24h"}, true},
		{[]string{"--remote-tier", "http://:s3cret@cache.internal/0"}, false},
		{[]string{"--remote-tier", "redis://:s3cret@cache.internal:6379/notadb"}, false},
		{[]string{"--remote-tier", "redis://127.0.0.1:6379/0", "--remote-tier-ttl", "0s"}, false},
	} {
		var r remoteTierOptions
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		r.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if len(c.args) == 0 && r.ttl != time.Hour {
			t.Fatalf("default --remote-tier-ttl %v", r.ttl)
		}
		err := r.check()
		if (err == nil) != c.ok || err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%v: %v", c.args, err)
		}
	}
}
