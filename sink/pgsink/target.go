package pgsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/sink"
)

// Options tunes a target. The zero value is the defaults.
type Options struct {
	// BatchRows is the rows of one COPY or upsert statement. An idempotent target
	// writes and commits each batch as soon as it is full; a two-phase one writes its
	// batches at Prepare (see MaxBufferedRows). Default 5000 (COPY gains with larger
	// batches: see table.write).
	BatchRows int
	// Markers is the table where each two-phase transaction records its ID (created if
	// missing): COMMIT PREPARED of an ID the server no longer knows is "already
	// committed" when the marker is there, and "rolled back" otherwise. Default
	// eddy_sink_commits.
	Markers string
	// MaxBufferedRows (two-phase only) is how many rows a transaction keeps in memory
	// before it starts writing them, holding a pooled connection until its PREPARE:
	// below it, nothing is written before Prepare, and the worker's Prepares take one
	// connection at a time. A transaction that goes past it holds a connection while
	// the worker goes on processing; the pool must then have a connection for each
	// such task of the worker (pgxpool's MaxConns, pool_max_conns in the DSN), or the
	// next one waits for ever. Default 100000.
	MaxBufferedRows int
	// MarkerRetention is how long markers are kept, counted from their PREPARE (pruned
	// at most every ten minutes, by Prepare). A Commit of an ID that is no longer
	// prepared answers "already committed" only while the marker is kept: a post-commit
	// retried after a lost answer, or a zombie's Commit, comes seconds later; but a
	// transaction prepared before an outage longer than the retention, committed at the
	// next start, and then committed again after a lost answer, would get
	// sink.ErrNotPrepared if a prune fell in between. The table holds one row per task
	// and commit that wrote to the sink (about 10 rows/s per busy task at eddy's 100 ms
	// commit interval). Default 24 hours.
	MarkerRetention time.Duration
}

const (
	defaultBatchRows = 5000
	defaultMarkers   = "eddy_sink_commits"
	defaultRetention = 24 * time.Hour
	pruneEvery       = 10 * time.Minute
)

func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = defaultBatchRows
	}
	if o.MaxBufferedRows <= 0 {
		o.MaxBufferedRows = 100_000
	}
	if o.Markers == "" {
		o.Markers = defaultMarkers
	}
	if o.MarkerRetention <= 0 {
		o.MarkerRetention = defaultRetention
	}
}

// Target is a PostgreSQL table that a sink node writes into: the two-phase one
// (NewTwoPhase) or the idempotent one (NewUpsert). It implements sink.Target[K, V].
type Target[K, V any] struct {
	pool      *pgxpool.Pool
	tb        *table[K, V]
	opts      Options
	guarantee sink.Guarantee
	markers   pgx.Identifier
	lastPrune atomic.Int64 // unix nanoseconds
}

var _ sink.Target[string, int] = (*Target[string, int])(nil)

// NewTwoPhase returns a target that writes each task's records of one eddy commit in
// one PostgreSQL transaction, prepared (PREPARE TRANSACTION) before the Kafka
// transaction commits and committed (COMMIT PREPARED) after: exactly-once. It checks
// the server first: max_prepared_transactions must be above 0, the table and its
// columns must exist, and it creates the Markers table if missing. pool's user must be
// the one that commits the transactions later (PostgreSQL lets only the user that
// prepared a transaction, or a superuser, finish it).
func NewTwoPhase[K, V any](ctx context.Context, pool *pgxpool.Pool, t Table[K, V], opts Options) (*Target[K, V], error) {
	opts.defaults()
	var setting int
	if err := pool.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&setting); err != nil {
		return nil, dbErr("read max_prepared_transactions", err)
	}
	if err := checkPreparedXacts(setting, dbName(pool)); err != nil {
		return nil, err
	}
	tb, err := openTable(ctx, pool, t, false)
	if err != nil {
		return nil, err
	}
	tg := &Target[K, V]{pool: pool, tb: tb, opts: opts, guarantee: sink.TwoPhase, markers: identOf(opts.Markers)}
	// Created only when missing, and looked up first: CREATE INDEX (even IF NOT EXISTS)
	// takes a share lock on the table, which waits for every prepared transaction that
	// wrote a marker, so a task's recovery would wait for the very transactions it is
	// about to finish.
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", tg.markers.Sanitize()).Scan(&exists); err != nil {
		return nil, dbErr(fmt.Sprintf("look up the markers table %s", opts.Markers), err)
	}
	if !exists {
		create := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (gid text PRIMARY KEY, committed_at timestamptz NOT NULL DEFAULT now());
			CREATE INDEX IF NOT EXISTS %s ON %s (committed_at)`, tg.markers.Sanitize(),
			pgx.Identifier{tg.markers[len(tg.markers)-1] + "_committed_at"}.Sanitize(), tg.markers.Sanitize())
		if _, err := pool.Exec(ctx, create); err != nil && !createdMeanwhile(ctx, pool, tg.markers) {
			return nil, dbErr(fmt.Sprintf("create the markers table %s", opts.Markers), err)
		}
	}
	return tg, nil
}

// createdMeanwhile: two targets that create the table at once may collide in the
// catalog (a unique violation on pg_type); the table is there all the same.
func createdMeanwhile(ctx context.Context, pool *pgxpool.Pool, name pgx.Identifier) bool {
	var exists bool
	err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name.Sanitize()).Scan(&exists)
	return err == nil && exists
}

// checkPreparedXacts refuses two-phase commit on a server that cannot prepare
// transactions (PostgreSQL's default: max_prepared_transactions = 0, where PREPARE
// TRANSACTION fails).
func checkPreparedXacts(setting int, db string) error {
	if setting > 0 {
		return nil
	}
	return fmt.Errorf("pgsink: two-phase commit needs prepared transactions, but the server of database %s has max_prepared_transactions = %d: set max_prepared_transactions (at least the number of tasks writing to it at once, at most max_connections; e.g. 64) in postgresql.conf, or ALTER SYSTEM SET max_prepared_transactions = 64, and restart PostgreSQL (the setting takes effect only at server start); or use NewUpsert, which needs none", db, setting)
}

// NewUpsert returns a target that upserts each record's row by its Key columns, with
// the source partition and offset that wrote it (Table.PartitionColumn, OffsetColumn):
// a row is replaced only by a write from the same or a later offset of its partition,
// so a replay never moves a row backwards. Prepare commits: at-least-once delivery
// whose replays converge to the same rows (sink.Idempotent).
func NewUpsert[K, V any](ctx context.Context, pool *pgxpool.Pool, t Table[K, V], opts Options) (*Target[K, V], error) {
	opts.defaults()
	tb, err := openTable(ctx, pool, t, true)
	if err != nil {
		return nil, err
	}
	return &Target[K, V]{pool: pool, tb: tb, opts: opts, guarantee: sink.Idempotent}, nil
}

// Guarantee is sink.TwoPhase (NewTwoPhase) or sink.Idempotent (NewUpsert).
func (tg *Target[K, V]) Guarantee() sink.Guarantee { return tg.guarantee }

// Begin opens the transaction id. No connection is taken until the first batch is
// written.
func (tg *Target[K, V]) Begin(ctx context.Context, id sink.TxnID) (sink.Txn[K, V], error) {
	gid := id.String()
	if len(gid) > sinktxn.MaxIDLen {
		return nil, fmt.Errorf("pgsink: transaction ID %s is %d bytes, PostgreSQL's GIDs at most %d", gid, len(gid), sinktxn.MaxIDLen)
	}
	return &txn[K, V]{tg: tg, id: id, gid: gid}, nil
}

// quoteLiteral quotes s as an SQL string literal (PREPARE TRANSACTION and COMMIT
// PREPARED take a literal, not a parameter).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Pending lists the prepared transactions of this database whose IDs start with
// prefix (sink.Resolver): pg_prepared_xacts, LIKE with the prefix's wildcards escaped.
func (tg *Target[K, V]) Pending(ctx context.Context, prefix string) ([]sink.TxnID, error) {
	return pending(ctx, tg.pool, prefix)
}

func pending(ctx context.Context, pool *pgxpool.Pool, prefix string) ([]sink.TxnID, error) {
	rows, err := pool.Query(ctx, `SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid LIKE $1 ESCAPE '\' ORDER BY prepared`, likePrefix(prefix))
	if err != nil {
		return nil, dbErr(fmt.Sprintf("list the prepared transactions %s*", prefix), err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbErr(fmt.Sprintf("list the prepared transactions %s*", prefix), err)
	}
	ids := make([]sink.TxnID, 0, len(gids))
	for _, g := range gids {
		id, err := sink.ParseTxnID(g)
		if err != nil {
			return nil, fmt.Errorf("pgsink: prepared transaction %q starts with %q but is not an eddy sink transaction ID: %w; finish it by hand (COMMIT PREPARED or ROLLBACK PREPARED)", g, prefix, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// likePrefix is a LIKE pattern matching what starts with prefix.
func likePrefix(prefix string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(prefix) + "%"
}

// Commit commits the prepared transaction id (COMMIT PREPARED), from any connection.
// One the server does not know is checked against its marker: committed already (nil),
// or rolled back or never prepared (an error wrapping sink.ErrNotPrepared).
func (tg *Target[K, V]) Commit(ctx context.Context, id sink.TxnID) error {
	if tg.guarantee != sink.TwoPhase {
		return nil
	}
	gid := id.String()
	_, err := tg.pool.Exec(ctx, "COMMIT PREPARED "+quoteLiteral(gid))
	if err == nil {
		return nil
	}
	if !unknownGID(err) {
		return dbErr(fmt.Sprintf("commit prepared transaction %s", gid), err)
	}
	var committed bool
	if err := tg.pool.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s WHERE gid = $1)", tg.markers.Sanitize()), gid).Scan(&committed); err != nil {
		return dbErr(fmt.Sprintf("look up the marker of transaction %s, which is not prepared", gid), err)
	}
	if committed {
		return nil
	}
	return fmt.Errorf("pgsink: commit transaction %s: %w (no prepared transaction and no marker in %s: it was rolled back, or never prepared)", gid, sink.ErrNotPrepared, tg.opts.Markers)
}

// Rollback rolls back the prepared transaction id (ROLLBACK PREPARED); one the server
// does not know is not an error.
func (tg *Target[K, V]) Rollback(ctx context.Context, id sink.TxnID) error {
	if tg.guarantee != sink.TwoPhase {
		return nil
	}
	gid := id.String()
	if _, err := tg.pool.Exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil && !unknownGID(err) {
		return dbErr(fmt.Sprintf("roll back prepared transaction %s", gid), err)
	}
	return nil
}

// unknownGID: "prepared transaction with identifier … does not exist".
func unknownGID(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "42704"
}

// prune deletes markers older than the retention, at most every pruneEvery, outside
// any sink transaction: a DELETE inside a prepared transaction would hold its row
// locks until COMMIT PREPARED, and another task's Prepare deleting the same markers
// would wait for it (a deadlock when one worker prepares both). Best effort: a failure
// waits for the next turn.
func (tg *Target[K, V]) prune(ctx context.Context) {
	now := time.Now().UnixNano()
	last := tg.lastPrune.Load()
	if now-last < int64(pruneEvery) || !tg.lastPrune.CompareAndSwap(last, now) {
		return
	}
	_, _ = tg.pool.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE committed_at < now() - $1::interval", tg.markers.Sanitize()),
		fmt.Sprintf("%d seconds", int64(tg.opts.MarkerRetention/time.Second)))
}

// txn is one task's transaction of one unit of work.
type txn[K, V any] struct {
	tg     *Target[K, V]
	id     sink.TxnID
	gid    string
	tx     pgx.Tx // nil until the first batch
	buf    []row
	failed error // a batch failed: the transaction is dead, Prepare returns this
	done   bool
	// maybePrepared: the PREPARE's answer was lost and the rollback after it failed;
	// pid is the server process that ran it.
	maybePrepared bool
	pid           uint32
}

// rollbackLost rolls back a transaction whose PREPARE's answer was lost, once the
// server process that ran it has exited: until then the PREPARE may still be carried
// out after a ROLLBACK PREPARED that found nothing; after, the transaction is either
// prepared or gone.
func (t *txn[K, V]) rollbackLost(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		var alive bool
		err := t.tg.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", int64(t.pid)).Scan(&alive)
		if err != nil {
			return dbErr(fmt.Sprintf("wait for server process %d, which ran the PREPARE of %s, to exit", t.pid, t.gid), err)
		}
		if !alive {
			return t.tg.Rollback(ctx, t.id)
		}
		select {
		case <-ctx.Done():
			return dbErr(fmt.Sprintf("wait for server process %d, which ran the PREPARE of %s, to exit", t.pid, t.gid), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Write buffers the record's row. An idempotent target writes and commits each batch
// of BatchRows; a two-phase one writes at Prepare, or past MaxBufferedRows. A
// batch that fails for a reason a retry may get past (the database down) does not fail
// Write: the transaction is dead, later writes are dropped, and Prepare returns the
// error, so that eddy aborts the Kafka transaction and replays the input, where an
// error from Write (the sink node's processing) would stop the application. Errors a
// retry cannot get past (a record refused, a mapping error) fail Write at once, naming
// the record.
func (t *txn[K, V]) Write(ctx context.Context, rec sink.Record[K, V]) error {
	if t.failed != nil {
		if Retriable(t.failed) {
			return nil
		}
		return t.failed
	}
	if t.done {
		return fmt.Errorf("pgsink: write into transaction %s after it was prepared or discarded", t.gid)
	}
	r, err := t.tg.tb.mapRow(rec)
	if err != nil {
		return err
	}
	t.buf = append(t.buf, r)
	if t.tg.guarantee == sink.TwoPhase {
		// A two-phase transaction holds its connection from its first statement to
		// its PREPARE, and the worker writes every task's records before it prepares
		// any: written at each batch, the transactions of more tasks than the pool has
		// connections would wait for a connection for ever. So the rows wait in
		// memory for Prepare, up to MaxBufferedRows.
		if len(t.buf) < t.tg.opts.MaxBufferedRows {
			return nil
		}
		if err := t.flush(ctx); err != nil && !Retriable(err) {
			return err
		}
		return nil
	}
	// Idempotent: each batch in a transaction of its own, committed at once.
	if len(t.buf) >= t.tg.opts.BatchRows {
		err := t.flush(ctx)
		if err == nil {
			err = t.commitOpen(ctx)
		}
		if err != nil && !Retriable(err) {
			return err
		}
	}
	return nil
}

// commitOpen commits the open transaction (Idempotent).
func (t *txn[K, V]) commitOpen(ctx context.Context) error {
	if t.tx == nil {
		return nil
	}
	err := t.tx.Commit(ctx)
	t.tx = nil
	if err != nil {
		t.failed = dbErr("commit transaction "+t.gid, err)
		t.buf = nil
		return t.failed
	}
	return nil
}

func (t *txn[K, V]) begin(ctx context.Context) error {
	if t.tx != nil {
		return nil
	}
	opts := pgx.TxOptions{}
	if t.tg.guarantee == sink.TwoPhase {
		// pgx runs CommitQuery for Commit and reports ErrTxCommitRollback when the
		// server answers ROLLBACK: PREPARE TRANSACTION of a transaction that had
		// already failed rolls it back and reports no error.
		opts.CommitQuery = "PREPARE TRANSACTION " + quoteLiteral(t.gid)
	}
	tx, err := t.tg.pool.BeginTx(ctx, opts)
	if err != nil {
		return dbErr(fmt.Sprintf("begin transaction %s", t.gid), err)
	}
	if t.tg.guarantee == sink.TwoPhase {
		// The marker first: it commits and rolls back with the rows. (Written last, a
		// statement of the transaction that failed unseen would make the marker's
		// INSERT fail instead of the PREPARE, and hide the case Prepare checks.)
		if _, err := tx.Exec(ctx, fmt.Sprintf("INSERT INTO %s (gid) VALUES ($1)", t.tg.markers.Sanitize()), t.gid); err != nil {
			_ = tx.Rollback(ctx)
			return dbErr(fmt.Sprintf("record the marker of transaction %s", t.gid), err)
		}
	}
	t.tx = tx
	return nil
}

// flush writes the buffered rows.
func (t *txn[K, V]) flush(ctx context.Context) error {
	if len(t.buf) == 0 {
		return nil
	}
	if err := t.begin(ctx); err != nil {
		t.failed = err
		t.buf = nil
		return err
	}
	for rows := t.buf; len(rows) > 0; {
		n := min(len(rows), t.tg.opts.BatchRows)
		if err := t.tg.tb.write(ctx, t.tx, rows[:n]); err != nil {
			// Rolled back first: the search for the refused record takes a connection
			// of its own.
			t.end(ctx)
			t.failed = fmt.Errorf("transaction %s: %w", t.gid, t.tg.tb.writeErr(ctx, t.tg.pool, rows[:n], err))
			return t.failed
		}
		rows = rows[n:]
	}
	t.buf = t.buf[:0]
	return nil
}

// end rolls the open transaction back and gives its connection back.
func (t *txn[K, V]) end(ctx context.Context) {
	if t.tx != nil {
		_ = t.tx.Rollback(ctx)
		t.tx = nil
	}
	t.buf = nil
}

// Prepare writes what is buffered, then (two-phase) records the marker and prepares
// the transaction, or (upsert) commits it.
func (t *txn[K, V]) Prepare(ctx context.Context) error {
	if t.failed != nil {
		return t.failed
	}
	if t.done {
		return fmt.Errorf("pgsink: transaction %s was already prepared or discarded", t.gid)
	}
	if err := t.flush(ctx); err != nil {
		return err
	}
	if t.tx == nil && t.tg.guarantee != sink.TwoPhase {
		t.done = true // every batch committed already
		return nil
	}
	if err := t.begin(ctx); err != nil {
		return err
	}
	t.done = true
	pid := t.tx.Conn().PgConn().PID()
	err := t.tx.Commit(ctx)
	t.tx = nil
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return &Error{Op: "prepare transaction " + t.gid, Err: errors.New("PREPARE TRANSACTION rolled the transaction back: a statement in it had failed before (nothing was prepared)")}
	}
	if err != nil {
		op := "prepare transaction " + t.gid
		if t.tg.guarantee != sink.TwoPhase {
			op = "commit transaction " + t.gid
		}
		var pg *pgconn.PgError
		if t.tg.guarantee == sink.TwoPhase && !errors.As(err, &pg) {
			// No answer from the server (the connection died): the PREPARE may have
			// been carried out. Nothing will commit it (Prepare failed: eddy aborts
			// the Kafka transaction), and left prepared it would hold its row locks
			// against the replay's writes until the task's next start: roll it back
			// now, and again in Discard if that fails.
			t.maybePrepared, t.pid = true, pid
			if rerr := t.rollbackLost(ctx); rerr == nil {
				t.maybePrepared = false
			}
		}
		return dbErr(op, err)
	}
	if t.tg.guarantee == sink.TwoPhase {
		t.tg.prune(ctx)
	}
	return nil
}

// Discard rolls back a transaction that was not prepared (and one whose PREPARE's
// answer was lost).
func (t *txn[K, V]) Discard(ctx context.Context) error {
	t.done = true
	t.end(ctx)
	if t.maybePrepared {
		if err := t.rollbackLost(ctx); err != nil {
			return fmt.Errorf("pgsink: transaction %s may have been prepared (the answer to its PREPARE was lost) and could not be rolled back (retried before the next commit; the task's next start rolls it back too): %w", t.gid, err)
		}
		t.maybePrepared = false
	}
	return nil
}
