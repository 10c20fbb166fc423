// Command sluice shows what the sluice rate limiters do and lets you try
// them against your own Redis.
//
//	sluice demo                    a simulated fleet on an embedded Redis, about 10 s
//	sluice load [flags]            the demo's engine with your own settings
//	sluice inspect --redis URL KEY a key's buckets and totals in Redis, read-only
//	sluice serve [flags]           an HTTP server behind the middleware, for curl
//	sluice cleanup --redis URL     one pass of the cleanup loop over a prefix
//	sluice version                 the version this binary was built from
//
// Every command takes --help. Exit status: 0 success, 1 failure (Redis
// unreachable, decisions that failed, a limit exceeded), 2 bad usage.
// docs/cli.md describes the commands and how the accuracy report is
// computed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs dial failures on its own; the commands report every
	// error themselves, in one line.
	redis.SetLogger(quiet{})
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// run is the whole command: it parses args, writes to stdout and stderr
// and returns the exit status. SIGINT and SIGTERM stop a running workload
// cleanly, with the report so far.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// synopsis is each command's arguments, which both the top-level usage and
// the command's own --help print.
var synopsis = map[string]string{
	"demo":    "[--redis URL] [--duration D] [--window W] [--seed N]",
	"load":    "[flags]",
	"inspect": "--redis URL [--prefix P] [--strategy absolute|suppressed] [--limit NAME] [--window W [--bucket B]] KEY",
	"serve":   "[--listen ADDR] [--redis URL] [--rate N/UNIT] [--window D] [--by ip|header:NAME] [--trust CIDRS [--proxy-header NAME]] [--legacy-headers]",
	"cleanup": "--redis URL [--cluster] [--prefix P] [--window W [--bucket B]] [--dry-run] [--keys-per-second N] [--trim-threshold N]",
	"version": "",
}

var commands = []command{
	{"demo", "see it work: a simulated fleet on an embedded Redis (about 10 s)", demoCmd},
	{"load", "the demo's engine with your own settings, against your own Redis", loadCmd},
	{"inspect", "show a key's buckets and totals in Redis, read-only", inspectCmd},
	{"serve", "an HTTP server behind the rate-limit middleware: see 200, 429 and the headers with curl", serveCmd},
	{"cleanup", "one pass of the cleanup loop: delete dead hashes, give TTL-less keys a TTL", cleanupCmd},
	{"version", "print the version of sluice (also --version)", versionCmd},
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && name == "help" {
			if c := lookup(args[1]); c != nil {
				return c.run(ctx, []string{"--help"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "sluice help: unknown command %q\n", args[1])
			fmt.Fprintf(stderr, "Run 'sluice help' for the list of commands.\n")
			return exitUsage
		}
		usage(stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	c := lookup(name)
	if c == nil {
		if strings.HasPrefix(name, "-") {
			fmt.Fprintf(stderr, "sluice: unknown flag %s: flags go after the command\n", name)
		} else {
			fmt.Fprintf(stderr, "sluice: unknown command %q\n", name)
		}
		fmt.Fprintf(stderr, "Run 'sluice help' for the list of commands.\n")
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "sluice: sliding-window rate limiting, in one process or across a fleet that shares Redis.\n\n")
	fmt.Fprintf(w, "Usage:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace("sluice "+c.name+" "+synopsis[c.name]), c.summary)
	}
	fmt.Fprintf(w, "\nRun 'sluice <command> --help' for the flags of a command.\n")
	fmt.Fprintf(w, "Exit status: 0 success, 1 failure (Redis unreachable, failed decisions, a limit exceeded), 2 bad usage.\n")
}

// newFlagSet returns the flag set of the command name, whose usage prints
// the command's synopsis (from commands), about and its flags as --name.
func newFlagSet(name, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: %s\n\n%s\n", strings.TrimSpace("sluice "+name+" "+synopsis[name]), about)
		printFlags(w, fs)
	}
	return fs
}

func printFlags(w io.Writer, fs *flag.FlagSet) {
	type line struct{ left, right string }
	var lines []line
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		// A usage that starts with "[ARG] " names the argument itself.
		if strings.HasPrefix(f.Usage, "[") {
			if i := strings.Index(f.Usage, "] "); i > 0 {
				arg, help = f.Usage[1:i], f.Usage[i+2:]
			}
		}
		left := "--" + f.Name
		if arg != "" {
			left += " " + arg
		}
		if !isZeroDefault(f) {
			help += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		width = max(width, len(left))
		lines = append(lines, line{left, help})
	})
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFlags:\n")
	for _, l := range lines {
		fmt.Fprintf(w, "  %-*s  %s\n", width, l.left, l.right)
	}
}

func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// parse parses args with fs. It returns done with the exit status when the
// command must stop here: --help (usage on stdout, status 0) or a bad flag
// (one line naming the command and the flag, and a hint to --help, on
// stderr; status 2).
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (status int, done bool) {
	var buf strings.Builder
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(stdout, buf.String())
		return exitOK, true
	case err != nil:
		return usageError(fs, stderr, "%s", flagError(fs, err)), true
	}
	return exitOK, false
}

// flagError rewrites the flag package's error in the command's terms: flags
// are written --name.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + dashes(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return dashes(name) + " needs a value"
	}
	// invalid value "x" for flag -name: parse error
	if v, rest, ok := strings.Cut(msg, " for flag "); ok && strings.HasPrefix(v, "invalid ") {
		name, why, _ := strings.Cut(rest, ": ")
		msg := dashes(name) + ": " + strings.TrimPrefix(v, "invalid value ") + " is not valid: " + why
		if f := fs.Lookup(strings.TrimLeft(name, "-")); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, ok := g.Get().(time.Duration); ok {
					msg += "; want a duration such as 500ms, 10s, 1m or 1h30m"
				}
			}
		}
		return msg
	}
	return msg
}

// dashes writes a flag as --name, however it was typed.
func dashes(name string) string { return "--" + strings.TrimLeft(name, "-") }

// usageError reports a bad argument: one line naming the command and what
// is wrong, then a hint to --help, on stderr; status 2.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintln(stderr, plain(fs.Name()+": "+fmt.Sprintf(format, args...)))
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", fs.Name())
	return exitUsage
}

// plain drops the "sluice: " that the library's sentinel errors start with
// from a message that already starts with the command's own prefix
// ("sluice load: "), which says where it comes from.
func plain(msg string) string {
	cmd, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		return strings.ReplaceAll(msg, "sluice: ", "")
	}
	return cmd + ": " + strings.ReplaceAll(rest, "sluice: ", "")
}

// versionCmd prints the module's version from the build information: a
// tagged version when built with go install …@version, else (devel) and the
// VCS revision when the build recorded one.
func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "Prints the version of sluice this binary was built from, and the Go version.")
	if st, done := parse(fs, args, stdout, stderr); done {
		return st
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}

func versionLine() string {
	version, extra := "(devel)", ""
	info, ok := debug.ReadBuildInfo()
	if ok {
		if v := info.Main.Version; v != "" {
			version = v
		}
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if rev != "" && version == "(devel)" {
			extra = fmt.Sprintf(" (revision %.12s%s)", rev, modified)
		}
	}
	return fmt.Sprintf("sluice %s%s, %s %s/%s", version, extra, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
