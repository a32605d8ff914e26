//go:build linux

// Command bench measures eddy side by side with the ceilings it cannot beat, against a
// real Kafka cluster, in one invocation, and prints the results as a table (and writes
// them as Markdown for BENCHMARKS.md and as JSON).
//
// Rows (select with -rows; groups: throughput, dsl, kstreams, kstreams-defaults,
// kstreams-diag, overlap, restore, memory, cost, latency, latency-wc, postgres, postgres-diag, scale,
// all; a row may be in two groups):
//
//	pipe-raw          plain sarama consumer group → idempotent async producer copy, no
//	                  framework: the ceiling of at-least-once rows
//	pipe-txn          the same copy in sarama transactions committed every 100 ms, one
//	                  transactional producer per input partition (as eddy has one per
//	                  task): the ceiling of exactly-once rows
//	pipe-txn-1s       the same, committed every second
//	pipe-txn-2hop     two such pipes chained through a topic (input → mid → output): the
//	                  ceiling of a topology with one repartition, as the word count has
//	pipe-txn-1p       the same at 100 ms with ONE transactional producer for all partitions
//	pass-{alos,eos}-{100ms,1s}   eddy passthrough (source → sink, Bytes serdes)
//	wc-{alos,eos}-{100ms,1s}     eddy word count (examples/wordcount); records are words
//	wc-dsl[-nocache]-eos-{100ms,1s}  the same word count written with the stream DSL
//	                  (examples/wordcount/dsl), record caching on (the default) or off;
//	                  compared with wc-eos-* run beside them, with the output records
//	                  per input word (the caches forward one count per word and commit)
//	changelog-read    a plain sarama consumer reads a changelog of -changelog-keys keys
//	                  (read_committed): the ceiling of restore-full
//	changelog-kread   the same read with internal/kread, the restorer's fetch path, no store
//	restore-full      an instance with an empty state dir restores that changelog; rate and
//	                  time until every task processes a record again
//	restore-tail      an instance restarts on the state dir it had when it was SIGKILLed
//	                  while processing: only the changelog's tail is restored
//	mem-load-32       32 tasks put -mem-keys distinct keys into their stores (exactly-once)
//	mem-restore-32    32 tasks restore those keys with an empty state dir
//	cost-tasks-{16,128,512}  cost per task: one instance runs a count topology (a store,
//	                  a changelog and an output per task) on input of that many
//	                  partitions, exactly-once at 100 ms; after the input is committed
//	                  and -cost-settle of idle commits, its open sockets and file
//	                  descriptors (/proc/self/fd) and goroutines are read, beside the
//	                  peak RSS (VmHWM; anonymous and file-backed). Rerun with -rows cost.
//	ks-cost-tasks-{16,128,512}  the same count topology in Kafka Streams 4.1.1
//	                  (exactly_once_v2, one stream thread, record caching off, JVM
//	                  defaults), built from integration/bench/kstreams with Maven (Java
//	                  17+ and mvn on PATH) into the work directory; JVM threads stand in
//	                  for goroutines
//	wc-eos-100ms-overlap[-p64], wc-dsl-eos-100ms-overlap  (group overlap) the rows
//	                  without -overlap with Config.OverlapCommits on, beside them
//	wc-eos-100ms-p64  wc-eos-100ms on input of 64 partitions (128 tasks); a row named
//	                  *-p<N> runs on N partitions instead of -partitions
//	ks-wc-eos-100ms[-p64]  the same word count in Kafka Streams 4.1.1 (WordCountDemo's
//	                  topology; exactly_once_v2, commit 100 ms, one stream thread,
//	                  record caching off, JVM defaults) on the same input
//	win-count-eos     windowed count: GroupByKey().WindowedBy(window.Tumbling(time.Minute,
//	                  0)).Count() of -win-events events of -win-keys keys spread over an
//	                  hour of event time, record caching off, exactly-once at 100 ms
//	ks-win-count-eos  the same windowed count in Kafka Streams 4.1.1
//	                  The eddy rows with a Kafka Streams twin (wc-eos-100ms, -p64,
//	                  win-count-eos) are compared with it in a table of their own against
//	                  issue 13's targets (throughput ≥ 1.5×, CPU per record ≤ 0.5×, peak
//	                  RSS ≤ 0.4×), with their open sockets; group kstreams holds them
//	                  (wc-eos-100ms is in throughput)
//	                  These are the like-for-like comparisons: Kafka Streams' record cache
//	                  off, every count forwarded as eddy's processor-API word count does
//	                  (wc-dsl-nocache-eos-100ms, the DSL's with caching off, is compared
//	                  with ks-wc-eos-100ms too).
//	ks-wc-dsl-eos-100ms[-k1m][-p64]  (group kstreams-defaults) Kafka Streams' word count
//	                  as users run it: the same topology with its record cache at its
//	                  default (statestore.cache.max.bytes unset: 10 MB per instance),
//	                  exactly_once_v2, commit.interval.ms 100 (its default under
//	                  exactly-once), one stream thread (its default); the twins of
//	                  wc-dsl-eos-100ms[-k1m][-p64], eddy's DSL word count with its
//	                  defaults (record cache on, 10 MiB per task). Rows named *-k1m draw
//	                  their -words words from 1,000,000 distinct words instead of -vocab
//	                  (1M draws from 1M words hold about 632,000 of them). The twin table
//	                  labels these comparisons "as users run it" (issue 25's targets: peak
//	                  RSS ≤ 0.3×) and the cache-off ones "like-for-like"
//	wc-cached-eos-100ms[-p64]  (group kstreams-defaults) eddy's processor-API word
//	                  count as its example runs it: its store cached (StoreNode.WithCaching,
//	                  10 MiB per task); twinned with ks-wc-dsl-eos-100ms[-p64]
//	ks-wc-eos-100ms-t2      diagnostic (group kstreams-diag): Kafka Streams with 2 stream
//	                  threads; a Kafka Streams row named *-t<N> runs N
//	ks-win-count-eos-ret2h  diagnostic: its windowed count with the window store's
//	                  retention 2 h (2 RocksDB segments per task, not one per minute)
//	pg-copy           the input (unique keys) into a PostgreSQL table (k bytea, v bytea,
//	                  partition, offset), one row per record, by a plain sarama consumer
//	                  group whose claims COPY (pgx CopyFrom) batches of -pg-batch records
//	                  (at most 100 ms after a batch's first) and then commit their offsets:
//	                  the ceiling of the postgres rows (at-least-once, no eddy)
//	pg-copy-pk        the same into a table with PRIMARY KEY (k): what the upsert's unique
//	                  index costs by itself
//	pg-2pc            eddy (exactly-once, 100 ms) writing the records through
//	                  pgsink.NewTwoPhase (COPY at the pre-commit, PREPARE TRANSACTION,
//	                  COMMIT PREPARED after the Kafka commit); target ≥ 0.5× pg-copy
//	pg-upsert         eddy (at-least-once, 100 ms) through pgsink.NewUpsert into the
//	                  keyed table (INSERT … SELECT FROM unnest … ON CONFLICT with the
//	                  offset guard); target ≥ 0.8× pg-copy
//	pg-pipe           pgsink.Pipe (write-ahead: batches and offsets in one transaction)
//	pg-eos-nosink     eddy exactly-once on the same input with no sink (records dropped):
//	                  its commit times without the sink's steps
//	pg-upsert-hot     diagnostic (group postgres-diag): the upsert of -records records
//	                  whose keys are drawn from -pg-hot-keys keys (most writes update a
//	                  row, as a per-key aggregate's do)
//	pg-{upsert,2pc}-w8  diagnostic (group postgres-diag): with 8 workers (Config.Workers),
//	                  8 statements in flight instead of GOMAXPROCS
//	                  The postgres rows need -postgres DSN; "all" leaves them out without
//	                  it. A run goes from the table's first row to its last (counted
//	                  once the group's committed offsets, or the pipe's offsets table,
//	                  cover the input); the server's CPU (/proc, when it is on this host)
//	                  is reported beside the child's; the sink rows time the target's
//	                  Prepare and Commit (COMMIT PREPARED)
//	scale-p{100,250,500,1000}  scale (group scale, issue 25 item 4; not in "all": minutes
//	                  a row): one instance runs the DSL word count (two sub-topologies:
//	                  split and repartition by word, then count; record cache on, exactly-
//	                  once, 100 ms) on input of N partitions, 2N tasks, 16 words a
//	                  partition. Its child prints a status line when its state or tasks
//	                  change (App.State, App.Tasks); the parent times its start until
//	                  every task runs and until the input and repartition topic are
//	                  committed, reads its goroutines, sockets and peak RSS after
//	                  -cost-settle idle, then starts a second instance and times it until
//	                  both run and share the tasks (the rebalance that moves half of
//	                  them), and reads the first's goroutines and sockets again. The scale
//	                  table gives each count's growth per added task over the smallest
//	                  row. Topics (the input too) are deleted after each row
//	ks-scale-p{100,250,500,1000}  the same in Kafka Streams 4.1.1 with its defaults (cache
//	                  on, one stream thread); its status is KafkaStreams.State and its
//	                  threads' active tasks, JVM threads for goroutines
//	lat-*             end-to-end latency, produce timestamp → output visible to a
//	                  read_committed consumer, p50/p99, at half the maximum rate of
//	                  pass-eos-100ms (or -latency-rate)
//	lat-wc-dsl-eos-100ms, lat-wc-cached-eos-100ms, lat-ks-wc-dsl-eos-100ms  (group
//	                  latency-wc, issue 25 item 5) the word count's latency at
//	                  -latency-rate lines/s (e.g. 2000), exactly-once, 100 ms commits,
//	                  each engine with its record cache on: eddy's DSL, eddy's
//	                  processor API with its store cached, Kafka Streams with its
//	                  defaults; a line's production → its words' counts visible, each
//	                  count stamped with the last line that changed it; p99 target ≤
//	                  0.6× Kafka Streams'
//
// Every row runs in a child process (this command re-executed with -child) so that its
// CPU time (rusage utime+stime) and peak RSS are its own. Peak RSS is the child's VmHWM
// read from /proc every 50 ms (its rusage maxrss is not used: Linux counts the parent's
// peak RSS at exec into a child's maxrss), with the peaks of its anonymous and
// file-backed (memory-mapped bbolt files) parts beside it. Throughput is measured
// from outside the child by polling the broker: from the first output record to the
// moment everything is visible (at-least-once: the output's high-water mark reaches the
// expected count; exactly-once: the group's committed offsets, read with RequireStable,
// cover the input and every repartition topic). Each row runs -warmup times unmeasured,
// then -runs times; rounds are interleaved (round 1 of every row, then round 2, ...), so
// the ratios compare rows measured side by side, and the tables report medians.
//
// Rows with transactions get a commit-phases table (commitphases.go): eddy's steps of a
// worker's commit from its debug log (prepare, flush, commit, stores; as
// eddy_commit_phase_seconds), and the requests inside the transaction's commit
// (AddOffsetsToTxn, TxnOffsetCommit, EndTxn) and the wait from EndTxn to the next
// transaction's AddPartitionsToTxn, timed from sarama's debug log per transactional ID,
// with the AddPartitionsToTxn retries and their backoff per commit.
//
// Usage:
//
//	integration/kafka.sh start            # or any broker you own
//	go run ./integration/bench -brokers 127.0.0.1:19092 -markdown /tmp/bench.md
//	go run ./integration/bench -brokers 127.0.0.1:19092 -rows pipe-raw,pass-alos-100ms \
//	    -records 100000 -runs 1 -warmup 0          # a quick check
//	go run ./integration/bench -brokers ... -rows wc-eos-100ms -runs 1 -warmup 0 \
//	    -profile-dir /tmp/prof                     # CPU, allocation, mutex and heap profiles
//	go run ./integration/bench -from-json /tmp/bench.json -markdown /tmp/bench.md   # re-render
//
// Flags such as -max-wait, -txn-backoff, -linger, -kread-fetch and -child-env
// (GOMEMLIMIT=...) change a setting for every row of an invocation, pipes and eddy
// alike, to measure what it is worth; compare two invocations.
//
// The command creates its topics with the prefix -prefix and deletes them at the end
// (unless -keep). It needs a broker that allows transactions with replication factor 1
// (integration/kafka.sh's settings).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags; the parent passes the relevant ones to each child in
// its childSpec.
type options struct {
	brokers      []string
	rows         []string
	records      int
	valueSize    int
	partitions   int
	words        int
	vocab        int
	clKeys       int
	killUpdates  int
	memKeys      int
	memParts     int
	costRecords  int
	winEvents    int
	winKeys      int
	costSettle   time.Duration
	runs         int
	warmup       int
	latDuration  time.Duration
	latRate      int
	tune         tuning
	markdown     string
	jsonOut      string
	work         string
	profileDir   string
	profileRows  []string
	prefix       string
	keep         bool
	runTimeout   time.Duration
	verbose      bool
	commandLine  string
	fromJSON     string
	wrapper      []string
	childEnv     []string
	childKind    string
	childSpecArg string
	postgres     string // DSN of the PostgreSQL rows' server
	pgBatch      int    // rows per COPY or upsert statement of the PostgreSQL rows (0: pgsink's default)
	pgHotKeys    int    // distinct keys of pg-upsert-hot's input
}

// tuning holds optional sarama settings applied alike to the pipes and to eddy (through
// eddy.Config.Sarama), to measure what a setting is worth. Zero: sarama's default.
type tuning struct {
	TxnBackoff    time.Duration `json:",omitempty"` // Producer.Transaction.Retry.Backoff
	Linger        time.Duration `json:",omitempty"` // Producer.Flush.Frequency
	FlushBytes    int           `json:",omitempty"` // Producer.Flush.Bytes
	FetchDefault  int32         `json:",omitempty"` // Consumer.Fetch.Default
	ChannelBuffer int           `json:",omitempty"` // ChannelBufferSize
	MaxWait       time.Duration `json:",omitempty"` // Consumer.MaxWaitTime
	KreadFetch    int32         `json:",omitempty"` // changelog-kread: bytes per fetch (default 32 MiB, the restorer's)
	CommitRecords int           `json:",omitempty"` // eddy Config.CommitRecords
	PerTask       bool          `json:",omitempty"` // eddy Config.ProducerPerTask (rows named *-pertask)
	Overlap       bool          `json:",omitempty"` // eddy Config.OverlapCommits (rows named *-overlap*)
	Workers       int           `json:",omitempty"` // eddy Config.Workers (rows named *-w<N>)
	StoreWrite    time.Duration `json:",omitempty"` // eddy Config.StoreWriteInterval
}

func (t tuning) String() string {
	var parts []string
	if t.TxnBackoff > 0 {
		parts = append(parts, fmt.Sprintf("txn-backoff=%v", t.TxnBackoff))
	}
	if t.PerTask {
		parts = append(parts, "producer-per-task")
	}
	if t.Overlap {
		parts = append(parts, "overlap-commits")
	}
	if t.Workers > 0 {
		parts = append(parts, fmt.Sprintf("workers=%d", t.Workers))
	}
	if t.StoreWrite > 0 {
		parts = append(parts, fmt.Sprintf("store-write-interval=%v", t.StoreWrite))
	}
	if t.Linger > 0 {
		parts = append(parts, fmt.Sprintf("linger=%v", t.Linger))
	}
	if t.FlushBytes > 0 {
		parts = append(parts, fmt.Sprintf("flush-bytes=%d", t.FlushBytes))
	}
	if t.FetchDefault > 0 {
		parts = append(parts, fmt.Sprintf("fetch-default=%d", t.FetchDefault))
	}
	if t.ChannelBuffer > 0 {
		parts = append(parts, fmt.Sprintf("channel-buffer=%d", t.ChannelBuffer))
	}
	if t.CommitRecords > 0 {
		parts = append(parts, fmt.Sprintf("commit-records=%d", t.CommitRecords))
	}
	if t.MaxWait > 0 {
		parts = append(parts, fmt.Sprintf("max-wait=%v", t.MaxWait))
	}
	if t.KreadFetch > 0 {
		parts = append(parts, fmt.Sprintf("kread-fetch=%d", t.KreadFetch))
	}
	if len(parts) == 0 {
		return "sarama and eddy defaults"
	}
	return strings.Join(parts, ", ")
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if opts.childKind != "" {
		os.Exit(childMain(ctx, opts.childKind, opts.childSpecArg))
	}
	run := parentMain
	if opts.fromJSON != "" {
		run = func(_ context.Context, o *options) error { return reportFromJSON(o) }
	}
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o := &options{}
	var brokers, rows, profileRows string
	fs.StringVar(&brokers, "brokers", "", "bootstrap `host:port[,host:port...]` of the Kafka cluster (required)")
	fs.StringVar(&rows, "rows", "all", "comma-separated rows or groups to run: all, throughput, dsl, kstreams, kstreams-defaults, overlap, restore, memory, cost, latency, latency-wc, or row names (see the package doc)")
	fs.IntVar(&o.records, "records", 1_000_000, "input records of the pipe and passthrough rows")
	fs.IntVar(&o.valueSize, "value-size", 100, "value size in bytes of input, changelog and latency records")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of input, output and changelog topics")
	fs.IntVar(&o.words, "words", 1_000_000, "words in the word-count input (lines of at most -value-size bytes)")
	fs.IntVar(&o.vocab, "vocab", 10_000, "distinct words in the word-count input (uniformly drawn)")
	fs.IntVar(&o.clKeys, "changelog-keys", 1_000_000, "distinct keys in the changelog of the restore rows")
	fs.IntVar(&o.killUpdates, "kill-updates", 200_000, "records the restore-tail row's instance processes (and is SIGKILLed in the middle of) before the measured restart")
	fs.IntVar(&o.memKeys, "mem-keys", 1_000_000, "distinct keys held by the tasks of the memory rows")
	fs.IntVar(&o.memParts, "mem-partitions", 32, "partitions (tasks) of the memory rows")
	fs.IntVar(&o.costRecords, "cost-records", 200_000, "input records of each cost-tasks-N row (keys drawn from -vocab keys)")
	fs.IntVar(&o.winEvents, "win-events", 1_000_000, "events in the windowed count's input (an hour of event time)")
	fs.IntVar(&o.winKeys, "win-keys", 10_000, "distinct keys in the windowed count's input")
	fs.DurationVar(&o.costSettle, "cost-settle", 3*time.Second, "how long a cost-tasks-N row's instance runs idle after its input is committed before its sockets and goroutines are read")
	fs.IntVar(&o.runs, "runs", 3, "measured runs per row (the tables show the median)")
	fs.IntVar(&o.warmup, "warmup", 1, "unmeasured warm-up runs per row before the measured ones")
	fs.DurationVar(&o.latDuration, "latency-duration", 20*time.Second, "how long the latency rows produce input")
	fs.IntVar(&o.latRate, "latency-rate", 0, "input records/s of the latency rows; 0: half the median rate of pass-eos-100ms in this invocation")
	fs.DurationVar(&o.tune.TxnBackoff, "txn-backoff", 0, "sarama Producer.Transaction.Retry.Backoff for every transactional producer (0: sarama's 100ms)")
	fs.DurationVar(&o.tune.Linger, "linger", 0, "sarama Producer.Flush.Frequency for every producer (0: send at once)")
	fs.DurationVar(&o.tune.StoreWrite, "store-write-interval", 0, "eddy Config.StoreWriteInterval for every eddy row (0: eddy's default, 1s; at or below the commit interval: a store write at every commit)")
	fs.IntVar(&o.tune.FlushBytes, "flush-bytes", 0, "sarama Producer.Flush.Bytes for every producer (0: none)")
	var fetchDefault int
	fs.IntVar(&fetchDefault, "fetch-default", 0, "sarama Consumer.Fetch.Default bytes per partition and fetch (0: the default, eddy's 256 KiB, sarama's 1 MiB for the pipes)")
	fs.IntVar(&o.tune.ChannelBuffer, "channel-buffer", 0, "sarama ChannelBufferSize (0: 256)")
	fs.DurationVar(&o.tune.MaxWait, "max-wait", 0, "sarama Consumer.MaxWaitTime, how long a fetch waits for data (0: 500ms)")
	var kreadFetch int
	fs.IntVar(&kreadFetch, "kread-fetch", 0, "bytes per fetch of the changelog-kread row (0: 32 MiB, as eddy's restorer)")
	fs.IntVar(&o.tune.CommitRecords, "commit-records", 0, "eddy Config.CommitRecords (0: eddy's default, 10000)")
	fs.StringVar(&o.markdown, "markdown", "", "write the results as Markdown to `file`")
	fs.StringVar(&o.jsonOut, "json", "", "write every run's raw results as JSON to `file`")
	fs.StringVar(&o.work, "work", "", "work directory for state dirs and child logs (default: a new directory under $TMPDIR)")
	fs.StringVar(&o.profileDir, "profile-dir", "", "children write CPU, allocation and mutex profiles (runtime/pprof) into `dir`; profiling slows them: use separate runs")
	fs.StringVar(&profileRows, "profile-rows", "", "rows that write profiles (default: all selected rows when -profile-dir is set)")
	fs.StringVar(&o.prefix, "prefix", "", "prefix of every topic, group and transactional ID (default eddybench-<unix time>)")
	fs.BoolVar(&o.keep, "keep", false, "keep the topics and the work directory")
	fs.StringVar(&o.postgres, "postgres", "", "DSN of the PostgreSQL server of the postgres rows (integration/postgres.sh dsn); without it \"all\" leaves them out")
	fs.IntVar(&o.pgHotKeys, "pg-hot-keys", 10_000, "distinct keys of the pg-upsert-hot row's input (-records records)")
	fs.IntVar(&o.pgBatch, "pg-batch", 0, "rows per COPY or upsert statement of the postgres rows: the COPY pipe's batches, pgsink's Options.BatchRows and PipeConfig.BatchRecords (0: pgsink's default, 5000)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 15*time.Minute, "give up on a run after this long")
	fs.BoolVar(&o.verbose, "v", false, "log progress details")
	var wrapper string
	fs.StringVar(&wrapper, "child-wrapper", "", "diagnostics: run each child under this command, split at spaces, {} replaced by the run's name\n(e.g. \"strace -f -c -o /tmp/{}.strace --seccomp-bpf -e trace=fsync,fdatasync\"); CPU and RSS are then the wrapper's")
	var childEnv string
	fs.StringVar(&childEnv, "child-env", "", "extra environment of every child, space-separated NAME=VALUE (e.g. \"GOMEMLIMIT=150MiB GOGC=50\")")
	fs.StringVar(&o.fromJSON, "from-json", "", "do not run anything: print the table of a run saved with -json (and write -markdown)")
	fs.StringVar(&o.childKind, "child", "", "internal: run as a child of the given kind")
	fs.StringVar(&o.childSpecArg, "child-spec", "", "internal: the child's JSON spec")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./integration/bench -brokers HOST:PORT [flags]\n\n"+
			"Runs eddy's benchmark rows side by side with plain sarama pipes on a real Kafka cluster\n"+
			"and prints a table (see the package doc: go doc ./integration/bench).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.childKind != "" {
		return o, nil
	}
	o.tune.FetchDefault = int32(fetchDefault)
	o.tune.KreadFetch = int32(kreadFetch)
	o.wrapper = strings.Fields(wrapper)
	o.childEnv = strings.Fields(childEnv)
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.brokers = append(o.brokers, b)
		}
	}
	if len(o.brokers) == 0 && o.fromJSON == "" {
		return nil, errors.New("-brokers is required (for example -brokers 127.0.0.1:19092)")
	}
	var err error
	if o.rows, err = expandRows(rows, o.postgres != ""); err != nil {
		return nil, err
	}
	if profileRows != "" {
		if o.profileRows, err = expandRows(profileRows, true); err != nil {
			return nil, err
		}
	} else {
		o.profileRows = o.rows
	}
	switch {
	case o.records < 1, o.pgHotKeys < 1, o.words < 1, o.clKeys < 1, o.memKeys < 1, o.killUpdates < 1, o.costRecords < 1, o.winEvents < 1, o.winKeys < 1:
		return nil, errors.New("-records, -words, -changelog-keys, -mem-keys, -kill-updates, -cost-records, -win-events and -win-keys must be positive")
	case o.valueSize < 20:
		return nil, errors.New("-value-size must be at least 20")
	case o.partitions < 1 || o.memParts < 1:
		return nil, errors.New("-partitions and -mem-partitions must be positive")
	case o.vocab < 1:
		return nil, errors.New("-vocab must be positive")
	case o.runs < 1 || o.warmup < 0:
		return nil, errors.New("-runs must be positive and -warmup not negative")
	}
	if o.prefix == "" {
		o.prefix = fmt.Sprintf("eddybench-%d", time.Now().Unix())
	}
	o.commandLine = "go run ./integration/bench " + strings.Join(args, " ")
	return o, nil
}

// expandRows turns a comma-separated list of rows and groups into row names, in the
// order of rowTable. "all" holds the postgres group only when a server is given
// (withPostgres): the whole suite runs without one.
func expandRows(s string, withPostgres bool) ([]string, error) {
	want := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		found := false
		for _, r := range rowTable() {
			// The scale group takes minutes a row: run it by name.
			if name == "all" && (strings.HasPrefix(r.group, "postgres") && !withPostgres || r.group == "scale") {
				found = true
				continue
			}
			// A row may belong to several groups (space-separated).
			if name == "all" || r.name == name || slices.Contains(strings.Fields(r.group), name) {
				want[r.name], found = true, true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown row or group %q (rows: %s)", name, strings.Join(rowNames(), ", "))
		}
	}
	var out []string
	for _, r := range rowTable() {
		if want[r.name] {
			out = append(out, r.name)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no rows selected")
	}
	return out, nil
}

func rowNames() []string {
	var out []string
	for _, r := range rowTable() {
		out = append(out, r.name)
	}
	return out
}

func (o *options) selected(row string) bool { return slices.Contains(o.rows, row) }
