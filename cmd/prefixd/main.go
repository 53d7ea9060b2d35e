// Command prefixd serves LLM generation with a paged, prefix-cached K/V
// store. Each subcommand lives in its own file and registers itself with
// register from an init function; `prefixd generate` runs one generation
// offline, without the server.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/prefixd/prefixd/model"
)

// command is one subcommand: run gets the arguments after its name and
// returns the process exit status (0 ok, 1 failure, 2 usage error).
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands holds every registered subcommand by name; it is written only
// by init functions.
var commands = map[string]command{}

// register adds a subcommand; it panics on a duplicate name, a programming
// error.
func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	if _, dup := commands[name]; dup {
		panic("prefixd: subcommand " + name + " registered twice")
	}
	commands[name] = command{summary: summary, run: run}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0] and returns its exit
// status.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "prefixd: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("usage: prefixd <subcommand> [flags]\n\nsubcommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	io.WriteString(w, b.String())
}

// exitCode maps a subcommand's error to its exit status, printing it.
func exitCode(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 2
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "prefixd %s: %v\n", name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "prefixd %s: %v\n", name, err)
		return 1
	}
}

// usageError marks an error caused by the command line; it exits with 2.
type usageError struct{ error }

// Unwrap returns the underlying error.
func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError formatted like fmt.Errorf.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// loadModel returns the model at path, or the built-in one for "", with
// the vocabulary of the llama2.c tokenizer file at tokenizer if given (a
// llama2.c checkpoint carries none).
func loadModel(path, tokenizer string) (*model.Model, error) {
	m := model.Builtin()
	if path != "" {
		var err error
		if m, err = model.Load(path); err != nil {
			return nil, err
		}
	}
	if tokenizer != "" {
		tk, err := model.LoadLlama2CTokenizer(tokenizer, m.Config.Vocab)
		if err != nil {
			return nil, err
		}
		m.Tokenizer = tk
	}
	return m, nil
}
