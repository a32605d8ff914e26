//go:build unix

// Package eos is eddy's exactly-once proof harness: the method of design.md §10, as a
// library for the eos-verify command and the package's Go tests.
//
// A run:
//
//  1. creates the topics of a test application (Topology): echo (input to output
//     unchanged); per-key sum, count and max, each in a store and emitted on every
//     update; a repartition hop (re-key by value bucket) followed by a count; a windowed
//     aggregation (tumbling windows with grace: count, sum and last value per key and
//     window, every update emitted; WindowParams);
//  2. starts up to three instances of it as separate OS processes, each with its own
//     state dir (the harness re-executes its own binary; see InstanceEnv);
//  3. writes Records input records with unique values over Keys keys with an
//     idempotent producer (Produce), recording every acknowledged (partition, offset,
//     key, value); each record's timestamp is its event time (EventClock: from its
//     sequence number and the seed, out of order within the grace, 2% set back, some
//     of them late);
//  4. once the application has committed on every input partition, injects a seeded,
//     logged fault schedule (PlanFaults): SIGTERM one instance, SIGKILL one (its state
//     dir kept), SIGSTOP one past its session timeout and SIGCONT it (a zombie),
//     restart the stopped ones, and, when it controls the broker, kill -9 the broker
//     and restart it; optionally (Stall) SIGSTOP one past its transaction timeout but
//     within its session timeout, or (MoveTwice) make one stop itself inside a commit
//     and, once its tasks moved, stop and restart another, so they move again while
//     its transaction is open; optionally (RetentionChange) restart every killed or
//     stopped instance with its window store's retention switched, so that it finds its
//     window stores cut into segments of another interval, as after a changed grace;
//     a kill ends when the restarted instance has restored a store; throughout, group
//     members of processes that ended long ago and that the
//     broker kept (an embedded-broker bug) are removed and counted;
//  5. waits until the group's committed offsets reach the end of the input and of the
//     repartition topic, stops the instances with SIGTERM, and
//  6. verifies (Gather, then Check), reading everything with read_committed: every
//     output, repartition and changelog partition's last stable offset equals its end
//     offset (no hanging transaction); the echo topic equals the input per partition,
//     in order; every aggregate record equals its recomputation from the input, record
//     by record (a duplicate or a loss shifts every later value); no record that no
//     input explains; the windowed aggregation drops exactly the late records and its
//     updates equal their recomputation (checkWinUpdates; with final results, one per
//     closed window: checkWinFinals; with the join, exactly the pairs within the join
//     windows: checkJoins), with the operators' restarts the instances log
//     (OperatorStartMsg) taken into account; each state dir's stores equal a replay of their changelogs up to
//     their checkpoints, and the freshest reach the changelog's end; every restore right
//     after a SIGKILL started at the killed instance's checkpoint (only the tail).
//
// The result is one line (Result.Summary):
//
//	eos-verify: records=N kills=K stops=S pauses=Z broker-restarts=B duplicates=D lost=L hanging=H mismatched=M
//
// # Standbys and static membership (Config.Standbys, Config.Static; issue 24 item 5)
//
// eos-verify -standbys N gives each task N standby replicas (eddy.Config.
// NumStandbyReplicas); -static gives each instance a static group membership:
// eddy.Config.InstanceID "i<n>" (group.instance.id), kept across its restarts with its
// state dir, as a StatefulSet pod keeps its name and volume. With static IDs a killed
// or stopped instance restarted within its session timeout takes its tasks back in the
// same generation; the harness reads the generation of each assignment from the
// instances' logs and counts the restarts that came back without a rebalance
// (static-rejoins) and those that found a newer generation (rejoin-rebalances).
//
// -static also adds the replace fault (Replace): a stalled zombie with a static ID. A
// real one is a pod that stalls (a GC pause, a node cut off) while Kubernetes starts
// its replacement, with the same name, on another host; the old process resumes later.
// The two cannot share a state dir (its lock; another host's disk), so the harness
// stops the instance inside a commit (its stall file: output and changelog records
// written, offsets not committed), starts a replacement with the same InstanceID at
// once (within the session timeout: the coordinator replaces the member in the same
// generation) on a state dir of its own, and resumes the zombie once the replacement
// runs tasks. The first replacement of a run gets an empty state dir (the volume did
// not follow: another instance ID, so other transactional IDs, and only the member ID
// in the zombie's TxnOffsetCommit fences its commit: UNKNOWN_MEMBER_ID), the next a
// copy of the zombie's taken while it is stopped (a snapshot of the volume: the same
// instance ID, so the replacement's producers fence the zombie's transactions; its
// restores are checked as after a SIGKILL), alternately. The zombie must then stop on
// eddy's error for a replaced static member (zombies-fenced; anything else is an
// anomaly), and its state dir is checked with the others. The line gains
//
//	... broker-restarts=B replacements=R zombies-fenced=Z static-rejoins=J rejoin-rebalances=G duplicates=D ...
//
// TestShortMode runs its real-Kafka variant with one standby, static IDs and a replace
// among its five faults; the long form is
//
//	go run ./integration/eos/cmd/eos-verify -brokers HOST:PORT -static -standbys 1 \
//	  -records 200000 -keys 1000 -partitions 6 -faults 30 -fault-gap 5s
//
// (BENCHMARKS.md, "Exactly-once harness with standbys and static IDs", has its results).
//
// # The PostgreSQL target (Config.Postgres; pg.go, harness_pg.go)
//
// With a PostgreSQL database, the sum, count and max updates and the final results also
// go into PostgreSQL through package sink/pgsink, in its three modes at once: sink nodes
// with two-phase-commit targets (one row appended per update, COPY), sink nodes with
// idempotent-upsert targets (one row per key, per key and window), and, in every
// instance process beside the application, a write-ahead pgsink.Pipe per output topic
// (sums, counts, maxes, final results) reading it read_committed and appending one row
// per record with the consumed offsets in the same transaction. Each mode has its
// tables, <prefix>_<mode>_updates and <prefix>_<mode>_finals (PGTables).
//
// Faults on top of the others:
//   - the sink faults (SinkFaultKinds), at each step of the sink protocol: the harness
//     arms a step in a file (InstancePostgres.SinkFaultFile) and the first instance to
//     reach it, through the runtime's fault hook (sinktxn.SetFaultHook, which only the
//     instance processes set), logs SinkFaultMsg and kills itself with SIGKILL:
//     kill-after-prepare (a task's two-phase transactions prepared, the Kafka
//     transaction not committed), kill-after-kafka-commit (the Kafka transaction
//     committed, its sink transactions still prepared, the stores not flushed),
//     kill-before-commit-prepared (the post-commit about to COMMIT PREPARED), and
//     kill-in-recovery (a kill after a prepare, then the recovery step armed: the
//     instance whose task start finds that prepared transaction dies before it commits
//     or rolls it back, and the next recovery finishes it); the victim is restarted as
//     after a SIGKILL (its tail restore checked);
//   - PostgresCrash (Postgres.Crashes): integration/postgres.sh crash, pg_ctl stop -m
//     immediate and a start on the same data dir (WAL recovery; the prepared
//     transactions survive), while the instances write.
//
// After the application caught up, the harness waits until the pipes' stored offsets
// (eddy_sink_offsets) pass the last record of each topic, stops the instances, and the
// verifier reads the tables (GatherPostgres) and checks them against the recomputation
// from the input (checkPostgres): the two-phase and pipe tables update by update, as
// the topics are (a duplicate, a loss, a wrong value, an update out of order per key);
// the upsert tables key by key at the key's final aggregate; each mode's final results
// as the final-results topic is; and pg_prepared_xacts must hold no prepared
// transaction of the application. The line then reads
//
//	eos-verify: records=N kills=K stops=S pauses=Z broker-restarts=B pg-crashes=C sink-kills=F duplicates=D lost=L hanging=H mismatched=M pg-rows=R prepared-left=P
//
// (duplicates, lost and mismatched include the tables'), and Result.PostgresSummary
// gives the kills by step. TestShortModePostgres runs it in CI (each sink fault, a
// SIGKILL, a SIGSTOP past the session timeout, a PostgreSQL crash and, on real Kafka, a
// broker kill); eos-verify -postgres-script runs it in any mode.
//
// and the run's work dir keeps the instances' logs (JSON lines), their state dirs, the
// acknowledged input (acked.tsv) and the report with the first problems of each kind.
package eos
