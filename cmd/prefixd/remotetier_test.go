package main

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// TestRemoteTierFlags: --remote-tier takes redis:// and rediss:// URLs
// and refuses others without quoting the password; --remote-tier-ttl
// defaults to an hour and must be positive; --remote-tier-lease-wait
// defaults to 30 s, 0 turning the lease off; --remote-tier-ca needs a
// rediss:// URL.
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
		{[]string{"--remote-tier", "redis://127.0.0.1:6379/0", "--remote-tier-lease-wait", "0s"}, true},
		{[]string{"--remote-tier", "redis://127.0.0.1:6379/0", "--remote-tier-lease-wait", "-1s"}, false},
		{[]string{"--remote-tier", "redis://:s3cret@127.0.0.1:6379/0", "--remote-tier-ca", "ca.pem"}, false},
		{[]string{"--remote-tier-ca", "ca.pem"}, false},
	} {
		var r remoteTierOptions
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		r.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if len(c.args) == 0 && (r.ttl != time.Hour || r.wait != 30*time.Second) {
			t.Fatalf("default --remote-tier-ttl %v, --remote-tier-lease-wait %v", r.ttl, r.wait)
		}
		err := r.check()
		if (err == nil) != c.ok || err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%v: %v", c.args, err)
		}
	}
}

// TestRemoteTierSecrets: a bad --remote-tier from the environment is
// refused without its value (it may hold a password), and the password
// variable is not warned about as one that names no flag.
func TestRemoteTierSecrets(t *testing.T) {
	var out strings.Builder
	_, err := parseServe(nil, map[string]string{"PREFIXD_REMOTE_TIER": "redis://:s3cret@h:1/x"}, &out)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v", err)
	}
	o, err := parseServe(nil, map[string]string{"PREFIXD_REMOTE_TIER_PASSWORD": "s3cret"}, &out)
	if err != nil || len(o.unknownEnv) != 0 {
		t.Fatalf("%v, unknown %v", err, o.unknownEnv)
	}
}
