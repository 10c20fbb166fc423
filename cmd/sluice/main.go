// Command sluice shows what the sluice rate limiters do and lets you try
// them against your own Redis.
//
//	sluice demo                    a simulated fleet on an embedded Redis, about 10 s
//	sluice load [flags]            the demo's engine with your own settings
//	sluice inspect --redis URL KEY a key's buckets and totals in Redis, read-only
//	sluice serve [flags]           an HTTP server behind the middleware, for curl
//	sluice cleanup --redis URL     one pass of the cleanup loop over a prefix
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
	"strings"
	"syscall"

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
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"demo", "[--redis URL]", "see it work: a simulated fleet on an embedded Redis (about 10 s)", demoCmd},
	{"load", "[flags]", "the demo's engine with your own settings, against your own Redis", loadCmd},
	{"inspect", "--redis URL [--prefix P] [--strategy abs|sup] KEY", "show a key's buckets and totals in Redis, read-only", inspectCmd},
	{"serve", "[--listen ADDR] [--redis URL] [--rate N/UNIT] [--by ip|header:NAME]", "an HTTP server behind the rate-limit middleware: see 200, 429 and the headers with curl", serveCmd},
	{"cleanup", "--redis URL [--prefix P] [--window W] [--dry-run] [--rate N]", "one pass of the cleanup loop: delete dead hashes, give TTL-less keys a TTL", cleanupCmd},
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
			fmt.Fprintf(stderr, "sluice help: unknown command %q\n\n", args[1])
			usage(stderr)
			return exitUsage
		}
		usage(stdout)
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", name)
		usage(stderr)
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
		fmt.Fprintf(w, "  sluice %s %s\n        %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'sluice <command> --help' for the flags of a command.\n")
	fmt.Fprintf(w, "Exit status: 0 success, 1 failure (Redis unreachable, failed decisions, a limit exceeded), 2 bad usage.\n")
}

// newFlagSet returns a flag set whose usage lists flags as --name.
func newFlagSet(name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: sluice %s %s\n\n%s\n", name, args, about)
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
// (the error and usage on stderr, status 2).
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
		io.WriteString(stderr, buf.String())
		return exitUsage, true
	}
	return exitOK, false
}

// usageError reports a bad argument found after parsing: one line and the
// command's usage on stderr, status 2.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.SetOutput(stderr)
	fs.Usage()
	return exitUsage
}
