// Command eddy is the operations tool of eddy applications.
//
//	eddy reset --brokers HOST:PORT --application-id ID [--to-datetime TIME] [--dry-run] [--state-dir DIR]
//	eddy state inspect [--json] [--verify] DIR
//	eddy state dump [--key-serde S] [--value-serde S] [--task ID] DIR STORE
//	eddy sinks pending --postgres DSN [--app ID]
//
// reset makes an application start over, like Kafka's kafka-streams-application-reset:
// it resets the application's committed offsets on its input topics and deletes its
// internal (changelog and repartition) topics. state inspect and state dump read the
// bbolt files of a stopped application's state directory. sinks pending lists the
// prepared transactions an application's PostgreSQL sinks left behind. Run "eddy COMMAND -h" for
// the flags of a command. reset reaches a secured cluster with the TLS and SASL flags
// and environment variables (EDDY_TLS_CA_FILE, EDDY_SASL_MECHANISM, EDDY_SASL_USERNAME,
// EDDY_SASL_PASSWORD, ...) that "eddy reset -h" lists.
//
// The command's output goes to stdout; logs and warnings go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode reports err on stderr and returns the exit status: 0 for success and for
// -h, 2 for a usage error, 1 for any other failure.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	var pf *errPendingFound
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &pf):
		fmt.Fprintln(stderr, "eddy:", err)
		return 3
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "eddy:", err, "(-h for help)")
		return 2
	default:
		fmt.Fprintln(stderr, "eddy:", err)
		return 1
	}
}

// usageError is a wrong command line; the message says what is wrong and the command's
// help has been printed.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const topUsage = `eddy: operations tool for eddy stream-processing applications

Usage:
  eddy reset --brokers HOST:PORT --application-id ID [flags]
        make an application start over: reset its input offsets, delete its internal topics
  eddy state inspect [flags] DIR
        tasks, stores, key counts, sizes and checkpoints of a state directory
  eddy state dump [flags] DIR STORE
        keys and values of one store
  eddy sinks pending --postgres DSN [--app ID]
        prepared transactions an application's PostgreSQL sinks left behind

Run "eddy COMMAND -h" (or "eddy state inspect -h") for a command's flags.
`

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return usagef("no command given")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, topUsage)
		return nil
	case "reset":
		return runReset(ctx, args[1:], stdout, stderr)
	case "sinks":
		return runSinks(ctx, args[1:], stdout, stderr)
	case "state":
		if len(args) < 2 {
			fmt.Fprint(stderr, topUsage)
			return usagef("state: say inspect or dump")
		}
		switch args[1] {
		case "inspect":
			return runInspect(ctx, args[2:], stdout, stderr)
		case "dump":
			return runDump(ctx, args[2:], stdout, stderr)
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, topUsage)
			return nil
		}
		fmt.Fprint(stderr, topUsage)
		return usagef("state %s: unknown command (want inspect or dump)", args[1])
	}
	fmt.Fprint(stderr, topUsage)
	return usagef("%s: unknown command (want reset, state or sinks)", args[0])
}

// newFlagSet makes the flag set of a command; its -h prints usage, then the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseInterleaved parses flags that may come before, between or after the positional
// arguments ("dump DIR STORE --value-serde int64"), and returns the positional ones.
// Everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newLogger logs to stderr: warnings, or everything at info level with verbose.
func newLogger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}
