//go:build unix

package eos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/sink/pgsink"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// The PostgreSQL target (Config.Postgres): the application's per-key aggregates (sum,
// count, max) and its windowed final results also go into PostgreSQL through package
// sink/pgsink, in each of its three modes at once:
//
//   - two-phase commit (PGTwoPhase): sink nodes with a pgsink.NewTwoPhase target, one
//     row per update appended (COPY), so a duplicate or a loss shows as it does in a
//     topic;
//   - idempotent upserts (PGUpsert): sink nodes with a pgsink.NewUpsert target, one row
//     per key (per key and window), which must end at the key's final aggregate;
//   - write-ahead (PGPipe): a pgsink.Pipe per output topic in each instance process,
//     reading the topic read_committed and appending one row per record, with the
//     consumed offsets in the same PostgreSQL transaction.
//
// The modes' tables are <prefix>_<mode>_updates and <prefix>_<mode>_finals (PGTables).
const (
	PGTwoPhase = "2pc"
	PGUpsert   = "upsert"
	PGPipe     = "pipe"
)

// PGModes are the modes, in the order the report lists them.
func PGModes() []string { return []string{PGTwoPhase, PGUpsert, PGPipe} }

// PostgresConfig turns on the PostgreSQL target of a run.
type PostgresConfig struct {
	// DSN of the database the instances write into and the verifier reads. Its server
	// needs max_prepared_transactions > 0.
	DSN string
	// Control crashes the server for the PostgresCrash faults (nil: none).
	Control PostgresControl
	// Crashes is the number of PostgresCrash faults, placed at random among the others.
	Crashes int
}

// PostgresControl crashes the server: stopped at once (no checkpoint) and started
// again on its data dir.
type PostgresControl interface {
	Crash(ctx context.Context) error
}

// ScriptPostgres controls a server with integration/postgres.sh; Env is added to the
// script's environment (EDDY_POSTGRES_HOME, EDDY_POSTGRES_PORT).
type ScriptPostgres struct {
	Script string
	Env    []string
}

func (s ScriptPostgres) run(ctx context.Context, arg string) (string, error) {
	cmd := exec.CommandContext(ctx, s.Script, arg)
	cmd.Env = append(os.Environ(), s.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("eos: %s %s: %w\n%s", s.Script, arg, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Start starts a fresh server (integration/postgres.sh start) and returns its DSN.
func (s ScriptPostgres) Start(ctx context.Context) (string, error) {
	out, err := s.run(ctx, "start")
	if err != nil {
		return "", err
	}
	lines := strings.Split(out, "\n")
	return lines[len(lines)-1], nil
}

// Crash implements PostgresControl with "postgres.sh crash" (pg_ctl stop -m
// immediate, then start on the same data dir: WAL recovery runs).
func (s ScriptPostgres) Crash(ctx context.Context) error {
	_, err := s.run(ctx, "crash")
	return err
}

// Purge stops the server and deletes its data dir.
func (s ScriptPostgres) Purge(ctx context.Context) error {
	_, err := s.run(ctx, "purge")
	return err
}

// PGTables names a run's tables.
type PGTables struct {
	Prefix string `json:"prefix"`
}

// PGTablesFor derives the table names from the run's prefix (lowercase letters,
// digits and '_').
func PGTablesFor(prefix string) PGTables {
	var b strings.Builder
	for _, r := range strings.ToLower(prefix) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	return PGTables{Prefix: b.String()}
}

// Updates is the table of a mode's aggregate updates.
func (t PGTables) Updates(mode string) string { return t.Prefix + "_" + mode + "_updates" }

// Finals is the table of a mode's windowed final results.
func (t PGTables) Finals(mode string) string { return t.Prefix + "_" + mode + "_finals" }

// Create creates the tables of every mode.
func (t PGTables) Create(ctx context.Context, pool *pgxpool.Pool) error {
	for _, mode := range PGModes() {
		up, fin := pgx.Identifier{t.Updates(mode)}.Sanitize(), pgx.Identifier{t.Finals(mode)}.Sanitize()
		var ddl string
		if mode == PGUpsert {
			ddl = fmt.Sprintf(`CREATE TABLE %s (store text NOT NULL, key text NOT NULL, input bigint NOT NULL, value bigint NOT NULL, part integer NOT NULL,
				eddy_partition integer NOT NULL, eddy_offset bigint NOT NULL, PRIMARY KEY (store, key));
				CREATE TABLE %s (key text NOT NULL, start bigint NOT NULL, count bigint NOT NULL, sum bigint NOT NULL, last bigint NOT NULL, ts bigint NOT NULL,
				part integer NOT NULL, eddy_partition integer NOT NULL, eddy_offset bigint NOT NULL, PRIMARY KEY (key, start))`, up, fin)
		} else {
			// Appended rows; id orders them as they were written (a task's transactions
			// write one after the other, a pipe's batches too).
			ddl = fmt.Sprintf(`CREATE TABLE %s (id bigserial PRIMARY KEY, store text NOT NULL, key text NOT NULL, input bigint NOT NULL, value bigint NOT NULL, part integer NOT NULL);
				CREATE TABLE %s (id bigserial PRIMARY KEY, key text NOT NULL, start bigint NOT NULL, count bigint NOT NULL, sum bigint NOT NULL, last bigint NOT NULL, ts bigint NOT NULL, part integer NOT NULL)`, up, fin)
		}
		if _, err := pool.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("eos: create the %s tables %s and %s: %w", mode, t.Updates(mode), t.Finals(mode), err)
		}
	}
	return nil
}

// PGUpdate is an aggregate's update tagged with its store, as the sink nodes write it.
type PGUpdate struct {
	Store string
	Update
}

var (
	updateColumns = []string{"store", "key", "input", "value", "part"}
	finalColumns  = []string{"key", "start", "count", "sum", "last", "ts", "part"}
)

func updateRow(r sink.Record[string, PGUpdate]) ([]any, error) {
	return []any{r.Value.Store, r.Key, r.Value.Input, r.Value.Value, r.Partition}, nil
}

// finalRow writes a final result; a nil one (the suppression never emits one) as
// count -1, which the verifier reports.
func finalRow(r sink.Record[window.Windowed[string], *WinAgg]) ([]any, error) {
	a := WinAgg{Count: -1, Sum: -1, Last: -1}
	if r.Value != nil {
		a = *r.Value
	}
	return []any{r.Key.Key, r.Key.Window.StartMs(), a.Count, a.Sum, a.Last, r.Timestamp.UnixMilli(), r.Partition}, nil
}

// PGTargets are the sink targets of the two-phase and upsert modes, given to Topology.
type PGTargets struct {
	Updates map[string]sink.Target[string, PGUpdate]                 // by mode
	Finals  map[string]sink.Target[window.Windowed[string], *WinAgg] // by mode
}

// NewPGTargets makes the two-phase and upsert targets on pool.
func NewPGTargets(ctx context.Context, pool *pgxpool.Pool, t PGTables) (*PGTargets, error) {
	pt := &PGTargets{Updates: map[string]sink.Target[string, PGUpdate]{}, Finals: map[string]sink.Target[window.Windowed[string], *WinAgg]{}}
	for _, mode := range []string{PGTwoPhase, PGUpsert} {
		ut := pgsink.Table[string, PGUpdate]{Name: t.Updates(mode), Columns: updateColumns, Row: updateRow}
		ft := pgsink.Table[window.Windowed[string], *WinAgg]{Name: t.Finals(mode), Columns: finalColumns, Row: finalRow}
		if mode == PGTwoPhase {
			u, err := pgsink.NewTwoPhase(ctx, pool, ut, pgsink.Options{})
			if err != nil {
				return nil, err
			}
			f, err := pgsink.NewTwoPhase(ctx, pool, ft, pgsink.Options{})
			if err != nil {
				return nil, err
			}
			pt.Updates[mode], pt.Finals[mode] = u, f
			continue
		}
		ut.Key, ft.Key = []string{"store", "key"}, []string{"key", "start"}
		u, err := pgsink.NewUpsert(ctx, pool, ut, pgsink.Options{})
		if err != nil {
			return nil, err
		}
		f, err := pgsink.NewUpsert(ctx, pool, ft, pgsink.Options{})
		if err != nil {
			return nil, err
		}
		pt.Updates[mode], pt.Finals[mode] = u, f
	}
	return pt, nil
}

// addPGSinks adds the sink nodes of the two-phase and upsert modes: the aggregators'
// updates tagged with their store (pg-tag-<store>) into pg-<mode>-updates, the final
// results into pg-<mode>-finals.
func addPGSinks(b *topology.Builder, finals stream.Stream[window.Windowed[string], *WinAgg], pg *PGTargets) {
	var tags []string
	for _, store := range []string{StoreSum, StoreCount, StoreMax} {
		tag := "pg-tag-" + store
		topology.AddProcessor(b, tag, processor.Map(func(r processor.Record[string, Update]) (processor.Record[string, PGUpdate], error) {
			return processor.WithValue(r, PGUpdate{Store: store, Update: r.Value}), nil
		}), store+"-agg")
		tags = append(tags, tag)
	}
	for _, mode := range []string{PGTwoPhase, PGUpsert} {
		topology.AddSinkTo(b, "pg-"+mode+"-updates", pg.Updates[mode], tags...)
		finals.ToSink(pg.Finals[mode], stream.Named("pg-"+mode+"-finals"))
	}
}

// pipeApp names the pipe of an output topic.
func pipeApp(n Names, store string) string { return n.App + "-pipe-" + store }

// pipeTopics are the output topics the pipes copy, by store (OutWinFinals: the final
// results).
func pipeTopics(n Names) map[string]string {
	return map[string]string{StoreSum: n.Sums, StoreCount: n.Counts, StoreMax: n.Maxes, OutWinFinals: n.WinFinals}
}

// runPipes runs the write-ahead mode's pipes until ctx ends; an error of one (a record
// refused, one that does not decode) ends them all.
func runPipes(ctx context.Context, cfg InstanceConfig, pool *pgxpool.Pool, logger *slog.Logger) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 4)
	n := 0
	for store, topic := range pipeTopics(cfg.Names) {
		var run func(context.Context) error
		if store == OutWinFinals {
			p, err := pgsink.NewPipe(ctx, pgsink.PipeConfig[window.Windowed[string], *WinAgg]{
				App: pipeApp(cfg.Names, store), Brokers: cfg.Brokers, Topic: topic, Pool: pool,
				Key: window.TimeWindowedSerde(serde.String(), cfg.Windows.Size()), Value: serde.Nullable(WinAggSerde()),
				Table:  pgsink.Table[window.Windowed[string], *WinAgg]{Name: cfg.Postgres.Tables.Finals(PGPipe), Columns: finalColumns, Row: finalRow},
				Logger: logger, Sarama: pipeSarama(cfg),
			})
			if err != nil {
				return err
			}
			run = p.Run
		} else {
			p, err := pgsink.NewPipe(ctx, pgsink.PipeConfig[string, Update]{
				App: pipeApp(cfg.Names, store), Brokers: cfg.Brokers, Topic: topic, Pool: pool,
				Key: serde.String(), Value: UpdateSerde(),
				Table: pgsink.Table[string, Update]{Name: cfg.Postgres.Tables.Updates(PGPipe), Columns: updateColumns,
					Row: func(r sink.Record[string, Update]) ([]any, error) {
						return []any{store, r.Key, r.Value.Input, r.Value.Value, r.Partition}, nil
					}},
				Logger: logger, Sarama: pipeSarama(cfg),
			})
			if err != nil {
				return err
			}
			run = p.Run
		}
		n++
		go func() {
			err := run(ctx)
			if err != nil {
				err = fmt.Errorf("pipe of %s: %w", topic, err)
				cancel(err)
			}
			done <- err
		}()
	}
	var errs []error
	for range n {
		errs = append(errs, <-done)
	}
	return errors.Join(errs...)
}

func pipeSarama(cfg InstanceConfig) *sarama.Config {
	sc := sarama.NewConfig()
	sc.Version = sarama.V2_1_0_0
	sc.ClientID = pipeClientID(cfg.Name)
	if s := cfg.SessionTimeout; s > 0 {
		sc.Consumer.Group.Session.Timeout = s
		sc.Consumer.Group.Heartbeat.Interval = s / 5
	}
	return sc
}

// pipeClientID is the Kafka client ID of the pipes of the instance process named name.
func pipeClientID(name string) string { return ClientID(name) + "-pipe" }

// InstancePostgres is an instance's part of the PostgreSQL target.
type InstancePostgres struct {
	DSN    string   `json:"dsn"`
	Tables PGTables `json:"tables"`
	// SinkFaultFile arms the sink protocol's fault hook (sinktxn.SetFaultHook): when
	// the instance reaches the step the file names ("<step>" or "<step> <node part>"),
	// the one instance that deletes the file logs SinkFaultMsg and kills itself with
	// SIGKILL.
	SinkFaultFile string `json:"sink_fault_file,omitempty"`
}

// SinkFaultMsg is the message of the log line an instance writes just before it kills
// itself at an armed step of the sink protocol.
const SinkFaultMsg = "eos-sink-fault"

// armSinkFaults installs the fault hook of an instance.
func armSinkFaults(file string, logger *slog.Logger) {
	if file == "" {
		return
	}
	sinktxn.SetFaultHook(func(step sinktxn.Step, id sinktxn.ID) {
		b, err := os.ReadFile(file)
		if err != nil {
			return
		}
		want, node, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if want != string(step) || !strings.Contains(id.Node, node) || os.Remove(file) != nil {
			return
		}
		logger.Info(SinkFaultMsg, "step", string(step), "txn", id.String())
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way: nothing more of this step may happen
	})
}

// connectPostgres opens the instance's pool and targets, retrying while the server is
// down (a PostgresCrash fault may be under way when the instance starts).
func connectPostgres(ctx context.Context, cfg *InstancePostgres, logger *slog.Logger) (*pgxpool.Pool, *PGTargets, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pool, err := pgsink.Connect(ctx, cfg.DSN)
		if err == nil {
			var pt *PGTargets
			if pt, err = NewPGTargets(ctx, pool, cfg.Tables); err == nil {
				return pool, pt, nil
			}
			pool.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil || !pgsink.Retriable(err) {
			return nil, nil, fmt.Errorf("eos: PostgreSQL at %s: %w", cfg.DSN, err)
		}
		logger.Warn("eos: PostgreSQL not reachable; retrying", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
