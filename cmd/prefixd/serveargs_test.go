package main

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/server"
)

// TestServeVLLMStyleArgs: serve takes the model as its one argument
// (vLLM) or -m (llama-server), wherever it stands among the flags, and
// --host and --port replace --addr's parts; the environment sets none of
// those (Kubernetes' PREFIXD_PORT=tcp://... is warned of, not read).
func TestServeVLLMStyleArgs(t *testing.T) {
	cases := []struct {
		args        []string
		env         map[string]string
		model, addr string
		cachedFirst bool
	}{
		{args: []string{"m.gguf", "--host", "127.0.0.2", "--port", "8000"}, model: "m.gguf", addr: "127.0.0.2:8000"},
		{args: []string{"-m", "m.gguf", "--port", "0"}, model: "m.gguf", addr: "127.0.0.1:0"},
		{args: []string{"--port", "9000", "m.gguf", "--threads", "1"}, model: "m.gguf", addr: "127.0.0.1:9000"},
		{args: []string{"--cached-first", "m.gguf"}, model: "m.gguf", addr: "127.0.0.1:8080", cachedFirst: true},
		{args: []string{"--addr", "127.0.0.3:1234", "--host", "::1"}, addr: "[::1]:1234"},
		{args: []string{"--model=m.gguf", "--addr", "127.0.0.1:7"}, model: "m.gguf", addr: "127.0.0.1:7"},
		{args: nil, env: map[string]string{"PREFIXD_PORT": "tcp://10.0.0.1:8000", "PREFIXD_HOST": "x", "PREFIXD_M": "y"},
			addr: "127.0.0.1:8080"},
	}
	for _, c := range cases {
		o, err := parseServe(c.args, c.env, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if o.modelPath != c.model || o.addr != c.addr || o.cachedFirst != c.cachedFirst {
			t.Errorf("%q: model %q, addr %q, cached-first %v; want %q, %q, %v", c.args, o.modelPath, o.addr, o.cachedFirst, c.model, c.addr, c.cachedFirst)
		}
		for k := range c.env {
			if !slices.Contains(o.unknownEnv, k) {
				t.Errorf("%s is not warned of as naming no flag: %q", k, o.unknownEnv)
			}
		}
	}
}

// TestServeArgsRefused: a model given twice, a second argument, a bad
// port, and a flag spelt without its dashes are usage errors that say
// what was meant.
func TestServeArgsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"a.gguf", "b.gguf"}, `unexpected argument "b.gguf": the model is "a.gguf", and the rest are flags (prefixd serve -h lists the flags)`},
		{[]string{"a.gguf", "port", "8000"}, `unexpected argument "port": the model is "a.gguf", and the rest are flags (did you mean --port?)`},
		{[]string{"a.gguf", "--model", "b.gguf"}, `the model is given twice: as the argument "a.gguf" and by --model`},
		{[]string{"-m=b.gguf", "a.gguf"}, `the model is given twice: as the argument "a.gguf" and by -m=b.gguf`},
		{[]string{"--port", "http"}, `--port "http": want a port number, 0 to 65535`},
		{[]string{"--port", "65536"}, `--port "65536": want a port number`},
		{[]string{"--addr", "nocolon", "--port", "1"}, `--addr "nocolon" with --host or --port: want host:port`},
	} {
		_, err := parseServe(c.args, nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error containing %q", c.args, err, c.want)
		}
	}
	// Other subcommands take flags only; the message says so, or names
	// the flag that was meant.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "hello"}, `unexpected argument "hello" (prefixd generate -h lists the flags)`},
		{[]string{"generate", "prompt", "hello"}, `unexpected argument "prompt" (did you mean --prompt?)`},
	} {
		code, _, stderr := runArgs(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestServePositionalModelAndVersion serves a model file given vLLM's
// way, on --host and --port, and asks GET /version, which reports this
// binary's build as `prefixd version` does.
func TestServePositionalModelAndVersion(t *testing.T) {
	path := sharedModel(t, "stories260K.bin")
	base, stop, log := startServeLog(t, nil, path, "--host", "127.0.0.1", "--port", "0", "--blocks", "64", "--threads", "1")
	if ids := modelIDs(t, base); len(ids) != 1 || ids[0] != "stories260K" {
		t.Errorf("/v1/models ids %q, want [stories260K]", ids)
	}
	var v server.BuildVersion
	getJSON(t, base+"/version", &v)
	if want := runningVersion(); v != want || v.Version == "" {
		t.Errorf("/version %+v, want %+v", v, want)
	}
	if c := stop(); c != 0 {
		t.Fatalf("exit %d\n%s", c, log.String())
	}
}
