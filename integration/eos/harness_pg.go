//go:build unix

package eos

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/sinktxn"
	"github.com/eddy-streams/eddy/sink/pgsink"
)

// pgSetup connects the harness to the run's database and creates the run's tables.
func (h *harness) pgSetup(ctx context.Context) error {
	pool, err := pgsink.Connect(ctx, h.cfg.Postgres.DSN)
	if err != nil {
		return fmt.Errorf("eos: PostgreSQL: %w", err)
	}
	h.pg = pool
	h.pgTables = PGTablesFor(h.cfg.Prefix)
	return h.pgTables.Create(ctx, pool)
}

// instancePostgres is an instance's part of the PostgreSQL target.
func (h *harness) instancePostgres() *InstancePostgres {
	if h.cfg.Postgres == nil {
		return nil
	}
	return &InstancePostgres{DSN: h.cfg.Postgres.DSN, Tables: h.pgTables, SinkFaultFile: h.sinkFaultFile()}
}

func (h *harness) sinkFaultFile() string { return filepath.Join(h.cfg.WorkDir, "sink-fault") }

// sinkStep is the step a sink fault kills at, and the part of the sink node's name it
// waits for: a kill after a prepare waits for a two-phase transaction (an upsert's
// "prepare" commits, and leaves nothing for the recovery).
func sinkStep(k FaultKind) (sinktxn.Step, string) {
	switch k {
	case KillAfterPrepare, KillInRecovery:
		return sinktxn.StepPrepared, PGTwoPhase
	case KillAfterKafkaCommit:
		return sinktxn.StepKafkaCommitted, ""
	case KillBeforeCommitPrepared:
		return sinktxn.StepCommitPrepared, ""
	}
	return sinktxn.StepRecover, ""
}

// injectSink runs a sink fault: arms the step, waits for the instance that kills
// itself there, restarts it like a killed one. KillInRecovery then arms the recovery
// step before the restart, so that the instance that recovers the victim's tasks (the
// victim or another) dies in the middle of it.
func (h *harness) injectSink(ctx context.Context, f Fault) error {
	step, node := sinkStep(f.Kind)
	if err := h.armSink(step, node); err != nil {
		return err
	}
	victim, err := h.sinkKill(ctx, step, 30*time.Second)
	if err != nil || victim == nil {
		return err
	}
	if f.Kind == KillInRecovery {
		if err := h.armSink(sinktxn.StepRecover, ""); err != nil {
			return err
		}
		if err := h.restartKilled(ctx, f, victim, false); err != nil {
			return err
		}
		// The victim's session expires, its tasks move, and their recovery finds the
		// prepared transaction.
		second, err := h.sinkKill(ctx, sinktxn.StepRecover, h.cfg.SessionTimeout+45*time.Second)
		if err != nil || second == nil {
			return err
		}
		victim = second
	}
	return h.restartKilled(ctx, f, victim, true)
}

// armSink arms step for the instances' fault hooks (node: a part of the sink node's
// name, "" any).
func (h *harness) armSink(step sinktxn.Step, node string) error {
	arm := string(step)
	if node != "" {
		arm += " " + node
	}
	if err := os.WriteFile(h.sinkFaultFile(), []byte(arm), 0o644); err != nil {
		return fmt.Errorf("eos: sink fault file: %w", err)
	}
	return nil
}

// sinkKill waits up to timeout for the instance that killed itself at the armed step;
// nil when none did (the step is disarmed and counted as missed). An instance that
// took the step before the call (KillInRecovery's, during the victim's restart) is
// found too: it is dead, not yet revived, and logged the step.
func (h *harness) sinkKill(ctx context.Context, step sinktxn.Step, timeout time.Duration) (*instance, error) {
	file := h.sinkFaultFile()
	deadline, taken := time.Now().Add(timeout), false
	for {
		for _, in := range h.instances {
			if p := in.proc; p != nil && !p.expected && p.exited() && p.sinkFaultStep() == string(step) {
				p.expected = true
				h.res.Kills++
				if h.res.SinkKills == nil {
					h.res.SinkKills = map[string]int{}
				}
				h.res.SinkKills[string(step)]++
				h.logger.Info("eos: killed itself at a step of the sink protocol", "instance", p.name, "step", step, "at", h.elapsed())
				return in, nil
			}
		}
		if time.Now().After(deadline) {
			if taken || os.Remove(file) == nil {
				h.res.SinkFaultsMissed++
				h.logger.Warn("eos: no instance reached the armed step of the sink protocol", "step", step, "within", timeout)
				return nil, nil
			}
			// The file is gone: an instance took it and is dying.
			deadline, taken = time.Now().Add(10*time.Second), true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// restartKilled restarts an instance that died of SIGKILL after f.Down, with the
// checkpoints its state dir held (the tail restore check); wait: until it restored a
// store.
func (h *harness) restartKilled(ctx context.Context, f Fault, in *instance, wait bool) error {
	snaps, err := ReadStateDir(in.cfg.StateDir, h.names.App)
	if err != nil {
		h.anomaly("%s: state dir after SIGKILL unreadable: %v", in.proc.name, err)
	}
	afterKill := checkpoints(snaps)
	// A plain sleep, not sleepUntil: that revives crashed instances, and with the
	// recovery step armed (KillInRecovery) the instance that kills itself there must be
	// found by sinkKill, not reported as a crash.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.Down):
	}
	h.logger.Info("eos: restarting", "instance", in.cfg.Name, "at", h.elapsed())
	if err := in.start(afterKill); err != nil {
		return err
	}
	if wait {
		return h.waitRestoring(ctx, in.proc)
	}
	return nil
}

// crashPostgres runs a PostgresCrash fault.
func (h *harness) crashPostgres(ctx context.Context) error {
	began := time.Now()
	if err := h.cfg.Postgres.Control.Crash(ctx); err != nil {
		return err
	}
	h.res.PostgresCrashes++
	h.logger.Info("eos: PostgreSQL crashed and back", "at", h.elapsed(), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// waitPipes waits until the write-ahead pipes have written every record of the topics
// they copy: each partition's stored next offset past its last record.
func (h *harness) waitPipes(ctx context.Context) error {
	client, err := newClient(h.cfg.Brokers)
	if err != nil {
		return err
	}
	defer client.Close()
	type tp struct {
		topic string
		p     int32
	}
	lastData, readTo := map[tp]int64{}, map[tp]int64{}
	deadline := time.Now().Add(h.cfg.CatchUpTimeout)
	lastLog := time.Time{}
	topics := pipeTopics(h.names)
	for {
		h.reviveCrashed()
		h.removeDeadMembers()
		behind := ""
		for _, store := range slices.Sorted(maps.Keys(topics)) {
			topic := topics[store]
			parts, err := client.Partitions(topic)
			if err != nil {
				return fmt.Errorf("eos: partitions of %s: %w", topic, err)
			}
			stored := map[int32]int64{}
			rows, err := h.pg.Query(ctx, "SELECT partition, next_offset FROM eddy_sink_offsets WHERE app = $1 AND topic = $2", pipeApp(h.names, store), topic)
			if err == nil {
				for rows.Next() {
					var p int32
					var next int64
					if err = rows.Scan(&p, &next); err != nil {
						break
					}
					stored[p] = next
				}
				rows.Close()
				if err == nil {
					err = rows.Err()
				}
			}
			if err != nil {
				behind = fmt.Sprintf("offsets of pipe %s unreadable: %v", pipeApp(h.names, store), err)
				break
			}
			for _, p := range parts {
				k := tp{topic, p}
				stable, err := kread.ListOffset(client, topic, p, sarama.OffsetNewest)
				if err != nil {
					return err
				}
				if err := kread.ReadRange(ctx, client, topic, p, readTo[k], stable, func(r kread.Record) error {
					lastData[k] = r.Offset + 1
					return nil
				}); err != nil {
					return err
				}
				readTo[k] = stable
				if lastData[k] > 0 && stored[p] < lastData[k] {
					behind = fmt.Sprintf("pipe %s at %d of %d in %s/%d", pipeApp(h.names, store), stored[p], lastData[k], topic, p)
					break
				}
			}
			if behind != "" {
				break
			}
		}
		if behind == "" {
			h.logger.Info("eos: the pipes caught up", "at", h.elapsed())
			return nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			h.logger.Info("eos: waiting for the pipes to catch up", "at", h.elapsed(), "status", behind)
		}
		if time.Now().After(deadline) {
			h.anomaly("the write-ahead pipes did not copy every record within %v: %s", h.cfg.CatchUpTimeout, behind)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// PGObserved is what the verifier reads back from PostgreSQL.
type PGObserved struct {
	// Updates are the aggregate updates by mode and store, per partition, in the order
	// they were written (two-phase and pipe: every row; upsert: one row per key, its
	// Offset the source offset that wrote it).
	Updates map[string]map[string]map[int32][]OutRecord
	// Finals are the final results by mode, per partition.
	Finals map[string]map[int32][]WinRecord
	// Prepared are the GIDs of the application's prepared transactions left behind
	// (pg_prepared_xacts).
	Prepared []string
}

// GatherPostgres reads a run's tables and the application's prepared transactions.
func GatherPostgres(ctx context.Context, pool *pgxpool.Pool, t PGTables, app string) (*PGObserved, error) {
	o := &PGObserved{Updates: map[string]map[string]map[int32][]OutRecord{}, Finals: map[string]map[int32][]WinRecord{}}
	for _, mode := range PGModes() {
		order, off := "id", "id"
		if mode == PGUpsert {
			order, off = "store, key", "eddy_offset"
		}
		rows, err := pool.Query(ctx, fmt.Sprintf("SELECT store, key, input, value, part, %s FROM %s ORDER BY %s", off, pgx.Identifier{t.Updates(mode)}.Sanitize(), order))
		if err != nil {
			return nil, fmt.Errorf("eos: read %s: %w", t.Updates(mode), err)
		}
		up := map[string]map[int32][]OutRecord{}
		for rows.Next() {
			var store string
			var part int32
			var rec OutRecord
			if err := rows.Scan(&store, &rec.Key, &rec.Input, &rec.Value, &part, &rec.Offset); err != nil {
				rows.Close()
				return nil, fmt.Errorf("eos: read %s: %w", t.Updates(mode), err)
			}
			if up[store] == nil {
				up[store] = map[int32][]OutRecord{}
			}
			up[store][part] = append(up[store][part], rec)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("eos: read %s: %w", t.Updates(mode), err)
		}
		o.Updates[mode] = up
		order = "id"
		if mode == PGUpsert {
			order, off = "key, start", "eddy_offset"
		}
		rows, err = pool.Query(ctx, fmt.Sprintf("SELECT key, start, count, sum, last, ts, part, %s FROM %s ORDER BY %s", off, pgx.Identifier{t.Finals(mode)}.Sanitize(), order))
		if err != nil {
			return nil, fmt.Errorf("eos: read %s: %w", t.Finals(mode), err)
		}
		fin := map[int32][]WinRecord{}
		for rows.Next() {
			var part int32
			var rec WinRecord
			if err := rows.Scan(&rec.Key, &rec.Start, &rec.Agg.Count, &rec.Agg.Sum, &rec.Agg.Last, &rec.Timestamp, &part, &rec.Offset); err != nil {
				rows.Close()
				return nil, fmt.Errorf("eos: read %s: %w", t.Finals(mode), err)
			}
			if rec.Agg.Count < 0 {
				rec.Bad = "a final result with no value (nil) was written"
			}
			fin[part] = append(fin[part], rec)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("eos: read %s: %w", t.Finals(mode), err)
		}
		o.Finals[mode] = fin
	}
	left, err := pgsink.Leftovers(ctx, pool, app)
	if err != nil {
		return nil, err
	}
	for _, l := range left {
		o.Prepared = append(o.Prepared, l.GID)
	}
	return o, nil
}

// checkPostgres checks the PostgreSQL target against the recomputation from the input:
// the two-phase and pipe tables update by update as the topics are (checkAggregate,
// checkWinFinals: a duplicate, a loss, a wrong value, an update out of order); the
// upsert tables key by key, each at its key's final aggregate, and each window's
// final result (no duplicate can show in a keyed table: a replay rewrites the row);
// and no prepared transaction of the application left behind.
func checkPostgres(o *Observed, e *expectations, we *winExpect, r *Report) {
	pg := o.Postgres
	r.PGPrepared = len(pg.Prepared)
	for _, gid := range pg.Prepared {
		r.problem("postgres-prepared", "prepared transaction %s left behind", gid)
	}
	for _, mode := range PGModes() {
		sub := &Report{}
		po := *o
		po.Outputs = pg.Updates[mode]
		po.WinFinals = pg.Finals[mode]
		if po.WinFinals == nil {
			po.WinFinals = map[int32][]WinRecord{}
		}
		for _, store := range []string{StoreSum, StoreCount, StoreMax} {
			if po.Outputs[store] == nil {
				po.Outputs[store] = map[int32][]OutRecord{}
			}
			if mode == PGUpsert {
				checkUpsert(&po, e, sub, store)
			} else {
				checkAggregate(&po, e, sub, store)
			}
			for _, recs := range po.Outputs[store] {
				r.PGRows += len(recs)
			}
		}
		checkWinFinals(&po, we, sub)
		for _, recs := range po.WinFinals {
			r.PGRows += len(recs)
		}
		r.Duplicates += sub.Duplicates
		r.Lost += sub.Lost
		r.Mismatched += sub.Mismatched
		for _, p := range sub.Problems {
			r.Problems = append(r.Problems, "postgres "+mode+": "+p)
		}
	}
}

// checkUpsert checks an upsert table's rows of a store: one per key, in the key's
// partition, at the key's final aggregate.
func checkUpsert(o *Observed, e *expectations, r *Report, store string) {
	seen := map[int32]map[string]bool{}
	for _, q := range sortedPartitions(o.Outputs[store]) {
		for _, rec := range o.Outputs[store][q] {
			want, ok := e.final[store][q][rec.Key]
			switch {
			case !ok:
				r.Mismatched++
				r.problem(store, "key %s in partition %d (offset %d): no input record of that key there", rec.Key, q, rec.Offset)
			case rec.Value != want:
				r.Mismatched++
				r.problem(store, "key %s: %s %d (after input %d, offset %d), recomputed %d", rec.Key, store, rec.Value, rec.Input, rec.Offset, want)
			}
			if seen[q] == nil {
				seen[q] = map[string]bool{}
			}
			if seen[q][rec.Key] {
				r.Duplicates++
				r.problem("duplicate", "%s key %s: two rows", store, rec.Key)
			}
			seen[q][rec.Key] = true
		}
	}
	for p, keys := range e.final[store] {
		for k := range keys {
			if !seen[p][k] {
				r.Lost++
				r.problem("lost", "%s: no row of key %s (partition %d)", store, k, p)
			}
		}
	}
}

// PostgresSummary is a line about the PostgreSQL target: rows checked, the sink
// faults by step, the armed steps no instance reached.
func (r *Result) PostgresSummary() string {
	rows, left := 0, 0
	if r.Report != nil {
		rows, left = r.Report.PGRows, r.Report.PGPrepared
	}
	var steps []string
	for _, s := range sinktxn.Steps() {
		steps = append(steps, fmt.Sprintf("%s=%d", s, r.SinkKills[string(s)]))
	}
	return fmt.Sprintf("postgres: %d rows checked in %d modes, %d crashes, sink kills at %s, %d armed steps missed, %d prepared transactions left",
		rows, len(PGModes()), r.PostgresCrashes, strings.Join(steps, " "), r.SinkFaultsMissed, left)
}
