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
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/prefixd/prefixd/server"
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
// status. Asking for help or the version is no error: the answer goes to
// stdout with status 0, as Go's own tools do; a missing or unknown
// subcommand prints the usage to stderr with status 2.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return 0
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return 0
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(stderr, "prefixd help: unknown subcommand %q\n", args[1])
			usage(stderr)
			return 2
		}
		return commands[args[1]].run([]string{"-h"}, stdout, stderr)
	case "version", "-version", "--version":
		info, ok := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, versionLine(info, ok))
		return 0
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
	b.WriteString("  help       show a subcommand's flags: prefixd help <subcommand>\n")
	b.WriteString("  version    print the version\n")
	io.WriteString(w, b.String())
}

// buildVersion reads the build's version from info (ok: whether the
// binary carries it): the module version ("(devel)" for a build from a
// source tree), the VCS revision and whether the tree had local changes
// when the go command recorded them, and the Go version; commitTime is the
// revision's commit time, if recorded.
func buildVersion(info *debug.BuildInfo, ok bool) (v server.BuildVersion, commitTime string) {
	if !ok {
		return server.BuildVersion{Version: "(no build information)", GoVersion: runtime.Version()}, ""
	}
	v = server.BuildVersion{Version: info.Main.Version, GoVersion: info.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			commitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v, commitTime
}

// runningVersion is buildVersion of this binary, for GET /version.
func runningVersion() server.BuildVersion {
	v, _ := buildVersion(debug.ReadBuildInfo())
	return v
}

// versionLine describes the build on one line: buildVersion's fields, the
// VCS ones in parentheses.
func versionLine(info *debug.BuildInfo, ok bool) string {
	v, commitTime := buildVersion(info, ok)
	var vcs []string
	for _, f := range []string{v.Revision, commitTime} {
		if f != "" {
			vcs = append(vcs, f)
		}
	}
	if v.Modified {
		vcs = append(vcs, "modified")
	}
	line := "prefixd " + v.Version
	if len(vcs) > 0 {
		line += " (" + strings.Join(vcs, ", ") + ")"
	}
	return line + " " + v.GoVersion
}

// errHelp is returned by parseFlags after printing a subcommand's help:
// the subcommand stops and exits 0.
var errHelp = errors.New("help printed")

// parseFlags parses a subcommand's flags. Help (-h, --help) is printed to
// stdout and answered with errHelp. A bad flag is a usageError of one
// line naming the flag and what it wants, without the flag package's
// dump of every flag. Arguments that are not flags are refused.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	restore := explainValues(fs)
	err := fs.Parse(args)
	restore()
	switch {
	case errors.Is(err, flag.ErrHelp):
		name := strings.TrimPrefix(fs.Name(), "prefixd ")
		fmt.Fprintf(stdout, "usage: %s [flags]\n\n%s\n\nflags:\n", fs.Name(), commands[name].summary)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return errHelp
	case err != nil:
		return usagef("%v (%s -h lists the flags)", err, fs.Name())
	case fs.NArg() > 0:
		return usagef("unexpected argument %q%s", fs.Arg(0), flagHint(fs, fs.Arg(0)))
	}
	return nil
}

// explainValues wraps every flag's value so that a value the flag package
// cannot parse says what the flag wants ("want an integer") instead of
// "parse error"; the returned function restores the values, so help text
// still shows each flag's type and default.
func explainValues(fs *flag.FlagSet) (restore func()) {
	var saved []*flag.Flag
	var values []flag.Value
	fs.VisitAll(func(f *flag.Flag) {
		saved, values = append(saved, f), append(values, f.Value)
		f.Value = explained{f.Value}
	})
	return func() {
		for i, f := range saved {
			f.Value = values[i]
		}
	}
}

// explained is a flag.Value whose parse errors name the kind of value
// wanted.
type explained struct{ flag.Value }

// IsBoolFlag keeps a boolean flag usable without a value (--cached-first).
func (e explained) IsBoolFlag() bool { return takesNoValue(e.Value) }

// takesNoValue reports whether a flag of value v is given without one
// (--cached-first), as the flag package decides.
func takesNoValue(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (e explained) Set(s string) error {
	err := e.Value.Set(s)
	if err == nil {
		return nil
	}
	g, ok := e.Value.(flag.Getter)
	if !ok {
		return err // our own flag types say why themselves
	}
	switch g.Get().(type) {
	case bool:
		return errors.New("want true or false")
	case int, int64:
		return errors.New("want an integer")
	case uint, uint64:
		return errors.New("want a non-negative integer")
	case float64:
		return errors.New("want a number")
	case time.Duration:
		return errors.New("want a duration such as 500ms, 30s, 5m or 1h")
	default:
		return err
	}
}

// exitCode maps a subcommand's error to its exit status, printing it on
// one line.
func exitCode(name string, err error, stderr io.Writer) int {
	code := 1
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, new(usageError)):
		code = 2
	}
	// errors.Join (a config checker's several complaints) separates its
	// parts with newlines; a log line or a terminal wants one line.
	fmt.Fprintf(stderr, "prefixd %s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", "; "))
	return code
}

// usageError marks an error caused by the command line; it exits with 2.
type usageError struct{ error }

// Unwrap returns the underlying error.
func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError formatted like fmt.Errorf.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }
