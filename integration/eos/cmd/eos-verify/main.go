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
// (-broker-restarts) and stops at the end; with neither, an embedded broker.
//
//	go run ./integration/eos/cmd/eos-verify                       # short mode, embedded broker
//	EDDY_KAFKA_HOME=/tmp/eddy-kafka-eos EDDY_KAFKA_PORT=39092 EDDY_KAFKA_CONTROLLER_PORT=39093 \
//	  go run ./integration/eos/cmd/eos-verify -mode long -kafka-script integration/kafka.sh
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
}

func presetFor(mode string) (preset, bool) {
	switch mode {
	case "short":
		return preset{records: 20000, keys: 200, faults: 6, brokerRestarts: 1, partitions: 4, gap: 3 * time.Second}, true
	case "long":
		return preset{records: 1000000, keys: 1000, faults: 100, brokerRestarts: 10, partitions: 6, gap: 6 * time.Second}, true
	}
	return preset{}, false
}

func run(args []string) int {
	fs := flag.NewFlagSet("eos-verify", flag.ContinueOnError)
	mode := fs.String("mode", "short", "preset: short (20,000 records, 6 faults 3 s apart, 1 broker restart; about a minute) or long (1,000,000 records, 100 faults 6 s apart, 10 broker restarts; about 25 min); the flags below override it")
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
	txnTimeout := fs.Duration("transaction-timeout", 0, "transaction timeout of the instances (default eddy's, 10s); the stall fault needs it 3 s below -session-timeout")
	faults := fs.Int("faults", -1, "instance faults")
	kinds := fs.String("fault-kinds", "kill,term,pause", "instance fault kinds, comma-separated: kill, term, pause, stall (SIGSTOP past the transaction timeout, within the session timeout)")
	brokerRestarts := fs.Int("broker-restarts", -1, "broker kills and restarts (need -kafka-script; default: the mode's with it, else 0)")
	gap := fs.Duration("fault-gap", 0, "mean time between the end of a fault and the next (default: the mode's)")
	span := fs.Duration("span", 0, "least time over which the input is written (default: the fault schedule's length)")
	seed := fs.Uint64("seed", 0, "seed of keys and fault schedule (0: from the clock; logged)")
	catchUp := fs.Duration("catch-up-timeout", 5*time.Minute, "how long to wait for the application to process everything after the last fault")
	workDir := fs.String("work-dir", "", "where logs, state dirs and the report go (default: a new temporary dir, kept)")
	verbose := fs.Bool("v", false, "debug logs from the instances")
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
		DebugInstances: *verbose, Logger: logger,
	}
	if *faults >= 0 {
		cfg.Faults = *faults
	}
	if *gap > 0 {
		cfg.FaultGap = *gap
	}
	for _, k := range strings.Split(*kinds, ",") {
		kind, err := eos.ParseFaultKind(strings.TrimSpace(k))
		if err != nil {
			fmt.Fprintln(os.Stderr, "eos-verify:", err)
			return 2
		}
		cfg.FaultKinds = append(cfg.FaultKinds, kind)
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
	if cfg.BrokerRestarts > 0 && cfg.Broker == nil {
		fmt.Fprintln(os.Stderr, "eos-verify: -broker-restarts needs -kafka-script (the command must control the broker)")
		return 2
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
	fmt.Fprintf(os.Stderr, "eos-verify: seed %d, %d tail restores checked, took %v, work dir %s\n",
		cfg.Seed, res.Report.TailRestores, res.Duration.Round(time.Second), cfg.WorkDir)
	fmt.Println(res.Summary())
	if !res.OK() {
		return 1
	}
	return 0
}
