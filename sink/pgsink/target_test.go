package pgsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/pgtest"
	"github.com/eddy-streams/eddy/sink"
)

// totals is the table most tests write: a running total per key.
func totalsTable(t *testing.T, pool *pgxpool.Pool, extra string) Table[string, int64] {
	t.Helper()
	name := pgtest.Name(t, "totals")
	pgtest.Exec(t, pool, fmt.Sprintf("CREATE TABLE %s (k text PRIMARY KEY, n bigint NOT NULL CHECK (n >= 0)%s)", name, extra))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	})
	return Table[string, int64]{
		Name: name, Columns: []string{"k", "n"}, Key: []string{"k"},
		Row: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
	}
}

func rec(k string, v int64, part int32, off int64) sink.Record[string, int64] {
	return sink.Record[string, int64]{Key: k, Value: v, Topic: "in", Partition: part, Offset: off}
}

func rows(t *testing.T, pool *pgxpool.Pool, table string) map[string]int64 {
	t.Helper()
	r, err := pool.Query(context.Background(), "SELECT k, n FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string]int64{}
	for r.Next() {
		var k string
		var n int64
		if err := r.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		out[k] = n
	}
	return out
}

func writeAll[K, V any](t *testing.T, txn sink.Txn[K, V], recs ...sink.Record[K, V]) {
	t.Helper()
	for _, r := range recs {
		if err := txn.Write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTwoPhaseByID: a prepared transaction is invisible, is listed by Pending, and is
// committed or rolled back by its ID from another pool (another process's
// connections); Commit is idempotent and tells a rolled-back transaction from a
// committed one. Kills the mutants "no marker row" (the second Commit fails) and
// "Commit of an unknown GID returns nil" (the rolled-back one commits).
func TestTwoPhaseByID(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tbl := totalsTable(t, pool, "")
	tg, err := NewTwoPhase(ctx, pool, tbl, Options{BatchRows: 2, MaxBufferedRows: 3})
	if err != nil {
		t.Fatal(err)
	}
	app := pgtest.Name(t, "app")
	id1 := sink.TxnID{App: app, Task: "0_1", Node: "out", Nonce: 1}
	id2 := sink.TxnID{App: app, Task: "0_1", Node: "out", Nonce: 2}

	txn, err := tg.Begin(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	// Four rows, BatchRows 2 and MaxBufferedRows 3: three written while writing (two
	// statements), one at Prepare; "a" twice in the second statement: the last write
	// counts.
	writeAll(t, txn, rec("a", 1, 0, 10), rec("b", 2, 0, 11), rec("a", 3, 0, 12), rec("a", 4, 0, 13))
	if err := txn.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, pool, tbl.Name); len(got) != 0 {
		t.Fatalf("rows of a prepared transaction are visible: %v", got)
	}

	// Another process: its own pool and target.
	other := pgtest.Pool(t)
	tg2, err := NewTwoPhase(ctx, other, tbl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := tg2.Pending(ctx, id1.TaskPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pending, []sink.TxnID{id1}) {
		t.Fatalf("Pending = %v, want [%v]", pending, id1)
	}
	if err := tg2.Commit(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if got, want := rows(t, pool, tbl.Name), map[string]int64{"a": 4, "b": 2}; !mapsEqual(got, want) {
		t.Fatalf("after COMMIT PREPARED: rows %v, want %v", got, want)
	}
	// Committed again (a retried post-commit, a zombie): nil.
	if err := tg.Commit(ctx, id1); err != nil {
		t.Fatalf("Commit of a committed transaction: %v, want nil", err)
	}

	txn, err = tg.Begin(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, txn, rec("a", 100, 0, 14))
	if err := txn.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tg2.Rollback(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if err := tg2.Rollback(ctx, id2); err != nil {
		t.Fatalf("Rollback of a transaction rolled back already: %v, want nil", err)
	}
	if err := tg.Commit(ctx, id2); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("Commit of a rolled-back transaction: %v, want sink.ErrNotPrepared", err)
	}
	if got, want := rows(t, pool, tbl.Name), map[string]int64{"a": 4, "b": 2}; !mapsEqual(got, want) {
		t.Fatalf("after ROLLBACK PREPARED: rows %v, want %v", got, want)
	}
	if p, err := tg.Pending(ctx, id1.TaskPrefix()); err != nil || len(p) != 0 {
		t.Fatalf("Pending after all finished = %v, %v; want none", p, err)
	}

	// Discard of a transaction that wrote a batch: its rows vanish, nothing pending.
	txn, err = tg.Begin(ctx, sink.TxnID{App: app, Task: "0_1", Node: "out", Nonce: 3})
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, txn, rec("c", 1, 0, 15), rec("d", 1, 0, 16), rec("e", 1, 0, 17))
	if err := txn.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, pool, tbl.Name); len(got) != 2 {
		t.Fatalf("after Discard: rows %v, want a and b only", got)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPendingFindsOwnOnly: a task's Pending lists its own prepared transactions and
// none of another task ("0_10" beside "0_1"), node, application (one whose ID differs
// only where the own one has '_', LIKE's wildcard) or database (the same GID prefix
// prepared in another database). Kills the mutants "LIKE without escaping" (the
// other application's is listed) and "no database = current_database()".
func TestPendingFindsOwnOnly(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tbl := totalsTable(t, pool, "")
	tg, err := NewTwoPhase(ctx, pool, tbl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := pgtest.Name(t, "ap")
	own := base + "_x"      // has '_'
	otherApp := base + "yx" // matches own with '_' as a wildcard
	prepare := func(tg *Target[string, int64], id sink.TxnID) {
		t.Helper()
		txn, err := tg.Begin(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, txn, rec(fmt.Sprintf("%s-%s-%s-%d", id.App, id.Task, id.Node, id.Nonce), 1, 0, 1))
		if err := txn.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tg.Rollback(context.Background(), id) })
	}
	mine := []sink.TxnID{{App: own, Task: "0_1", Node: "out", Nonce: 7}, {App: own, Task: "0_1", Node: "out", Nonce: 9}}
	for _, id := range mine {
		prepare(tg, id)
	}
	prepare(tg, sink.TxnID{App: own, Task: "0_10", Node: "out", Nonce: 7})
	prepare(tg, sink.TxnID{App: own, Task: "0_1", Node: "out2", Nonce: 7})
	prepare(tg, sink.TxnID{App: otherApp, Task: "0_1", Node: "out", Nonce: 7})

	// The same prefix in another database of the server.
	const otherDB = "eddy_pgsink_other"
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", otherDB).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		if _, err := pool.Exec(ctx, "CREATE DATABASE "+otherDB); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	cfg := pool.Config().Copy()
	cfg.ConnConfig.Database = otherDB
	opool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the rollbacks that prepare registers (cleanups run last first).
	t.Cleanup(opool.Close)
	otbl := totalsTable(t, opool, "")
	otg, err := NewTwoPhase(ctx, opool, otbl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	prepare(otg, sink.TxnID{App: own, Task: "0_1", Node: "out", Nonce: 8})

	got, err := tg.Pending(ctx, mine[0].TaskPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, mine) {
		t.Fatalf("Pending(%q) = %v, want %v", mine[0].TaskPrefix(), got, mine)
	}
	// The operator's view: every database, this application only.
	left, err := Leftovers(ctx, pool, own)
	if err != nil {
		t.Fatal(err)
	}
	var gids []string
	for _, p := range left {
		gids = append(gids, p.GID)
	}
	if len(left) != 5 || slices.ContainsFunc(left, func(p Prepared) bool { return p.ID.App != own }) {
		t.Fatalf("Leftovers(%s) = %v, want its 5 (four of its tasks and nodes in this database, one in %s)", own, gids, otherDB)
	}
}

// TestFailedPrepareIsDetected: PREPARE TRANSACTION of a transaction in which a statement
// failed rolls it back and reports no error; Prepare must fail, and nothing is left
// prepared or written. Kills the mutant that prepares with Exec and ignores the
// command tag (pgx's ErrTxCommitRollback check).
func TestFailedPrepareIsDetected(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tbl := totalsTable(t, pool, "")
	tg, err := NewTwoPhase(ctx, pool, tbl, Options{BatchRows: 1, MaxBufferedRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := sink.TxnID{App: pgtest.Name(t, "app"), Task: "0_0", Node: "out", Nonce: 1}
	st, err := tg.Begin(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, st, rec("a", 1, 0, 1))
	// A failure the sink did not see (a statement run on its transaction by someone
	// else's code, an error swallowed): the transaction is aborted.
	if _, err := st.(*txn[string, int64]).tx.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("SELECT 1/0 did not fail")
	}
	err = st.Prepare(ctx)
	if err == nil || !strings.Contains(err.Error(), "rolled the transaction back") {
		t.Fatalf("Prepare of a failed transaction: %v, want an error saying PREPARE rolled it back", err)
	}
	if p, err := tg.Pending(ctx, id.TaskPrefix()); err != nil || len(p) != 0 {
		t.Fatalf("Pending = %v, %v: want nothing prepared", p, err)
	}
	if err := tg.Commit(ctx, id); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("Commit: %v, want sink.ErrNotPrepared", err)
	}
}

// TestUpsertNeverMovesBackwards: a replay of older offsets leaves the rows written from
// later ones; the same offset rewrites; a later one replaces; another partition's write
// replaces. Kills the mutant without the WHERE guard.
func TestUpsertNeverMovesBackwards(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tbl := totalsTable(t, pool, ", eddy_partition integer NOT NULL, eddy_offset bigint NOT NULL")
	tg, err := NewUpsert(ctx, pool, tbl, Options{BatchRows: 2}) // batches committed while writing
	if err != nil {
		t.Fatal(err)
	}
	if tg.Guarantee() != sink.Idempotent {
		t.Fatalf("Guarantee = %v", tg.Guarantee())
	}
	commit := func(nonce uint64, recs ...sink.Record[string, int64]) {
		t.Helper()
		txn, err := tg.Begin(ctx, sink.TxnID{App: "a", Task: "0_0", Node: "out", Nonce: nonce})
		if err != nil {
			t.Fatal(err)
		}
		writeAll(t, txn, recs...)
		if err := txn.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	commit(1, rec("a", 10, 0, 10), rec("b", 20, 0, 20))
	// The replay of earlier input (an aborted attempt's rows are already there).
	commit(2, rec("a", 5, 0, 5), rec("b", 15, 0, 15), rec("a", 9, 0, 9))
	if got, want := rows(t, pool, tbl.Name), map[string]int64{"a": 10, "b": 20}; !mapsEqual(got, want) {
		t.Fatalf("after a replay of older offsets: %v, want %v", got, want)
	}
	commit(3, rec("a", 10, 0, 10), rec("a", 11, 0, 11), rec("b", 3, 1, 2))
	if got, want := rows(t, pool, tbl.Name), map[string]int64{"a": 11, "b": 3}; !mapsEqual(got, want) {
		t.Fatalf("after later offsets and another partition: %v, want %v", got, want)
	}
}

// TestViolationNamesTheRecord: a row the table refuses fails Prepare with an error
// naming the record's topic, partition and offset, and nothing of the transaction is
// written. Kills the mutants whose culprit search finds nothing (the error names only
// the batch's range) and that searches before the failed transaction gave its
// connection back (with a pool of one connection, the search finds none).
func TestViolationNamesTheRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// One connection: the search for the refused record needs the failed
	// transaction's connection back.
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, g := range []string{"two-phase", "upsert"} {
		t.Run(g, func(t *testing.T) {
			var tg *Target[string, int64]
			var err error
			if g == "two-phase" {
				tbl := totalsTable(t, pool, "")
				tbl.Key = nil // COPY
				tg, err = NewTwoPhase(ctx, pool, tbl, Options{})
			} else {
				tg, err = NewUpsert(ctx, pool, totalsTable(t, pool, ", eddy_partition integer NOT NULL, eddy_offset bigint NOT NULL"), Options{})
			}
			if err != nil {
				t.Fatal(err)
			}
			id := sink.TxnID{App: pgtest.Name(t, "app"), Task: "0_3", Node: "out", Nonce: 1}
			txn, err := tg.Begin(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = txn.Discard(context.Background()) })
			writeAll(t, txn, rec("a", 1, 3, 40), rec("b", 2, 3, 41), rec("c", -1, 3, 42), rec("d", 4, 3, 43))
			err = txn.Prepare(ctx)
			if err == nil || !strings.Contains(err.Error(), "topic in partition 3 offset 42") || !strings.Contains(err.Error(), "check constraint") {
				t.Fatalf("Prepare: %v\nwant the check constraint and topic in partition 3 offset 42 named", err)
			}
			if Retriable(err) {
				t.Fatalf("a constraint violation is Retriable: %v", err)
			}
			_ = txn.Discard(ctx)
			if got := rows(t, pool, tg.tb.Name); len(got) != 0 {
				t.Fatalf("rows written: %v", got)
			}
		})
	}
}

// TestTableChecks: a missing table or column fails at start with the DDL expected; a
// keyed table needs a unique index on its key.
func TestTableChecks(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	tbl := totalsTable(t, pool, "")
	missing := tbl
	missing.Name = tbl.Name + "_none"
	_, err := NewTwoPhase(ctx, pool, missing, Options{})
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "CREATE TABLE") {
		t.Fatalf("missing table: %v", err)
	}
	// Upsert needs eddy_partition and eddy_offset, which totals lacks.
	_, err = NewUpsert(ctx, pool, tbl, Options{})
	if err == nil || !strings.Contains(err.Error(), "no column eddy_partition, eddy_offset") || !strings.Contains(err.Error(), `"eddy_offset" bigint NOT NULL`) {
		t.Fatalf("missing columns: %v", err)
	}
	nokey := tbl
	nokey.Key = []string{"n"}
	_, err = NewTwoPhase(ctx, pool, nokey, Options{})
	if err == nil || !strings.Contains(err.Error(), "no primary key or unique index") {
		t.Fatalf("key without a unique index: %v", err)
	}
}

// TestLoginAndDown: a refused login says so and is not retriable; a server that is
// down gives a retriable error.
func TestLoginAndDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://%s:wrong@%s:%d/%s?sslmode=disable", pgtest.LoginRole, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	_, err = Connect(ctx, dsn)
	if err == nil || !strings.Contains(err.Error(), "refused the login") || Retriable(err) {
		t.Fatalf("wrong password: %v (retriable %v), want a refused login, not retriable", err, Retriable(err))
	}
	good := fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", pgtest.LoginRole, pgtest.LoginPassword, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	p, err := Connect(ctx, good)
	if err != nil {
		t.Fatalf("the right password: %v", err)
	}
	p.Close()
	// A port nothing listens on: the database down.
	_, err = Connect(ctx, fmt.Sprintf("postgres://postgres@%s:1/x?sslmode=disable&connect_timeout=2", cfg.ConnConfig.Host))
	if err == nil || !Retriable(err) {
		t.Fatalf("server down: %v (retriable %v), want a retriable error", err, Retriable(err))
	}
}

// TestTwoPhaseManyTasksFewConnections: a worker writes the records of all its tasks
// before it prepares any; with more tasks than the pool has connections, every
// transaction still prepares and commits. Kills the mutant that writes two-phase
// batches while writing (the third task's Write waits for a connection until the
// deadline, and its Prepare fails).
func TestTwoPhaseManyTasksFewConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tbl := totalsTable(t, pool, "")
	tg, err := NewTwoPhase(ctx, pool, tbl, Options{BatchRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	app := pgtest.Name(t, "app")
	var txns []sink.Txn[string, int64]
	var ids []sink.TxnID
	for task := range 5 {
		id := sink.TxnID{App: app, Task: fmt.Sprintf("0_%d", task), Node: "out", Nonce: 1}
		txn, err := tg.Begin(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = txn.Discard(context.Background()) })
		for _, r := range []sink.Record[string, int64]{rec(fmt.Sprint("a", task), 1, int32(task), 1), rec(fmt.Sprint("b", task), 2, int32(task), 2)} {
			if err := txn.Write(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		txns, ids = append(txns, txn), append(ids, id)
	}
	for i, txn := range txns {
		if err := txn.Prepare(ctx); err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	for _, id := range ids {
		if err := tg.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := rows(t, pool, tbl.Name); len(got) != 10 {
		t.Fatalf("%d rows, want 10: %v", len(got), got)
	}
}
