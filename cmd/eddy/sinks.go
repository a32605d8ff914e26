package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/eddy-streams/eddy/sink/pgsink"
)

const sinksPendingUsage = `eddy sinks pending: the prepared transactions an application's PostgreSQL sinks left

Usage:
  eddy sinks pending --postgres DSN [--app ID]

Lists, in every database of the server, the prepared transactions of application ID
(of every eddy application without --app), oldest first: GID, database, owner, when
prepared, age. A running application holds one per task and sink node for a moment
(between its pre-commit and its commit); one that stays was left by an application that
is down, or by a zombie, and the task's next start finishes it. Meanwhile it holds its
row locks and keeps VACUUM from removing dead rows. If the application is gone for good,
finish them by hand in the database named: ROLLBACK PREPARED 'GID'.

The exit status is 0 when none is found, 3 when some are (for monitoring), 1 on an
error. The DSN may also come from EDDY_POSTGRES_DSN.
`

// errPendingFound: sinks pending found prepared transactions (exit status 3).
type errPendingFound struct{ n int }

func (e *errPendingFound) Error() string {
	return fmt.Sprintf("%d prepared transaction(s) found", e.n)
}

func runSinks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "pending" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, sinksPendingUsage)
			return nil
		}
		fmt.Fprint(stderr, sinksPendingUsage)
		return usagef("sinks: say pending")
	}
	fs := newFlagSet("sinks pending", sinksPendingUsage, stderr)
	dsn := fs.String("postgres", os.Getenv("EDDY_POSTGRES_DSN"), "the PostgreSQL server's DSN (postgres://user:password@host:port/db)")
	app := fs.String("app", "", "the application ID (empty: every eddy application)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("sinks pending takes no arguments, got %q", pos)
	}
	if *dsn == "" {
		return usagef("sinks pending: --postgres DSN is required")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pool, err := pgsink.Connect(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	left, err := pgsink.Leftovers(ctx, pool, *app)
	if err != nil {
		return err
	}
	if len(left) == 0 {
		fmt.Fprintln(stdout, "no prepared transactions")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GID\tDATABASE\tOWNER\tPREPARED\tAGE")
	now := time.Now()
	for _, p := range left {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.GID, p.Database, p.Owner, p.Prepared.UTC().Format(time.RFC3339), now.Sub(p.Prepared).Round(time.Second))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return &errPendingFound{n: len(left)}
}
