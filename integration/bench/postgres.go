//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rcrowley/go-metrics"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/sink/pgsink"
	"github.com/eddy-streams/eddy/topology"
)

// The PostgreSQL rows (issue 23, item 6): the pipe and passthrough input (-records
// keyed records, unique keys) delivered into a table (k bytea, v bytea, eddy_partition
// integer, eddy_offset bigint), one row per record, by a plain batched COPY pipe (the
// ceiling: no eddy, no exactly-once) and by each of sink/pgsink's modes. A run starts
// when its table holds a first row and ends when it holds them all (checked after the
// Kafka-side progress says the input is through: the group's committed offsets, or the
// write-ahead pipe's offsets table, so that the table is counted only a few times).
//
// The server's CPU time is read from /proc (the postmaster's own and reaped children's,
// plus its live children's) before the child starts and after it stops, when the
// server runs on this host.

// pgColumns are the columns every row writes, in this order.
var pgColumns = []string{"k", "v", "eddy_partition", "eddy_offset"}

// pgTableName is a run's table: its ID with what is not a letter or digit as '_'.
func pgTableName(id string) string {
	return "bench_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return '_'
	}, id)
}

// pgDDL is the CREATE TABLE of a run's table; keyed: with a primary key on k (what an
// upsert needs).
func pgDDL(table string, keyed bool) string {
	pk := ""
	if keyed {
		pk = " PRIMARY KEY"
	}
	return fmt.Sprintf("CREATE TABLE %s (k bytea%s, v bytea NOT NULL, eddy_partition integer NOT NULL, eddy_offset bigint NOT NULL)",
		pgx.Identifier{table}.Sanitize(), pk)
}

// pgSinkTable maps a record to its row. guarded (the upsert): the target adds the
// partition and offset columns itself.
func pgSinkTable(table string, guarded bool) pgsink.Table[[]byte, []byte] {
	if guarded {
		return pgsink.Table[[]byte, []byte]{
			Name: table, Columns: []string{"k", "v"}, Key: []string{"k"},
			Row: func(r sink.Record[[]byte, []byte]) ([]any, error) { return []any{r.Key, r.Value}, nil },
		}
	}
	return pgsink.Table[[]byte, []byte]{
		Name: table, Columns: pgColumns,
		Row: func(r sink.Record[[]byte, []byte]) ([]any, error) {
			return []any{r.Key, r.Value, r.Partition, r.Offset}, nil
		},
	}
}

// needPostgres opens the parent's pool once and finds the server's postmaster when it
// runs on this host.
func (e *env) needPostgres(ctx context.Context) (*pgxpool.Pool, error) {
	if e.pg != nil {
		return e.pg, nil
	}
	if e.o.postgres == "" {
		return nil, errors.New("the PostgreSQL rows need -postgres DSN (integration/postgres.sh start prints one)")
	}
	pool, err := pgsink.Connect(ctx, e.o.postgres)
	if err != nil {
		return nil, err
	}
	var pid int
	var version string
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid(), current_setting('server_version')").Scan(&pid, &version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", e.o.postgres, err)
	}
	e.pg, e.pgVersion = pool, version
	e.postmaster = parentPID(pid)
	var fsync, mpx, shared string
	_ = pool.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('max_prepared_transactions'), current_setting('shared_buffers')").Scan(&fsync, &mpx, &shared)
	e.pgSettings = fmt.Sprintf("PostgreSQL %s (fsync %s, shared_buffers %s, max_prepared_transactions %s)", version, fsync, shared, mpx)
	if e.postmaster == 0 {
		e.logf("  PostgreSQL is not on this host (backend %d not in /proc): its CPU time is not measured", pid)
	}
	return pool, nil
}

// parentPID is a local process's parent, 0 when it is not found.
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// procCPU reads a /proc/<pid>/stat line: its parent, and its user+system CPU ticks, and
// those of its waited-for children.
func procCPU(stat string) (ppid int, own, children int64, ok bool) {
	// The command name is in parentheses and may hold spaces: fields count from the
	// last ')'. After it: state (3), ppid (4), ..., utime (14), stime (15), cutime
	// (16), cstime (17).
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 15 {
		return 0, 0, 0, false
	}
	n := func(j int) int64 { x, _ := strconv.ParseInt(f[j], 10, 64); return x }
	ppid = int(n(1))
	return ppid, n(11) + n(12), n(13) + n(14), true
}

// serverCPU is the CPU seconds the PostgreSQL server used so far: the postmaster's,
// its reaped children's (backends that exited), and its live children's. A backend
// reaped between the postmaster's line and the scan of its children would be in
// neither (read right after a child stopped, when its backends exit, that lost most of
// a run: pg-upsert read 0.42 s/M): the postmaster's reaped time is read again after the
// scan, and the whole read repeated until it did not change.
func serverCPU(postmaster int) float64 {
	if postmaster == 0 {
		return 0
	}
	const tick = 100 // USER_HZ on Linux
	read := func() (own, reaped int64, ok bool) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", postmaster))
		if err != nil {
			return 0, 0, false
		}
		_, own, reaped, ok = procCPU(string(b))
		return own, reaped, ok
	}
	var total int64
	for range 20 {
		own, reaped, ok := read()
		if !ok {
			return 0
		}
		total = own + reaped
		dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, d := range dirs {
			b, err := os.ReadFile(d)
			if err != nil {
				continue
			}
			if ppid, own, _, ok := procCPU(string(b)); ok && ppid == postmaster {
				total += own
			}
		}
		if _, again, ok := read(); ok && again == reaped {
			break
		}
	}
	return float64(total) / tick
}

// pgRow runs one PostgreSQL row: mode is pg-copy, pg-copy-pk, pg-2pc, pg-upsert,
// pg-pipe, or pg-eos-nosink (eddy exactly-once on the same input with no sink, for its
// commit times without the sink's steps; at-least-once has no such row: its commit is
// an asynchronous offset commit that eddy's log times at 0 ms).
func pgRow(mode string) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		if err := e.needInput(ctx); err != nil {
			return nil, err
		}
		pool, err := e.needPostgres(ctx)
		if err != nil {
			return nil, err
		}
		ds := e.input
		if mode == "pg-upsert-hot" {
			if ds, err = e.needHotInput(ctx); err != nil {
				return nil, err
			}
		}
		id := e.runID(r.name, round)
		defer e.cleanupRun(id)
		table := pgTableName(id)
		want := ds.Records
		spec := childSpec{
			Row: r.name, Input: ds.Topic, Group: id, Partitions: int32(e.o.partitions),
			CommitInterval: 100 * time.Millisecond, Postgres: e.o.postgres, Table: table, PGBatch: e.o.pgBatch,
			StateDir: e.stateDir(id),
		}
		spec.Tune.Workers = nameSuffixInt(r.name, "-w") // diagnostic rows *-w<N>: eddy Config.Workers
		nosink := strings.HasSuffix(mode, "-nosink")
		if !nosink {
			keyed := mode == "pg-upsert" || mode == "pg-upsert-hot" || mode == "pg-copy-pk"
			if _, err := pool.Exec(ctx, pgDDL(table, keyed)); err != nil {
				return nil, fmt.Errorf("create table %s: %w", table, err)
			}
			if !e.o.keep {
				defer func() {
					_, _ = pool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
					if mode == "pg-pipe" {
						_, _ = pool.Exec(context.WithoutCancel(ctx), "DELETE FROM eddy_sink_offsets WHERE app = $1", id)
					}
				}()
			}
		}
		kind := "eddy"
		started, rowsDone := e.pgAnyRow(pool, table), e.pgRows(pool, table, want)
		done := allDone(e.committedThrough(ctx, id, ds, nil), rowsDone)
		switch mode {
		case "pg-copy", "pg-copy-pk":
			kind = "pg-copy"
		case "pg-pipe":
			kind = "pg-pipe"
			done = allDone(e.pgPipeThrough(pool, id, want), rowsDone)
		case "pg-2pc", "pg-upsert":
			spec.Topology, spec.ExactlyOnce = mode, mode == "pg-2pc"
		case "pg-upsert-hot":
			// Fewer rows than records: done when the offsets, committed after each
			// commit's last upsert, cover the input.
			spec.Topology = "pg-upsert"
			want = -1
			done = e.committedThrough(ctx, id, ds, nil)
		case "pg-eos-nosink":
			spec.Topology, spec.ExactlyOnce = "drop", true
			started = e.committedAny(id, ds)
			done = e.committedThrough(ctx, id, ds, nil)
		default:
			return nil, fmt.Errorf("unknown PostgreSQL row mode %q", mode)
		}
		cpu0 := serverCPU(e.postmaster)
		res, err := e.throughputRunFrom(ctx, r, round, kind, spec, started, done, ds, 0)
		if err != nil {
			return nil, err
		}
		if e.postmaster != 0 {
			res.PGCPU = serverCPU(e.postmaster) - cpu0
			res.PGCPUPerM = res.PGCPU / float64(res.Units) * 1e6
		}
		if !nosink {
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&res.PGRows); err != nil {
				return nil, fmt.Errorf("count the rows of %s: %w", table, err)
			}
			if want >= 0 && res.PGRows != want {
				e.logf("  %s: %d rows in %s for %d input records", r.name, res.PGRows, table, want)
			}
		}
		return res, nil
	}
}

// needHotInput writes the input of pg-upsert-hot once: -records records like the pipe
// input's, their keys drawn at random from -pg-hot-keys keys, so that most upserts
// update a row (a per-key aggregate's updates) instead of adding one.
func (e *env) needHotInput(ctx context.Context) (*dataset, error) {
	if e.hotIn != nil {
		return e.hotIn, nil
	}
	P := int32(e.o.partitions)
	topic := e.o.prefix + "-hot-input"
	if err := e.createTopic(ctx, topic, P, nil); err != nil {
		return nil, err
	}
	ds, err := e.produce(ctx, topic, P, e.o.records, keyed(e.rng, e.o.valueSize, P, e.o.pgHotKeys, true), "", 0)
	if err != nil {
		return nil, err
	}
	e.hotIn = ds
	e.logf("  wrote %d records of %d keys to %s", ds.Records, e.o.pgHotKeys, topic)
	return ds, nil
}

// pgAnyRow: the table holds a row (a run's start).
func (e *env) pgAnyRow(pool *pgxpool.Pool, table string) doneFunc {
	q := fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s)", pgx.Identifier{table}.Sanitize())
	return func() (bool, error) {
		var ok bool
		err := pool.QueryRow(context.Background(), q).Scan(&ok)
		return ok, err
	}
}

// pgRows: the table holds at least want rows (counted: call it only once the Kafka
// side says the input is through).
func (e *env) pgRows(pool *pgxpool.Pool, table string, want int64) doneFunc {
	q := "SELECT count(*) FROM " + pgx.Identifier{table}.Sanitize()
	return func() (bool, error) {
		var n int64
		err := pool.QueryRow(context.Background(), q).Scan(&n)
		return n >= want, err
	}
}

// pgPipeThrough: the write-ahead pipe's offsets (eddy_sink_offsets) cover the input.
func (e *env) pgPipeThrough(pool *pgxpool.Pool, app string, want int64) doneFunc {
	return func() (bool, error) {
		var n int64
		err := pool.QueryRow(context.Background(), "SELECT coalesce(sum(next_offset), 0) FROM eddy_sink_offsets WHERE app = $1", app).Scan(&n)
		var pg interface{ SQLState() string }
		if errors.As(err, &pg) && pg.SQLState() == "42P01" { // the pipe has not created the table yet
			return false, nil
		}
		return n >= want, err
	}
}

// committedAny: the group committed an offset past the start of a partition (the start
// of a run with no output).
func (e *env) committedAny(group string, ds *dataset) doneFunc {
	return func() (bool, error) {
		offs, stable, err := e.committed(group, ds.Topic, ds.Partitions)
		if err != nil || !stable {
			return false, err
		}
		return sum(offs) > -int64(len(offs)), nil
	}
}

// runPGCopy is the ceiling: a consumer group whose claims each gather up to -pg-batch
// records (at most 100 ms after the first, as the write-ahead pipe does), COPY them
// into the table in one statement (its own transaction), then mark the offsets, which
// sarama auto-commits every 10 ms (at-least-once, no eddy): the parent counts the table
// once the committed offsets cover the input. Not committed after each COPY: a
// synchronous commit per batch made the ceiling 1.5x slower than pgsink.Pipe. Its
// fetches wait at most 10 ms (-max-wait; sarama's default is 500 ms): the offset
// commits go to the same broker connection as the fetches, and Kafka answers a
// connection's requests in order, so once the input was read the last commit waited
// behind a fetch long-polling for more, up to 500 ms after the last row (measured, 100k
// records: the offsets covered the input 0.71 and 0.93 s after the first row, the
// pipe's offsets table 0.31-0.33 s; with 10 ms, 0.32 and 0.49 s against 0.39-0.43 s).
func runPGCopy(ctx context.Context, spec *childSpec, reg metrics.Registry, res *childResult) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pool, err := pgsink.Connect(ctx, spec.Postgres)
	if err != nil {
		return err
	}
	defer pool.Close()
	cc := saramaBase(spec, reg, spec.Group)
	cc.Consumer.Offsets.AutoCommit.Enable = true
	cc.Consumer.Offsets.AutoCommit.Interval = 10 * time.Millisecond
	if spec.Tune.MaxWait == 0 {
		cc.Consumer.MaxWaitTime = 10 * time.Millisecond
	}
	group, err := sarama.NewConsumerGroup(spec.Brokers, spec.Group, cc)
	if err != nil {
		return fmt.Errorf("pg-copy consumer group: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var wg sync.WaitGroup
	wg.Go(func() {
		for e := range group.Errors() {
			logger.Warn("consumer group", "error", e)
		}
	})
	h := &copyHandler{spec: spec, pool: pool, fail: cancel, batches: &durationStats{}}
	err = consumeLoop(ctx, group, spec.Input, h)
	err = errors.Join(err, group.Close())
	wg.Wait()
	h.batches.fill(res)
	return errors.Join(err, causeOf(ctx))
}

type copyHandler struct {
	spec    *childSpec
	pool    *pgxpool.Pool
	fail    context.CancelCauseFunc
	batches *durationStats // how long each COPY took
}

func (h *copyHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *copyHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *copyHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	limit := h.spec.PGBatch
	if limit <= 0 {
		limit = 5000 // pgsink's default BatchRows and BatchRecords
	}
	ident := pgx.Identifier{h.spec.Table}
	rows := make([][]any, 0, limit)
	for {
		rows = rows[:0]
		var last *sarama.ConsumerMessage
		add := func(m *sarama.ConsumerMessage) {
			rows = append(rows, []any{m.Key, m.Value, m.Partition, m.Offset})
			last = m
		}
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			add(m)
		}
		timer := time.NewTimer(100 * time.Millisecond)
	fill:
		for len(rows) < limit {
			select {
			case m, ok := <-claim.Messages():
				if !ok {
					break fill
				}
				add(m)
			case <-timer.C:
				break fill
			case <-ctx.Done():
				timer.Stop()
				return nil
			}
		}
		timer.Stop()
		began := time.Now()
		if _, err := h.pool.CopyFrom(ctx, ident, pgColumns, pgx.CopyFromRows(rows)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = fmt.Errorf("pg-copy: COPY %d rows of partition %d: %w", len(rows), claim.Partition(), err)
			h.fail(err)
			return err
		}
		h.batches.add(time.Since(began))
		sess.MarkOffset(claim.Topic(), claim.Partition(), last.Offset+1, "")
	}
}

// runPGPipe runs sink/pgsink's write-ahead Pipe on the input.
func runPGPipe(ctx context.Context, spec *childSpec, reg metrics.Registry) error {
	pool, err := pgsink.Connect(ctx, spec.Postgres)
	if err != nil {
		return err
	}
	defer pool.Close()
	p, err := pgsink.NewPipe(ctx, pgsink.PipeConfig[[]byte, []byte]{
		App: spec.Group, Brokers: spec.Brokers, Topic: spec.Input,
		Key: serde.Bytes(), Value: serde.Bytes(), Pool: pool,
		Table:        pgSinkTable(spec.Table, false),
		Sarama:       saramaBase(spec, reg, spec.Group),
		BatchRecords: spec.PGBatch,
	})
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// pgTopology is the topology of an eddy PostgreSQL row: the input into a two-phase
// (pg-2pc) or upsert (pg-upsert) target, timed; or (drop) into nothing. close closes
// its pool after the application stopped.
func pgTopology(ctx context.Context, spec *childSpec, st *sinkStats) (topo *topology.Topology, closeFn func(), err error) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.Bytes(), serde.Bytes(), spec.Input)
	if spec.Topology == "drop" {
		topology.AddProcessor(b, "drop", func() processor.Processor[[]byte, []byte, []byte, []byte] { return dropper{} }, "in")
		topo, err = b.Build()
		return topo, func() {}, err
	}
	pool, err := pgsink.Connect(ctx, spec.Postgres)
	if err != nil {
		return nil, nil, err
	}
	opts := pgsink.Options{BatchRows: spec.PGBatch}
	var tg *pgsink.Target[[]byte, []byte]
	if spec.Topology == "pg-2pc" {
		tg, err = pgsink.NewTwoPhase(ctx, pool, pgSinkTable(spec.Table, false), opts)
	} else {
		tg, err = pgsink.NewUpsert(ctx, pool, pgSinkTable(spec.Table, true), opts)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	topology.AddSinkTo[[]byte, []byte](b, "pg", &timedTarget{Target: tg, st: st}, "in")
	topo, err = b.Build()
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return topo, pool.Close, nil
}

type dropper struct{}

func (dropper) Init(processor.Context[[]byte, []byte]) error   { return nil }
func (dropper) Process(processor.Record[[]byte, []byte]) error { return nil }
func (dropper) Close() error                                   { return nil }

// sinkStats times a target's steps: the writes of a unit of work (for the upsert, each
// full batch is written and committed inside a Write), its Prepare (two-phase: the
// buffered rows written, the marker, PREPARE TRANSACTION; upsert: the last batch and
// its COMMIT), and Commit (COMMIT PREPARED, after the Kafka commit).
type sinkStats struct {
	prepare, commit durationStats
	mu              sync.Mutex
	writing         time.Duration
}

func (s *sinkStats) fill(r *childResult) {
	var p, c childResult
	s.prepare.fill(&p)
	s.commit.fill(&c)
	r.SinkPrepares, r.SinkPrepareP50Ms, r.SinkPrepareP99Ms, r.SinkPrepareSec = p.Commits, p.CommitP50Ms, p.CommitP99Ms, p.CommitTotalSec
	r.SinkCommits, r.SinkCommitP50Ms, r.SinkCommitP99Ms, r.SinkCommitSec = c.Commits, c.CommitP50Ms, c.CommitP99Ms, c.CommitTotalSec
	s.mu.Lock()
	r.SinkWriteSec = s.writing.Seconds()
	s.mu.Unlock()
}

// timedTarget is a target whose steps are timed into st.
type timedTarget struct {
	*pgsink.Target[[]byte, []byte]
	st *sinkStats
}

func (t *timedTarget) Begin(ctx context.Context, id sink.TxnID) (sink.Txn[[]byte, []byte], error) {
	tx, err := t.Target.Begin(ctx, id)
	if err != nil {
		return nil, err
	}
	return &timedTxn{Txn: tx, st: t.st}, nil
}

func (t *timedTarget) Commit(ctx context.Context, id sink.TxnID) error {
	began := time.Now()
	err := t.Target.Commit(ctx, id)
	t.st.commit.add(time.Since(began))
	return err
}

type timedTxn struct {
	sink.Txn[[]byte, []byte]
	st      *sinkStats
	writing time.Duration
}

func (t *timedTxn) Write(ctx context.Context, rec sink.Record[[]byte, []byte]) error {
	began := time.Now()
	err := t.Txn.Write(ctx, rec)
	t.writing += time.Since(began)
	return err
}

func (t *timedTxn) Prepare(ctx context.Context) error {
	t.st.mu.Lock()
	t.st.writing += t.writing
	t.st.mu.Unlock()
	began := time.Now()
	err := t.Txn.Prepare(ctx)
	t.st.prepare.add(time.Since(began))
	return err
}
