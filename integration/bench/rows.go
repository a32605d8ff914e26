//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// rowDef is one row of the table.
type rowDef struct {
	name, group string
	desc        string  // what the row runs, for the table
	unit        string  // what its rate counts
	ceiling     string  // the row whose rate (latency rows: p50) this one is compared with
	altCeiling  string  // a second ceiling shown beside the first (the target applies to the first)
	target      float64 // minimum ratio to the ceiling; 0: none
	rssTarget   float64 // peak RSS target in MB; 0: none
	p99Target   float64 // latency rows: maximum p99 over the ceiling's p99; 0: none
	twin        string  // the Kafka Streams row running the same topology on the same input (issue 13's targets)
	vocab       int     // word-count rows: distinct words of the input's vocabulary (0: -vocab)
	ksDefaults  bool    // a Kafka Streams word count run with its defaults: record cache on (statestore.cache.max.bytes unset)
	latency     bool
	run         func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error)
}

// runResult is one run of a row.
type runResult struct {
	Row      string
	Round    int
	Warmup   bool
	Units    int64   // records (words, keys) the run handled
	Bytes    int64   // their key and value bytes
	Seconds  float64 // measured time
	Rate     float64 // units per second
	MBps     float64
	CPU      float64 // child's user + system seconds
	CPUPerM  float64 // per million units
	MaxRSSMB float64
	// Peak resident anonymous and file-backed memory, sampled every 50 ms.
	PeakAnonMB float64      `json:",omitempty"`
	PeakFileMB float64      `json:",omitempty"`
	PGCPU      float64      `json:",omitempty"` // postgres rows: the server's CPU seconds while the child ran
	PGCPUPerM  float64      `json:",omitempty"` // per million units
	PGRows     int64        `json:",omitempty"` // postgres rows: the table's rows at the end
	Startup    float64      `json:",omitempty"` // s from the child's start to its first output
	Resume     float64      `json:",omitempty"` // restore rows: s from Run until every task processed a record
	Restored   int64        `json:",omitempty"` // restore rows: changelog records restored
	P50        float64      `json:",omitempty"` // latency rows, ms
	P99        float64      `json:",omitempty"`
	Max        float64      `json:",omitempty"`
	LatRate    int          `json:",omitempty"` // latency rows: offered records/s
	LatCount   int          `json:",omitempty"` // latency rows: records measured
	OutRecords int64        `json:",omitempty"` // word-count rows: committed output records
	Keys       int64        `json:",omitempty"` // word-count rows: distinct words in the input
	Tasks      int          `json:",omitempty"` // cost rows: the instance's tasks
	Scale      *scaleResult `json:",omitempty"` // scale rows
	Child      childResult
}

// rowTable is every row, in the order they run and print.
func rowTable() []*rowDef {
	const ms100, sec = 100 * time.Millisecond, time.Second
	return append([]*rowDef{
		{name: "pipe-raw", group: "throughput", unit: "records", desc: "sarama consumer group → idempotent producer, no framework (ALOS ceiling)", run: pipeRow(false, ms100, false)},
		{name: "pipe-txn", group: "throughput", unit: "records", ceiling: "pipe-raw", desc: "the same in transactions every 100 ms, one producer per partition (EOS ceiling)", run: pipeRow(true, ms100, false)},
		{name: "pipe-txn-1s", group: "throughput", unit: "records", ceiling: "pipe-raw", desc: "the same, transactions every 1 s", run: pipeRow(true, sec, false)},
		{name: "pipe-txn-2hop", group: "throughput", unit: "records", ceiling: "pipe-txn", desc: "two transactional pipes chained through a topic, input → mid → output (100 ms, one producer per partition and hop): the ceiling of a topology with one repartition", run: pipeTxn2HopRow},
		{name: "pipe-txn-1p", group: "throughput", unit: "records", ceiling: "pipe-txn", desc: "transactions every 100 ms, ONE producer for all partitions", run: pipeRow(true, ms100, true)},
		{name: "pass-alos-100ms", group: "throughput", unit: "records", ceiling: "pipe-raw", target: 0.85, desc: "eddy passthrough, at-least-once, commit 100 ms", run: eddyRow("passthrough", false, ms100)},
		{name: "pass-alos-1s", group: "throughput", unit: "records", ceiling: "pipe-raw", target: 0.85, desc: "eddy passthrough, at-least-once, commit 1 s", run: eddyRow("passthrough", false, sec)},
		{name: "pass-eos-100ms", group: "throughput", unit: "records", ceiling: "pipe-txn", desc: "eddy passthrough, exactly-once, commit 100 ms", run: eddyRow("passthrough", true, ms100)},
		{name: "pass-eos-1s", group: "throughput", unit: "records", ceiling: "pipe-txn-1s", desc: "eddy passthrough, exactly-once, commit 1 s", run: eddyRow("passthrough", true, sec)},
		{name: "wc-alos-100ms", group: "throughput", unit: "words", ceiling: "pipe-raw", desc: "eddy word count, at-least-once, commit 100 ms", run: eddyRow("wordcount", false, ms100)},
		{name: "wc-alos-1s", group: "throughput", unit: "words", ceiling: "pipe-raw", desc: "eddy word count, at-least-once, commit 1 s", run: eddyRow("wordcount", false, sec)},
		{name: "wc-eos-100ms", group: "throughput", unit: "words", ceiling: "pipe-txn", altCeiling: "pipe-txn-2hop", target: 0.70, twin: "ks-wc-eos-100ms", desc: "eddy word count, exactly-once, commit 100 ms", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-eos-100ms-pertask", group: "throughput", unit: "words", ceiling: "wc-eos-100ms", desc: "the same with a producer per task (Config.ProducerPerTask) instead of per worker", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-eos-100ms-w4", group: "throughput", unit: "words", ceiling: "wc-eos-100ms", desc: "the same with 4 workers (Config.Workers) instead of GOMAXPROCS", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-eos-100ms-w8", group: "throughput", unit: "words", ceiling: "wc-eos-100ms", desc: "the same with 8 workers (Config.Workers) instead of GOMAXPROCS", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-eos-100ms-overlap", group: "overlap", unit: "words", ceiling: "wc-eos-100ms", desc: "wc-eos-100ms with overlapped commits (Config.OverlapCommits): the worker processes on while its commit commits", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-eos-100ms-overlap-p64", group: "overlap", unit: "words", ceiling: "wc-eos-100ms-p64", desc: "wc-eos-100ms-p64 with overlapped commits (Config.OverlapCommits)", run: eddyRow("wordcount", true, ms100)},
		{name: "wc-dsl-eos-100ms-overlap", group: "overlap", unit: "words", ceiling: "wc-dsl-eos-100ms", desc: "wc-dsl-eos-100ms (record caching on) with overlapped commits (Config.OverlapCommits)", run: eddyRow("wordcount-dsl", true, ms100)},
		{name: "wc-eos-100ms-p64", group: "kstreams", unit: "words", twin: "ks-wc-eos-100ms-p64", desc: "eddy word count, exactly-once, commit 100 ms, on input of 64 partitions (128 tasks)", run: eddyRow("wordcount", true, ms100)},
		{name: "ks-wc-eos-100ms", group: "kstreams", unit: "words", desc: "the same word count in Kafka Streams 4.1.1 (WordCountDemo's topology: flatMapValues, groupBy, count; exactly_once_v2, commit 100 ms, one stream thread, record caching off, JVM defaults)", run: eddyRow("wordcount", true, ms100)},
		{name: "ks-wc-eos-100ms-p64", group: "kstreams", unit: "words", desc: "the same in Kafka Streams on input of 64 partitions (128 tasks)", run: eddyRow("wordcount", true, ms100)},
		{name: "win-count-eos", group: "kstreams", unit: "events", twin: "ks-win-count-eos", desc: "eddy windowed count: GroupByKey().WindowedBy(window.Tumbling(time.Minute, 0)).Count() of -win-events events of -win-keys keys over an hour of event time, record caching off, exactly-once, commit 100 ms", run: eddyRow("win-count", true, ms100)},
		{name: "ks-win-count-eos", group: "kstreams", unit: "events", desc: "the same in Kafka Streams 4.1.1 (groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1 min)).count(); exactly_once_v2, commit 100 ms, one stream thread, record caching off, JVM defaults)", run: eddyRow("win-count", true, ms100)},
		{name: "ks-wc-eos-100ms-t2", group: "kstreams-diag", unit: "words", ceiling: "ks-wc-eos-100ms", desc: "diagnostic: ks-wc-eos-100ms with 2 stream threads (num.stream.threads, as eddy runs GOMAXPROCS = 2 workers here) instead of Kafka Streams' default 1", run: eddyRow("wordcount", true, ms100)},
		{name: "ks-win-count-eos-ret2h", group: "kstreams-diag", unit: "events", ceiling: "ks-win-count-eos", desc: "diagnostic: ks-win-count-eos with the window store's retention 2 h instead of the default size + grace (1 min): 2 store segments (RocksDB instances) per task instead of one per minute of event time", run: eddyRow("win-count-ret2h", true, ms100)},
		{name: "wc-eos-1s", group: "throughput", unit: "words", ceiling: "pipe-txn-1s", desc: "eddy word count, exactly-once, commit 1 s", run: eddyRow("wordcount", true, sec)},
		{name: "wc-dsl-eos-100ms", group: "dsl kstreams-defaults", unit: "words", ceiling: "wc-eos-100ms", twin: "ks-wc-dsl-eos-100ms", desc: "eddy word count in the stream DSL (examples/wordcount/dsl), record caching on (10 MiB per task), exactly-once, commit 100 ms", run: eddyRow("wordcount-dsl", true, ms100)},
		{name: "wc-dsl-nocache-eos-100ms", group: "dsl", unit: "words", ceiling: "wc-eos-100ms", twin: "ks-wc-eos-100ms", desc: "the same with record caching off (stream.NoCaching)", run: eddyRow("wordcount-dsl-nocache", true, ms100)},
		{name: "wc-dsl-eos-1s", group: "dsl", unit: "words", ceiling: "wc-eos-1s", desc: "eddy word count in the stream DSL, record caching on, exactly-once, commit 1 s", run: eddyRow("wordcount-dsl", true, sec)},
		{name: "wc-dsl-nocache-eos-1s", group: "dsl", unit: "words", ceiling: "wc-eos-1s", desc: "the same with record caching off", run: eddyRow("wordcount-dsl-nocache", true, sec)},
		{name: "changelog-read", group: "restore", unit: "records", desc: "plain sarama consumer reads the changelog (read_committed): restore ceiling", run: changelogReadRow("changelog-read")},
		{name: "changelog-kread", group: "restore", unit: "records", ceiling: "changelog-read", desc: "the same read with internal/kread (the restorer's fetches), no store", run: changelogReadRow("changelog-kread")},
		{name: "restore-full", group: "restore", unit: "records", ceiling: "changelog-read", target: 0.70, desc: "empty state dir: restore the whole changelog (8 tasks)", run: restoreFullRow},
		{name: "restore-tail", group: "restore", unit: "records", desc: "state dir kept after a SIGKILL while processing: tail only", run: restoreTailRow},
		{name: "mem-load-32", group: "memory", unit: "keys", rssTarget: 200, desc: "32 tasks put distinct keys into their stores (EOS, 100 ms)", run: memLoadRow},
		{name: "mem-restore-32", group: "memory", unit: "records", rssTarget: 200, desc: "32 tasks restore those keys, empty state dir", run: memRestoreRow},
		{name: "cost-tasks-16", group: "cost", unit: "records", desc: "cost per task: one instance, 16 tasks (16 partitions), each with a store, a changelog and an output (count topology, EOS, 100 ms)", run: costRow("eddy", 16)},
		{name: "cost-tasks-128", group: "cost", unit: "records", desc: "the same with 128 tasks", run: costRow("eddy", 128)},
		{name: "cost-tasks-16-pertask", group: "cost", unit: "records", desc: "cost per task with a producer per task (Config.ProducerPerTask), 16 tasks", run: costRow("eddy", 16)},
		{name: "cost-tasks-128-pertask", group: "cost", unit: "records", desc: "the same with a producer per task, 128 tasks", run: costRow("eddy", 128)},
		{name: "cost-tasks-512", group: "cost", unit: "records", desc: "the same with 512 tasks", run: costRow("eddy", 512)},
		{name: "ks-cost-tasks-16", group: "cost", unit: "records", desc: "cost per task: the same count topology in Kafka Streams 4.1.1 (exactly_once_v2, one stream thread, caching off, JVM defaults), 16 tasks", run: costRow("kstreams", 16)},
		{name: "ks-cost-tasks-128", group: "cost", unit: "records", desc: "the same in Kafka Streams, 128 tasks", run: costRow("kstreams", 128)},
		{name: "ks-cost-tasks-512", group: "cost", unit: "records", desc: "the same in Kafka Streams, 512 tasks", run: costRow("kstreams", 512)},
		{name: "pg-copy", group: "postgres", unit: "rows", desc: "sarama consumer group, each claim COPYing (pgx CopyFrom) batches of -pg-batch records (at most 100 ms after a batch's first) into a PostgreSQL table, then committing its offsets: the ceiling, at-least-once, no eddy", run: pgRow("pg-copy")},
		{name: "pg-copy-pk", group: "postgres", unit: "rows", ceiling: "pg-copy", desc: "the same into a table with PRIMARY KEY (k), the upsert's table: what its unique index costs", run: pgRow("pg-copy-pk")},
		{name: "pg-2pc", group: "postgres", unit: "rows", ceiling: "pg-copy", altCeiling: "pg-pipe", target: 0.5, desc: "eddy passthrough into pgsink.NewTwoPhase (exactly-once, commit 100 ms): each task's rows of a commit COPYed at the pre-commit, PREPARE TRANSACTION, COMMIT PREPARED after the Kafka commit", run: pgRow("pg-2pc")},
		{name: "pg-upsert", group: "postgres", unit: "rows", ceiling: "pg-copy", altCeiling: "pg-pipe", target: 0.8, desc: "eddy passthrough into pgsink.NewUpsert (at-least-once, commit 100 ms): INSERT … SELECT FROM unnest … ON CONFLICT (k) DO UPDATE with the offset guard, per batch and at each commit", run: pgRow("pg-upsert")},
		{name: "pg-upsert-hot", group: "postgres-diag", unit: "rows", ceiling: "pg-upsert", desc: "diagnostic: pg-upsert on input whose keys are drawn from -pg-hot-keys keys: most writes update a row (a per-key aggregate's updates) instead of adding one", run: pgRow("pg-upsert-hot")},
		{name: "pg-upsert-w8", group: "postgres-diag", unit: "rows", ceiling: "pg-upsert", desc: "diagnostic: pg-upsert with 8 workers (Config.Workers) instead of GOMAXPROCS = 2: 8 upsert statements in flight instead of 2", run: pgRow("pg-upsert")},
		{name: "pg-2pc-w8", group: "postgres-diag", unit: "rows", ceiling: "pg-2pc", desc: "diagnostic: pg-2pc with 8 workers", run: pgRow("pg-2pc")},
		{name: "pg-pipe", group: "postgres", unit: "rows", ceiling: "pg-copy", desc: "pgsink.Pipe, the write-ahead sink application: each batch (-pg-batch records, 100 ms) COPYed with its partition's next offset in one transaction", run: pgRow("pg-pipe")},
		{name: "pg-eos-nosink", group: "postgres", unit: "records", desc: "eddy on the same input with no sink (records dropped), exactly-once, commit 100 ms: commit times without the sink's steps", run: pgRow("pg-eos-nosink")},
		{name: "lat-pipe-txn", group: "latency", unit: "records", latency: true, desc: "latency of pipe-txn (100 ms)", run: latencyRow("pipe-txn", false)},
		{name: "lat-pass-eos-100ms", group: "latency", unit: "records", ceiling: "lat-pipe-txn", latency: true, desc: "latency of eddy passthrough, exactly-once, 100 ms", run: latencyRow("eddy", true)},
		{name: "lat-pass-alos-100ms", group: "latency", unit: "records", latency: true, desc: "latency of eddy passthrough, at-least-once, 100 ms", run: latencyRow("eddy", false)},
		{name: "lat-ks-wc-dsl-eos-100ms", group: "latency-wc", unit: "words", latency: true, ksDefaults: true, desc: "latency of Kafka Streams 4.1.1's word count with its defaults (as ks-wc-dsl-eos-100ms: record cache on, exactly_once_v2, commit 100 ms), -latency-rate lines/s: a line's production to its words' counts visible (read_committed)", run: latencyWordCountRow("wordcount")},
		{name: "lat-wc-dsl-eos-100ms", group: "latency-wc", unit: "words", ceiling: "lat-ks-wc-dsl-eos-100ms", p99Target: 0.6, latency: true, desc: "latency of eddy's DSL word count with its defaults (record caching on), exactly-once, commit 100 ms, the same lines", run: latencyWordCountRow("wordcount-dsl")},
		{name: "lat-wc-cached-eos-100ms", group: "latency-wc", unit: "words", ceiling: "lat-ks-wc-dsl-eos-100ms", p99Target: 0.6, latency: true, desc: "latency of eddy's processor-API word count with its store cached (the example's default), exactly-once, commit 100 ms, the same lines", run: latencyWordCountRow("wordcount-cached")},
	}, append(kstreamsDefaultsRows(), scaleRows()...)...)
}

func findRow(name string) *rowDef {
	for _, r := range rowTable() {
		if r.name == name {
			return r
		}
	}
	return nil
}

// runID names a run's topics, group and state dir.
func (e *env) runID(row string, round int) string {
	return fmt.Sprintf("%s-%s-r%d", e.o.prefix, row, round)
}

// cleanupRun deletes a run's topics (its output and its application's internal topics)
// and state dir.
func (e *env) cleanupRun(id string) {
	if e.o.keep {
		return
	}
	if err := e.deleteTopicsWithPrefix(id + "-"); err != nil {
		e.logf("cleanup %s: %v", id, err)
	}
	_ = os.RemoveAll(filepath.Join(e.work, "state", id))
}

func (e *env) stateDir(id string) string { return filepath.Join(e.work, "state", id) }

// throughputRun runs a child and measures it from outside.
func (e *env) throughputRun(ctx context.Context, r *rowDef, round int, kind string, spec childSpec, firstOut string, done doneFunc, ds *dataset) (*runResult, error) {
	return e.throughputRunSettled(ctx, r, round, kind, spec, firstOut, done, ds, 0)
}

// throughputRunSettled is throughputRun that leaves the child running for settle after
// its work is done, before it stops it.
func (e *env) throughputRunSettled(ctx context.Context, r *rowDef, round int, kind string, spec childSpec, firstOut string, done doneFunc, ds *dataset, settle time.Duration) (*runResult, error) {
	return e.throughputRunFrom(ctx, r, round, kind, spec, e.outputStarted(firstOut), done, ds, settle)
}

// throughputRunFrom is throughputRunSettled for a run that starts when started says so.
func (e *env) throughputRunFrom(ctx context.Context, r *rowDef, round int, kind string, spec childSpec, started, done doneFunc, ds *dataset, settle time.Duration) (*runResult, error) {
	name := fmt.Sprintf("%s-r%d", r.name, round)
	c, err := e.startChild(kind, name, spec)
	if err != nil {
		return nil, err
	}
	secs, startup, err := e.measureFrom(ctx, c, started, done)
	if err == nil && settle > 0 {
		err = sleepCtx(ctx, settle)
	}
	if err != nil {
		c.kill()
		return nil, err
	}
	c.stop(60 * time.Second)
	res, u, err := c.result()
	if err != nil {
		return nil, err
	}
	return &runResult{
		Units: ds.Units, Bytes: ds.Bytes, Seconds: secs,
		Rate: float64(ds.Units) / secs, MBps: float64(ds.Bytes) / secs / 1e6,
		CPU: u.CPU, CPUPerM: u.CPU / float64(ds.Units) * 1e6, MaxRSSMB: u.MaxRSSMB, PeakAnonMB: u.PeakAnonMB, PeakFileMB: u.PeakFileMB,
		Startup: startup, Child: res,
	}, nil
}

// pipeRow runs a plain sarama pipe.
func pipeRow(txn bool, interval time.Duration, single bool) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		if err := e.needInput(ctx); err != nil {
			return nil, err
		}
		id := e.runID(r.name, round)
		defer e.cleanupRun(id)
		out := id + "-out"
		if err := e.createTopic(ctx, out, int32(e.o.partitions), nil); err != nil {
			return nil, err
		}
		spec := childSpec{Row: r.name, Input: e.input.Topic, Output: out, Group: id, Partitions: int32(e.o.partitions), CommitInterval: interval, SingleProducer: single}
		if !txn {
			return e.throughputRun(ctx, r, round, "pipe-raw", spec, out, e.outputReached(out, e.input.Records), e.input)
		}
		return e.throughputRun(ctx, r, round, "pipe-txn", spec, out, e.committedThrough(ctx, id, e.input, nil), e.input)
	}
}

// pipeTxn2HopRow runs two chained transactional pipes; it is done when the second
// hop's group has committed the last record of the middle topic.
func pipeTxn2HopRow(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
	if err := e.needInput(ctx); err != nil {
		return nil, err
	}
	id := e.runID(r.name, round)
	defer e.cleanupRun(id)
	mid, out := id+"-mid", id+"-out"
	for _, t := range []string{mid, out} {
		if err := e.createTopic(ctx, t, int32(e.o.partitions), nil); err != nil {
			return nil, err
		}
	}
	spec := childSpec{Row: r.name, Input: e.input.Topic, Output: out, Group: id, Partitions: int32(e.o.partitions), CommitInterval: 100 * time.Millisecond}
	done := allDone(e.committedThrough(ctx, id+"-a", e.input, nil), e.committedThrough(ctx, id+"-b", nil, []string{mid}))
	return e.throughputRun(ctx, r, round, "pipe-txn-2hop", spec, mid, done, e.input)
}

// eddyRow runs an eddy application: passthrough, word count (wordcount, wordcount-dsl,
// wordcount-dsl-nocache: the DSL's with record caching off) or the windowed count
// (win-count). Rows named ks-* run the same topology in Kafka Streams instead (wordcount,
// win-count; with its record cache on if the row says ksDefaults), rows named *-p<N> on
// input of N partitions instead of -partitions, rows named *-w<N> with N workers, Kafka
// Streams rows named *-t<N> with N stream threads; word-count rows with a vocab of their
// own draw their words from that many instead of -vocab.
func eddyRow(topo string, eos bool, interval time.Duration) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		kind := "eddy"
		if strings.HasPrefix(r.name, "ks-") {
			kind = "kstreams"
			if _, err := e.needKStreams(ctx); err != nil {
				return nil, err
			}
		}
		P := int32(e.o.partitions)
		if n := nameSuffixInt(r.name, "-p"); n > 0 {
			P = int32(n)
		}
		words := strings.HasPrefix(topo, "wordcount")
		var in *dataset
		var err error
		switch {
		case words:
			in, err = e.needLines(ctx, P, cmp.Or(r.vocab, e.o.vocab))
		case strings.HasPrefix(topo, "win-count"):
			in, err = e.needWinInput(ctx)
		default:
			err, in = e.needInput(ctx), e.input
		}
		if err != nil {
			return nil, err
		}
		id := e.runID(r.name, round)
		defer e.cleanupRun(id)
		out := id + "-out"
		if err := e.createTopic(ctx, out, in.Partitions, nil); err != nil {
			return nil, err
		}
		spec := childSpec{
			Row: r.name, Input: in.Topic, Output: out, Group: id, Partitions: in.Partitions,
			CommitInterval: interval, Topology: topo, ExactlyOnce: eos, StateDir: e.stateDir(id),
			// The rows beside Kafka Streams report their open sockets; sampling them
			// reads /proc/self/fd every 100 ms, in Kafka Streams' child as well.
			SampleCost: r.twin != "" || kind == "kstreams",
		}
		spec.Tune.PerTask = strings.HasSuffix(r.name, "-pertask")
		spec.Tune.Overlap = strings.Contains(r.name, "-overlap")
		spec.Tune.Workers = nameSuffixInt(r.name, "-w")
		spec.Threads = nameSuffixInt(r.name, "-t") // Kafka Streams' stream threads (0: 1)
		if topo == "wordcount-dsl-nocache" {
			spec.Topology, spec.NoCaching = "wordcount-dsl", true
		}
		spec.KSCache = r.ksDefaults
		if kind == "kstreams" && !eos {
			return nil, fmt.Errorf("%s: the Kafka Streams rows run exactly_once_v2 only", r.name)
		}
		if r.ksDefaults && (kind != "kstreams" || topo != "wordcount") {
			return nil, fmt.Errorf("%s: only the Kafka Streams word count runs with its record cache on", r.name)
		}
		// The first output of a word count is its first repartitioned word; the
		// repartition topics are the topology's own (the DSL names them itself). Kafka
		// Streams' word count names its repartition topic as eddy's processor-API
		// version does (Grouped.as("words"): <app>-words-repartition).
		var repartitions []string
		if kind == "eddy" || words {
			if repartitions, err = repartitionTopics(&spec); err != nil {
				return nil, err
			}
		}
		firstOut := out
		if len(repartitions) > 0 {
			firstOut = repartitions[0]
		}
		var done doneFunc
		switch {
		case !eos && topo == "wordcount":
			done = e.outputReached(out, in.Units) // one count update per word
		case !eos && words:
			return nil, fmt.Errorf("%s: at-least-once rows need one output record per input unit; the DSL word count's caches forward fewer", r.name)
		case !eos:
			done = e.outputReached(out, in.Records)
		default:
			done = e.committedThrough(ctx, id, in, repartitions)
		}
		res, err := e.throughputRun(ctx, r, round, kind, spec, firstOut, done, in)
		if err != nil || topo == "passthrough" || !eos {
			return res, err
		}
		// Output records per input unit: what the DSL's record caches save; 1 where
		// every update is forwarded (and so a check that both engines did the same).
		if res.OutRecords, err = e.countCommitted(ctx, out); err != nil {
			return nil, err
		}
		res.Keys = in.Keys
		return res, nil
	}
}

// nameSuffixInt is N of a row named ...<suffix>N (as "-p64", "-w4"), or 0.
func nameSuffixInt(name, suffix string) int {
	i := strings.LastIndex(name, suffix)
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(name[i+len(suffix):])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// changelogReadRow reads the restore rows' changelog without eddy.
func changelogReadRow(kind string) func(context.Context, *env, *rowDef, int) (*runResult, error) {
	return func(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
		if err := e.needRestoreA(ctx); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s-r%d", r.name, round)
		spec := childSpec{Row: r.name, Input: e.clA.Topic, Group: e.runID(r.name, round), Partitions: e.clA.Partitions, ExpectPer: e.clA.PerPart}
		c, err := e.startChild(kind, name, spec)
		if err != nil {
			return nil, err
		}
		if err := c.wait(ctx, e.o.runTimeout); err != nil {
			return nil, err
		}
		res, u, err := c.result()
		if err != nil {
			return nil, err
		}
		return &runResult{
			Units: res.Records, Bytes: res.Bytes, Seconds: res.Seconds,
			Rate: float64(res.Records) / res.Seconds, MBps: float64(res.Bytes) / res.Seconds / 1e6,
			CPU: u.CPU, CPUPerM: u.CPU / float64(res.Records) * 1e6, MaxRSSMB: u.MaxRSSMB, PeakAnonMB: u.PeakAnonMB, PeakFileMB: u.PeakFileMB, Child: res,
		}, nil
	}
}

// restoreRun runs a restore child and turns its report into a result.
func (e *env) restoreRun(ctx context.Context, name string, spec childSpec, avgRecordBytes float64) (*runResult, error) {
	c, err := e.startChild("restore", name, spec)
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx, e.o.runTimeout); err != nil {
		return nil, err
	}
	res, u, err := c.result()
	if err != nil {
		return nil, err
	}
	rr := &runResult{
		Units: res.RestoreRecords, Bytes: int64(float64(res.RestoreRecords) * avgRecordBytes), Seconds: res.RestoreSeconds,
		CPU: u.CPU, MaxRSSMB: u.MaxRSSMB, PeakAnonMB: u.PeakAnonMB, PeakFileMB: u.PeakFileMB, Resume: res.ResumeAll, Restored: res.RestoreRecords, Child: res,
	}
	if res.RestoreSeconds > 0 && res.RestoreRecords > 0 {
		rr.Rate = float64(res.RestoreRecords) / res.RestoreSeconds
		rr.MBps = float64(rr.Bytes) / res.RestoreSeconds / 1e6
		rr.CPUPerM = u.CPU / float64(res.RestoreRecords) * 1e6
	}
	return rr, nil
}

func restoreFullRow(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
	if err := e.needRestoreA(ctx); err != nil {
		return nil, err
	}
	if err := e.produceMarkers(ctx, e.restoreInA, round); err != nil {
		return nil, err
	}
	dir := e.stateDir(e.runID(r.name, round))
	defer os.RemoveAll(dir)
	spec := childSpec{
		Row: r.name, Input: e.restoreInA.Topic, Group: e.appA(), Partitions: int32(e.o.partitions),
		Topology: "kv-get", ExactlyOnce: true, CommitInterval: 100 * time.Millisecond, StateDir: dir,
		ExpectTasks: e.o.partitions,
	}
	return e.restoreRun(ctx, fmt.Sprintf("%s-r%d", r.name, round), spec, float64(e.clA.Bytes)/float64(e.clA.Records))
}

// restoreTailRow: an instance processes updates and is SIGKILLed halfway; once its group
// membership expired, a new instance starts on the same state dir. It restores the
// changelog's tail after the store's checkpoint only.
func restoreTailRow(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
	if err := e.needRestoreB(ctx); err != nil {
		return nil, err
	}
	updates, err := e.produce(ctx, e.restoreInB.Topic, e.restoreInB.Partitions, e.o.killUpdates,
		keyed(e.rng, e.o.valueSize, e.restoreInB.Partitions, e.o.clKeys, true), "", 0)
	if err != nil {
		return nil, err
	}
	e.restoreInB.add(updates)
	app, P := e.appB(), int32(e.o.partitions)
	base, err := e.committedSum(ctx, app, e.restoreInB.Topic, P)
	if err != nil {
		return nil, err
	}
	spec := childSpec{
		Row: r.name, Input: e.restoreInB.Topic, Group: app, Partitions: P,
		Topology: "kv-put", ExactlyOnce: true, CommitInterval: 100 * time.Millisecond, StateDir: e.stateDir(app),
	}
	load, err := e.startChild("eddy", fmt.Sprintf("%s-r%d-load", r.name, round), spec)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(e.o.runTimeout)
	for {
		if load.exited() {
			_, _, rerr := load.result()
			return nil, fmt.Errorf("the instance to kill exited by itself: %w", rerr)
		}
		n, err := e.committedSum(ctx, app, e.restoreInB.Topic, P)
		if err == nil && n >= base+int64(e.o.killUpdates)/2 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			load.kill()
			return nil, fmt.Errorf("the instance to kill did not process its updates in time (committed %d of %d)", n-base, e.o.killUpdates)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			load.kill()
			return nil, err
		}
	}
	load.kill()
	e.logf("  SIGKILLed the instance; waiting for its group membership to expire")
	if err := e.waitGroupEmpty(ctx, app, 60*time.Second); err != nil {
		return nil, err
	}
	if err := e.produceMarkers(ctx, e.restoreInB, round); err != nil {
		return nil, err
	}
	spec.ExpectTasks = e.o.partitions
	rr, err := e.restoreRun(ctx, fmt.Sprintf("%s-r%d", r.name, round), spec, float64(e.o.valueSize+16))
	if err != nil {
		return nil, err
	}
	// A tail is too short for a meaningful rate: the row reports the time to resume.
	rr.Rate, rr.MBps, rr.CPUPerM = 0, 0, 0
	return rr, nil
}

// committedSum adds up a group's committed offsets of a topic (none committed: 0).
func (e *env) committedSum(ctx context.Context, group, topic string, partitions int32) (int64, error) {
	for attempt := 0; ; attempt++ {
		offs, stable, err := e.committed(group, topic, partitions)
		if err == nil && stable {
			var n int64
			for _, o := range offs {
				n += max(o, 0)
			}
			return n, nil
		}
		if attempt > 100 {
			return 0, fmt.Errorf("committed offsets of %s: %w (stable %v)", group, err, stable)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

func memLoadRow(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
	if err := e.needMem(ctx); err != nil {
		return nil, err
	}
	id := e.runID(r.name, round)
	if !e.o.selected("mem-restore-32") {
		defer e.cleanupRun(id)
	} else {
		e.memLoadID[round] = id // mem-restore-32 restores its changelog, then cleans up
		defer os.RemoveAll(e.stateDir(id))
	}
	spec := childSpec{
		Row: r.name, Input: e.memIn.Topic, Group: id, Partitions: e.memIn.Partitions,
		Topology: "kv-put", ExactlyOnce: true, CommitInterval: 100 * time.Millisecond, StateDir: e.stateDir(id),
	}
	return e.throughputRun(ctx, r, round, "eddy", spec, id+"-"+storeName+"-changelog", e.committedThrough(ctx, id, e.memIn, nil), e.memIn)
}

func memRestoreRow(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
	app, ok := e.memLoadID[round]
	if !ok {
		return nil, fmt.Errorf("%s needs mem-load-32 in the same run (it restores what mem-load-32 wrote)", r.name)
	}
	defer e.cleanupRun(app)
	if err := e.produceMarkers(ctx, e.memIn, round); err != nil {
		return nil, err
	}
	dir := e.stateDir(e.runID(r.name, round))
	defer os.RemoveAll(dir)
	spec := childSpec{
		Row: r.name, Input: e.memIn.Topic, Group: app, Partitions: e.memIn.Partitions,
		Topology: "kv-get", ExactlyOnce: true, CommitInterval: 100 * time.Millisecond, StateDir: dir,
		ExpectTasks: int(e.memIn.Partitions),
	}
	return e.restoreRun(ctx, fmt.Sprintf("%s-r%d", r.name, round), spec, float64(e.o.valueSize+16))
}
