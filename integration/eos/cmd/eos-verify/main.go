//go:build unix

// Command eos-verify runs eddy's exactly-once proof harness (package
// integration/eos): a test application in up to three instance processes, an input
// driver, a seeded schedule of faults (SIGTERM, SIGKILL, SIGSTOP past the session
// timeout, and kill -9 of the broker when it controls one), and a verifier reading
// everything back with read_committed. It prints one line,
//
//	eos-verify: records=N kills=K stops=S pauses=Z broker-restarts=B duplicates=D lost=L hanging=H mismatched=M
//
// and exits 0 only when nothing was duplicated, lost, left hanging or mismatched and
// the harness saw no other anomaly (1 otherwise, 2 when the harness itself failed).
//
// Brokers: with -brokers, a running cluster; with -kafka-script (integration/kafka.sh,
// configured by its environment: EDDY_KAFKA_HOME, EDDY_KAFKA_PORT,
// EDDY_KAFKA_CONTROLLER_PORT), a fresh broker the command starts, kills and restarts
// (-broker-restarts) and stops at the end; with neither, an embedded broker. Modes
// cluster and cluster-long start a three-broker cluster with -kafka-script
// (EDDY_KAFKA_BROKERS=3; its ports: EDDY_KAFKA_PORT, default 19192-19197) and aim
// faults at it: kill -9 of the leader of an input, changelog or output partition, of
// a transaction coordinator, of the group coordinator; a broker paused past its
// session; two brokers down at once; each restarted after.
//
// Availability: -standbys N gives each task N standby replicas; -static gives each
// instance a fixed InstanceID (static membership) and adds the replace fault, a stalled
// zombie replaced by an instance with its InstanceID (package doc, "Standbys and static
// membership"):
//
//	go run ./integration/eos/cmd/eos-verify -static -standbys 1
//
//	go run ./integration/eos/cmd/eos-verify                       # short mode, embedded broker
//	EDDY_KAFKA_HOME=/tmp/eddy-kafka-eos EDDY_KAFKA_PORT=29092 EDDY_KAFKA_CONTROLLER_PORT=29093 \
//	  go run ./integration/eos/cmd/eos-verify -mode long -kafka-script integration/kafka.sh
//	go run ./integration/eos/cmd/eos-verify -mode cluster -kafka-script integration/kafka.sh
//
// PostgreSQL: with -postgres-script (integration/postgres.sh, configured by its
// environment: EDDY_POSTGRES_HOME, EDDY_POSTGRES_PORT), a fresh server the command
// starts, crashes (pg_ctl stop -m immediate, -postgres-crashes) and purges at the end;
// with -postgres, a running one (no crashes). Either adds the PostgreSQL target: the
// aggregates and final results also written by two-phase commit, idempotent upserts
// and write-ahead pipes (package sink/pgsink), the sink faults (an instance killed at
// each step of the sink protocol) among the fault kinds, and the tables checked
// against the recomputation, with no prepared transaction left:
//
//	EDDY_KAFKA_HOME=/tmp/eddy-kafka-eos EDDY_KAFKA_PORT=29092 EDDY_KAFKA_CONTROLLER_PORT=29093 \
//	EDDY_POSTGRES_HOME=/tmp/eddy-postgres-eos EDDY_POSTGRES_PORT=15632 \
//	  go run ./integration/eos/cmd/eos-verify -mode long -kafka-script integration/kafka.sh -postgres-script integration/postgres.sh
//
// The command is also the instance program: started with EDDY_EOS_INSTANCE set, it
// runs one instance of the test application.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/eddy-streams/eddy/integration/eos"
	"github.com/eddy-streams/eddy/kafkatest"
)

func main() {
	if eos.IsInstance() {
		os.Exit(eos.InstanceMain())
	}
	os.Exit(run(os.Args[1:]))
}

// preset is a mode's defaults.
type preset struct {
	records, keys, faults, brokerRestarts int
	partitions                            int
	gap                                   time.Duration
	// clusterFaults: the preset runs on a three-broker cluster with that many
	// cluster faults.
	clusterFaults int
	// pgCrashes: PostgreSQL crashes with -postgres-script.
	pgCrashes int
}

func presetFor(mode string) (preset, bool) {
	switch mode {
	case "short":
		return preset{records: 20000, keys: 200, faults: 6, brokerRestarts: 1, partitions: 4, gap: 3 * time.Second, pgCrashes: 1}, true
	case "long":
		return preset{records: 1000000, keys: 1000, faults: 100, brokerRestarts: 10, partitions: 6, gap: 6 * time.Second, pgCrashes: 10}, true
	case "cluster":
		return preset{records: 20000, keys: 200, faults: 3, partitions: 4, gap: 3 * time.Second, clusterFaults: 7}, true
	case "cluster-long":
		return preset{records: 300000, keys: 1000, faults: 30, partitions: 6, gap: 5 * time.Second, clusterFaults: 35}, true
	}
	return preset{}, false
}

func run(args []string) int {
	fs := flag.NewFlagSet("eos-verify", flag.ContinueOnError)
	mode := fs.String("mode", "short", "preset: short (20,000 records, 6 faults 3 s apart, 1 broker restart; about a minute), long (1,000,000 records, 100 faults 6 s apart, 10 broker restarts; about 25 min), "+
		"cluster (a three-broker cluster of -kafka-script: 20,000 records, 3 instance faults and 7 cluster faults, each kind once) or cluster-long (300,000 records, 30 instance faults, 35 cluster faults); the flags below override it")
	brokers := fs.String("brokers", "", "bootstrap addresses of a running cluster, comma-separated (default: -kafka-script's broker, else an embedded one)")
	script := fs.String("kafka-script", "", "integration/kafka.sh: start a fresh broker with it, kill -9 and restart it for -broker-restarts, stop it at the end")
	keepBroker := fs.Bool("keep-broker", false, "with -kafka-script: leave the broker running at the end")
	records := fs.Int("records", 0, "input records")
	keys := fs.Int("keys", 0, "distinct keys")
	partitions := fs.Int("partitions", 0, "input (and output) partitions")
	buckets := fs.Int("buckets", 16, "value buckets of the repartition hop")
	instances := fs.Int("instances", 3, "instance processes")
	commit := fs.Duration("commit-interval", 100*time.Millisecond, "commit interval of the instances (try 100ms and 5s)")
	alo := fs.Bool("at-least-once", false, "run the instances under eddy.AtLeastOnce (duplicates expected; lost must stay 0)")
	session := fs.Duration("session-timeout", 6*time.Second, "consumer group session timeout of the instances")
	txnTimeout := fs.Duration("transaction-timeout", 0, "transaction timeout of the instances (default eddy's, 10s); the stall fault needs it 3 s below -session-timeout, move-twice 13 s above it")
	faults := fs.Int("faults", -1, "instance faults")
	kinds := fs.String("fault-kinds", "kill,term,pause", "instance fault kinds, comma-separated: kill, term, pause, stall (SIGSTOP past the transaction timeout, within the session timeout), move-twice (SIGSTOP inside a commit, then another instance stopped so the tasks move again while its transaction is open; needs 3 instances and -transaction-timeout at least -session-timeout + 13s), replace (needs -static: SIGSTOP inside a commit, a replacement with the same InstanceID on an empty or a copied state dir, then the zombie resumed and must be fenced)")
	brokerRestarts := fs.Int("broker-restarts", -1, "broker kills and restarts (need -kafka-script; default: the mode's with it, else 0)")
	clusterFaults := fs.Int("cluster-faults", -1, "cluster faults (modes cluster and cluster-long; default: the mode's)")
	rf := fs.Int("replication-factor", 3, "with a three-broker cluster: the instances' eddy.Config.ReplicationFactor (the harness checks the internal topics have 3 replicas)")
	minISR := fs.String("min-insync-replicas", "2", "with a three-broker cluster: min.insync.replicas of the internal topics the instances create (eddy.Config.InternalTopicConfigs; the harness checks it); empty: none")
	clusterKinds := fs.String("cluster-fault-kinds", "", "cluster fault kinds, comma-separated (default: all): kill-input-leader, kill-changelog-leader, kill-output-leader, kill-txn-coordinator, kill-group-coordinator, pause-broker, two-brokers-down")
	gap := fs.Duration("fault-gap", 0, "mean time between the end of a fault and the next (default: the mode's)")
	span := fs.Duration("span", 0, "least time over which the input is written (default: the fault schedule's length)")
	seed := fs.Uint64("seed", 0, "seed of keys and fault schedule (0: from the clock; logged)")
	catchUp := fs.Duration("catch-up-timeout", 5*time.Minute, "how long to wait for the application to process everything after the last fault")
	workDir := fs.String("work-dir", "", "where logs, state dirs and the report go (default: a new temporary dir, kept)")
	verbose := fs.Bool("v", false, "debug logs from the instances")
	finals := fs.Bool("finals", true, "the application also emits the windowed aggregation's final results (suppressed until each window closes), checked by the verifier")
	retentionChange := fs.Duration("retention-change", 0, "restart every instance a kill or a stop faults with its window store's retention switched between the default and this (above 2m: another segment interval, as a changed grace gives; the store is rebuilt from its changelog); 0: never")
	pgScript := fs.String("postgres-script", "", "integration/postgres.sh: start a fresh PostgreSQL with it (EDDY_POSTGRES_HOME, EDDY_POSTGRES_PORT), crash it -postgres-crashes times, purge it at the end; adds the PostgreSQL target")
	pgDSN := fs.String("postgres", "", "DSN of a running PostgreSQL (max_prepared_transactions > 0) to use for the PostgreSQL target instead of -postgres-script's (no crashes)")
	pgCrashes := fs.Int("postgres-crashes", -1, "PostgreSQL crashes, pg_ctl stop -m immediate then start (need -postgres-script; default: 1 in short mode, 10 in long)")
	keepPG := fs.Bool("keep-postgres", false, "with -postgres-script: leave PostgreSQL running (and its data) at the end")
	standbys := fs.Int("standbys", 0, "standby replicas per task (the instances' eddy.Config.NumStandbyReplicas)")
	cooperative := fs.Bool("cooperative", false, "cooperative rebalancing (eddy.Config.RebalanceProtocol): a rebalance stops only the tasks that move")
	overlap := fs.Bool("overlap", false, "overlapped commits (eddy.Config.OverlapCommits): the instances process on while their commits commit")
	static := fs.Bool("static", false, "static membership: each instance keeps eddy.Config.InstanceID i<n> (group.instance.id) across its restarts, and its state dir; adds the replace fault (a stalled zombie replaced by an instance with its InstanceID) to the default fault kinds")
	join := fs.Bool("join", true, "the driver also writes a right topic and the application joins it with the input (a stream–stream join), checked by the verifier")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p, ok := presetFor(*mode)
	if !ok {
		fmt.Fprintf(os.Stderr, "eos-verify: -mode %q: want short or long\n", *mode)
		return 2
	}
	orDefault := func(v, d int) int {
		if v > 0 {
			return v
		}
		return d
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := eos.Config{
		Records: orDefault(*records, p.records), Keys: orDefault(*keys, p.keys),
		Partitions: int32(orDefault(*partitions, p.partitions)), Buckets: *buckets,
		Instances: *instances, CommitInterval: *commit, AtLeastOnce: *alo, SessionTimeout: *session, TransactionTimeout: *txnTimeout,
		Faults: p.faults, FaultGap: p.gap, Span: *span, Seed: *seed, CatchUpTimeout: *catchUp,
		DebugInstances: *verbose, Logger: logger, Finals: *finals, RetentionChange: *retentionChange, Standbys: *standbys,
		Static: *static, Cooperative: *cooperative, OverlapCommits: *overlap,
	}
	if *join {
		cfg.Join = eos.JoinFor(cfg.Records, cfg.Keys)
	}
	if *faults >= 0 {
		cfg.Faults = *faults
	}
	if *gap > 0 {
		cfg.FaultGap = *gap
	}
	kindList := *kinds
	pgOn := *pgScript != "" || *pgDSN != ""
	kindsSet := false
	fs.Visit(func(f *flag.Flag) { kindsSet = kindsSet || f.Name == "fault-kinds" })
	if *static && !kindsSet {
		kindList += "," + eos.Replace.String()
	}
	if pgOn && !kindsSet {
		for _, k := range eos.SinkFaultKinds() {
			kindList += "," + k.String()
		}
	}
	for _, k := range strings.Split(kindList, ",") {
		kind, err := eos.ParseFaultKind(strings.TrimSpace(k))
		if err != nil {
			fmt.Fprintln(os.Stderr, "eos-verify:", err)
			return 2
		}
		cfg.FaultKinds = append(cfg.FaultKinds, kind)
	}
	if *clusterKinds != "" {
		for _, k := range strings.Split(*clusterKinds, ",") {
			kind, err := eos.ParseFaultKind(strings.TrimSpace(k))
			if err != nil {
				fmt.Fprintln(os.Stderr, "eos-verify:", err)
				return 2
			}
			cfg.ClusterFaultKinds = append(cfg.ClusterFaultKinds, kind)
		}
	}
	cluster := p.clusterFaults > 0
	if cluster && *script == "" {
		fmt.Fprintf(os.Stderr, "eos-verify: -mode %s needs -kafka-script (it starts a three-broker cluster with it)\n", *mode)
		return 2
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eos-verify:", err)
		return 2
	}
	cfg.Launcher = eos.Launcher{Exe: exe}
	if *workDir == "" {
		*workDir, err = os.MkdirTemp("", "eos-verify-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "eos-verify:", err)
			return 2
		}
	}
	cfg.WorkDir, _ = filepath.Abs(*workDir)
	cfg.Prefix = fmt.Sprintf("eos-%d", cfg.Seed%1_000_000_007)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch {
	case *brokers != "":
		cfg.Brokers = strings.Split(*brokers, ",")
	case cluster:
		sc := eos.ScriptCluster{Script: *script}
		logger.Info("eos-verify: starting a fresh three-broker cluster", "script", *script)
		addrs, err := sc.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eos-verify:", err)
			return 2
		}
		if !*keepBroker {
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := sc.Stop(sctx); err != nil {
					logger.Warn("eos-verify: stopping the cluster", "error", err)
				}
			}()
		}
		cfg.Brokers = addrs
		cfg.Cluster = sc
		cfg.ClusterFaults = p.clusterFaults
		cfg.ReplicationFactor = int16(*rf)
		if *minISR != "" {
			cfg.InternalTopicConfigs = map[string]string{"min.insync.replicas": *minISR}
		}
	case *script != "":
		sb := eos.ScriptBroker{Script: *script}
		logger.Info("eos-verify: starting a fresh broker", "script", *script)
		addr, err := sb.Start(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eos-verify:", err)
			return 2
		}
		if !*keepBroker {
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := sb.Stop(sctx); err != nil {
					logger.Warn("eos-verify: stopping the broker", "error", err)
				}
			}()
		}
		cfg.Brokers = []string{addr}
		cfg.Broker = sb
		cfg.BrokerRestarts = p.brokerRestarts
	default:
		b, err := kafkatest.NewBroker()
		if err != nil {
			fmt.Fprintln(os.Stderr, "eos-verify:", err)
			return 2
		}
		defer b.Close()
		cfg.Brokers = b.Addrs()
	}
	if *brokerRestarts >= 0 {
		cfg.BrokerRestarts = *brokerRestarts
	}
	if *clusterFaults >= 0 && cfg.Cluster != nil {
		cfg.ClusterFaults = *clusterFaults
	}
	if cfg.BrokerRestarts > 0 && cfg.Broker == nil {
		fmt.Fprintln(os.Stderr, "eos-verify: -broker-restarts needs -kafka-script (the command must control the broker)")
		return 2
	}

	if pgOn {
		if *alo {
			fmt.Fprintln(os.Stderr, "eos-verify: the PostgreSQL target's two-phase mode needs exactly-once: drop -at-least-once")
			return 2
		}
		if !*finals {
			fmt.Fprintln(os.Stderr, "eos-verify: the PostgreSQL target writes the final results: drop -finals=false")
			return 2
		}
		pc := &eos.PostgresConfig{DSN: *pgDSN}
		if *pgScript != "" && *pgDSN == "" {
			sp := eos.ScriptPostgres{Script: *pgScript}
			logger.Info("eos-verify: starting a fresh PostgreSQL", "script", *pgScript)
			dsn, err := sp.Start(ctx)
			if err != nil {
				fmt.Fprintln(os.Stderr, "eos-verify:", err)
				return 2
			}
			if !*keepPG {
				defer func() {
					sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					if err := sp.Purge(sctx); err != nil {
						logger.Warn("eos-verify: purging PostgreSQL", "error", err)
					}
				}()
			}
			pc.DSN, pc.Control, pc.Crashes = dsn, sp, p.pgCrashes
			if *pgCrashes >= 0 {
				pc.Crashes = *pgCrashes
			}
		} else if *pgCrashes > 0 {
			fmt.Fprintln(os.Stderr, "eos-verify: -postgres-crashes needs -postgres-script (the command must control the server)")
			return 2
		}
		cfg.Postgres = pc
		if *faults < 0 && cfg.Faults < len(cfg.FaultKinds) {
			cfg.Faults = len(cfg.FaultKinds) // each kind at least once
		}
	}

	res, err := eos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "eos-verify: the harness failed:", err)
		if res != nil {
			fmt.Println(res.Summary())
		}
		if errors.Is(err, context.Canceled) {
			return 130
		}
		return 2
	}
	for _, a := range res.Anomalies {
		fmt.Fprintln(os.Stderr, "eos-verify: anomaly:", a)
	}
	for _, pr := range res.Report.Problems {
		fmt.Fprintln(os.Stderr, "eos-verify: problem:", pr)
	}
	if res.Evidence != "" {
		fmt.Fprint(os.Stderr, "eos-verify: the logs around the input lost from the echo topic:\n", res.Evidence)
	}
	fmt.Fprintf(os.Stderr, "eos-verify: seed %d, %d tail restores checked (%d from a trimmed window changelog), took %v, work dir %s\n",
		cfg.Seed, res.Report.TailRestores, res.Report.TrimmedRestores, res.Duration.Round(time.Second), cfg.WorkDir)
	fmt.Fprintln(os.Stderr, "eos-verify:", res.Report.WindowSummary())
	if cfg.Postgres != nil {
		fmt.Fprintln(os.Stderr, "eos-verify:", res.PostgresSummary())
	}
	if cfg.RetentionChange > 0 {
		fmt.Fprintf(os.Stderr, "eos-verify: %d restarts with another window store retention, %d stores rebuilt from their changelogs\n", res.RetentionChanges, res.StoreRebuilds)
	}
	fmt.Println(res.Summary())
	if !res.OK() {
		return 1
	}
	return 0
}
