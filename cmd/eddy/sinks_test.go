package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/sink/pgsink"
)

// TestSinksPending: eddy sinks pending lists the application's prepared transactions
// and exits 3, and says none (exit 0) once they are finished. Kills the mutant that
// returns nil when some are found (exit 0 hides them from monitoring).
func TestSinksPending(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	table := pgtest.Name(t, "pending")
	pgtest.Exec(t, pool, fmt.Sprintf("CREATE TABLE %s (k text PRIMARY KEY, n bigint)", table))
	defer pgtest.Exec(t, pool, "DROP TABLE "+table)
	tg, err := pgsink.NewTwoPhase(ctx, pool, pgsink.Table[string, int64]{
		Name: table, Columns: []string{"k", "n"}, Key: []string{"k"},
		Row: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
	}, pgsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	app := strings.ReplaceAll(pgtest.Name(t, "app"), "_", "-")
	id := sink.TxnID{App: app, Task: "0_0", Node: "totals", Nonce: 42}
	txn, err := tg.Begin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Write(ctx, sink.Record[string, int64]{Key: "a", Value: 1}); err != nil {
		t.Fatal(err)
	}
	if err := txn.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tg.Rollback(ctx, id) }()

	args := []string{"sinks", "pending", "--postgres", pgtest.DSN(t), "--app", app}
	var out, errOut bytes.Buffer
	err = run(ctx, args, &out, &errOut)
	if code := exitCode(err, &errOut); code != 3 || !strings.Contains(out.String(), id.String()) {
		t.Fatalf("exit %d, output:\n%s%s\nwant exit 3 and %s listed", code, out.String(), errOut.String(), id)
	}
	if err := tg.Rollback(ctx, id); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(ctx, args, &out, &errOut)
	if code := exitCode(err, &errOut); code != 0 || !strings.Contains(out.String(), "no prepared transactions") {
		t.Fatalf("after the rollback: exit %d, output:\n%s", code, out.String())
	}
}
