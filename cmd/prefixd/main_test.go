package main

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelp: asking for help is no error. It goes to stdout and exits 0,
// for the binary and every subcommand, however it is asked for.
func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"-h"}, []string{"usage: prefixd <subcommand>", "serve", "ttl-sim", "version"}},
		{[]string{"--help"}, []string{"usage: prefixd <subcommand>"}},
		{[]string{"help"}, []string{"usage: prefixd <subcommand>"}},
		{[]string{"help", "serve"}, []string{"usage: prefixd serve [flags]", "run the HTTP daemon", "-served-model-name", "(default 16)"}},
		{[]string{"serve", "-h"}, []string{"usage: prefixd serve [flags]", "-addr string"}},
		{[]string{"serve", "--help"}, []string{"-drain-timeout duration", "(default 30s)", "-cached-first\n"}},
		{[]string{"generate", "-h"}, []string{"usage: prefixd generate [flags]", "-prompt-ids"}},
		{[]string{"help", "generate"}, []string{"usage: prefixd generate [flags]"}},
		{[]string{"bench", "--help"}, []string{"usage: prefixd bench [flags]", "-workloads"}},
		{[]string{"ttl-sim", "-h"}, []string{"usage: prefixd ttl-sim [flags]", "-ttls"}},
		{[]string{"route-sim", "-h"}, []string{"usage: prefixd route-sim [flags]", "-event-delay"}},
		{[]string{"gen-model", "--help"}, []string{"usage: prefixd gen-model [flags]", "-preset"}},
		// Help wins over flags that would fail.
		{[]string{"serve", "--threads", "-5", "-h"}, []string{"usage: prefixd serve"}},
	}
	for _, c := range cases {
		code, stdout, stderr := runArgs(c.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", c.args, w, stdout)
			}
		}
	}
	if code, stdout, stderr := runArgs("help", "nope"); code != 2 || stdout != "" || !strings.Contains(stderr, `unknown subcommand "nope"`) {
		t.Errorf("help nope: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBadFlagOneLine: a flag the parser refuses is one line on stderr
// naming the flag and what it wants, not the whole usage.
func TestBadFlagOneLine(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"generate", "--max-tokens", "x"}, `invalid value "x" for flag -max-tokens: want an integer`},
		{[]string{"generate", "--temperature", "hot"}, "-temperature: want a number"},
		{[]string{"generate", "--seed", "-1"}, "-seed: want a non-negative integer"},
		{[]string{"generate", "--nope"}, "flag provided but not defined: -nope (prefixd generate -h lists the flags)"},
		{[]string{"bench", "--soak", "long"}, "-soak: want a duration"},
		{[]string{"bench", "--threads", "100000"}, "--threads 100000: want 0"},
		{[]string{"ttl-sim", "--block-size", "1.5"}, "-block-size: want an integer"},
		{[]string{"serve", "--kv-bytes", "lots"}, `"lots" is not a size`},
		{[]string{"serve", "--addr"}, "flag needs an argument: -addr"},
	}
	for _, c := range cases {
		code, stdout, stderr := runArgs(c.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.msg) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line with %q", c.args, code, stdout, stderr, c.msg)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version"} {
		code, stdout, stderr := runArgs(arg)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "prefixd ") || strings.Count(stdout, "\n") != 1 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, stdout, stderr)
		}
	}
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/prefixd/prefixd", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.time", Value: "2026-11-20T10:00:00Z"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "0123abcd"}}}
	if got, want := versionLine(info, true), "prefixd v1.2.3 (0123abcd, 2026-11-20T10:00:00Z, modified) go1.26.0"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	info.Settings, info.Main.Version = []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}}, ""
	if got, want := versionLine(info, true), "prefixd (devel) go1.26.0"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	if got := versionLine(nil, false); !strings.HasPrefix(got, "prefixd (no build information) go") {
		t.Errorf("versionLine without build info = %q", got)
	}
}

// TestExitCodeOneLine: an error of several lines (errors.Join, as a config
// checker may return) is printed on one line, with the status of its kind.
func TestExitCodeOneLine(t *testing.T) {
	cases := []struct {
		err  error
		code int
		want string
	}{
		{nil, 0, ""},
		{errHelp, 0, ""},
		{usagef("engine: %w", errors.Join(errors.New("NumBlocks too small"), errors.New("MaxBatchTokens too small"))), 2,
			"prefixd serve: engine: NumBlocks too small; MaxBatchTokens too small\n"},
		{errors.Join(errors.New("a"), errors.New("b")), 1, "prefixd serve: a; b\n"},
	}
	for _, c := range cases {
		var stderr strings.Builder
		if code := exitCode("serve", c.err, &stderr); code != c.code || stderr.String() != c.want {
			t.Errorf("exitCode(%v) = %d, %q; want %d, %q", c.err, code, stderr.String(), c.code, c.want)
		}
	}
}
