package main

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// vLLM's and llama-server's spellings of serve's command line, so that
// `prefixd serve MODEL --host 127.0.0.1 --port 8000` (vLLM) and
// `prefixd serve -m MODEL --port 8000` (llama-server) work as typed: the
// model as the one positional argument or -m, beside --model, and --host
// and --port, which override --addr's parts.

// commandLineOnly are serve's flags that neither the environment nor a
// config file sets (as --config sets none of itself): vLLM's and
// llama-server's spellings, which are for typing. Kubernetes gives every pod
// PREFIXD_PORT=tcp://10.0.0.1:8000 for a Service named prefixd; read as
// --port, it would stop the daemon (it is warned of as a variable that
// names no flag instead).
var commandLineOnly = map[string]bool{"host": true, "port": true, "m": true}

// listenFlags holds --host and --port as given; empty when not.
type listenFlags struct{ host, port string }

// register defines --host, --port and -m on fs; -m sets model, the
// variable of --model.
func (l *listenFlags) register(fs *flag.FlagSet, model *string) {
	fs.StringVar(&l.host, "host", "", "listen host, as vLLM and llama-server take it: replaces --addr's host")
	fs.StringVar(&l.port, "port", "", "listen port, as vLLM and llama-server take it: replaces --addr's port (0 picks a free one)")
	fs.StringVar(model, "m", "", "the same as --model, as llama-server takes it (or give the model as the one argument: prefixd serve MODEL)")
}

// addr returns addr with its host and port replaced by --host and
// --port, where given.
func (l *listenFlags) addr(addr string) (string, error) {
	if l.host == "" && l.port == "" {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usagef("--addr %q with --host or --port: want host:port (%v)", addr, err)
	}
	if l.host != "" {
		host = l.host
	}
	if l.port != "" {
		if n, err := strconv.Atoi(l.port); err != nil || n < 0 || n > 65535 {
			return "", usagef("--port %q: want a port number, 0 to 65535", l.port)
		}
		port = l.port
	}
	return net.JoinHostPort(host, port), nil
}

// modelArgument rewrites serve's arguments so that a positional model
// (vLLM's `serve MODEL`), wherever it stands among the flags, becomes
// --model MODEL: the flag package stops at the first argument that is
// not a flag, and the flags after it would be lost. A model given both
// ways, or a second positional argument, is a usage error that says what
// was meant.
func modelArgument(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	model, modelFlag := "", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			rest = append(rest, a)
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if name == "model" || name == "m" {
				modelFlag = a
			}
			if f := fs.Lookup(name); f != nil && !hasValue && !takesNoValue(f.Value) && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
			continue
		}
		if model != "" {
			return nil, usagef("unexpected argument %q: the model is %q, and the rest are flags%s", a, model, flagHint(fs, a))
		}
		model = a
	}
	switch {
	case model == "":
		return args, nil
	case modelFlag != "":
		return nil, usagef("the model is given twice: as the argument %q and by %s", model, modelFlag)
	}
	return append([]string{"--model", model}, rest...), nil
}

// flagHint says what an unexpected argument arg may have meant: a flag
// of fs spelt without its dashes ("port 8000"), or just where the flags
// are listed.
func flagHint(fs *flag.FlagSet, arg string) string {
	name, _, _ := strings.Cut(arg, "=")
	if fs.Lookup(name) != nil {
		return fmt.Sprintf(" (did you mean --%s?)", name)
	}
	return fmt.Sprintf(" (%s -h lists the flags)", fs.Name())
}
