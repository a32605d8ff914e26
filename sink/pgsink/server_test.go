package pgsink

import (
	"context"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/sink"
)

// TestPreparedOnOwnServer runs on a server of its own (it reconfigures and crashes it):
// with PostgreSQL's default max_prepared_transactions = 0 NewTwoPhase refuses and says
// how to enable it; the way it says (ALTER SYSTEM, restart) works; a prepared
// transaction survives the server stopping at once (pg_ctl stop -m immediate) and is
// then found and committed by ID, twice. Kills the mutants "no max_prepared_transactions
// check" (NewTwoPhase succeeds and the refusal is not seen) and "no marker row" (the
// first Commit after the crash commits, the second returns ErrNotPrepared). With the
// server stopped, a
// Write that writes a batch does not fail, and Prepare and Commit fail retriably: kills
// the mutant where Write returns the batch's error.
func TestPreparedOnOwnServer(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t, "EDDY_POSTGRES_MAX_PREPARED=0")
	pool, err := Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	tbl := totalsTable(t, pool, "")
	_, err = NewTwoPhase(ctx, pool, tbl, Options{})
	if err == nil || !strings.Contains(err.Error(), "max_prepared_transactions = 0") || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("NewTwoPhase with max_prepared_transactions = 0: %v, want a refusal saying how to enable it", err)
	}
	pgtest.Exec(t, pool, "ALTER SYSTEM SET max_prepared_transactions = 8")
	pool.Close()
	srv.Crash(t)

	pool, err = Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := NewTwoPhase(ctx, pool, tbl, Options{})
	if err != nil {
		t.Fatalf("after enabling prepared transactions: %v", err)
	}
	id := sink.TxnID{App: "crash", Task: "1_2", Node: "out", Nonce: 0xfeed}
	txn, err := tg.Begin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, txn, rec("a", 1, 2, 1), rec("b", 2, 2, 2))
	if err := txn.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	srv.Crash(t)

	pool, err = Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tg, err = NewTwoPhase(ctx, pool, tbl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tg.Pending(ctx, id.TaskPrefix())
	if err != nil || len(got) != 1 || got[0] != id {
		t.Fatalf("Pending after the crash = %v, %v; want [%v]", got, err, id)
	}
	if err := tg.Commit(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := tg.Commit(ctx, id); err != nil {
		t.Fatalf("the second Commit: %v, want nil (the marker committed with the rows)", err)
	}
	if got, want := rows(t, pool, tbl.Name), map[string]int64{"a": 1, "b": 2}; !mapsEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}

	// The database down: a Write that writes a batch does not fail (that would stop
	// the application), Prepare does, and so does a Commit, both retriable.
	small, err := NewTwoPhase(ctx, pool, tbl, Options{BatchRows: 1, MaxBufferedRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	id2 := sink.TxnID{App: "crash", Task: "1_2", Node: "out", Nonce: 0xfeee}
	srv.Stop(t)
	txn, err = small.Begin(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Write(ctx, rec("c", 3, 2, 3)); err != nil {
		t.Fatalf("Write with the database down: %v, want nil (Prepare reports it)", err)
	}
	if err := txn.Prepare(ctx); err == nil || !Retriable(err) {
		t.Fatalf("Prepare with the database down: %v (retriable %v), want a retriable error", err, Retriable(err))
	}
	if err := small.Commit(ctx, id); err == nil || !Retriable(err) {
		t.Fatalf("Commit with the database down: %v (retriable %v), want a retriable error", err, Retriable(err))
	}
}
