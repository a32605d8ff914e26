//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/topicspec"
	"github.com/eddy-streams/eddy/kafkatest"
)

// env is the parent's state for one invocation.
type env struct {
	o       *options
	exe     string
	work    string
	client  sarama.Client
	admin   sarama.ClusterAdmin
	cluster *kafkatest.Cluster
	rng     *rand.Rand
	created []string
	machine machineInfo

	input                  *dataset              // pipe and passthrough input
	lines                  map[linesKey]*dataset // word-count lines by partition count and vocabulary
	winIn                  *dataset              // the windowed count's events
	clA, restoreInA        *dataset              // restore-full: changelog and input
	clB, restoreInB        *dataset              // restore-tail: changelog and input
	memIn                  *dataset              // memory rows' input
	memLoadID              map[int]string
	costIn                 map[int32]*dataset // cost rows' input by partition count
	ks                     *kstreamsApp       // built by the first Kafka Streams row
	results                []*runResult
	startLoad, endLoad     string
	startedAt, finishedAt  time.Time
	latencyRate            int
	latencyRateDerivedFrom string

	pg         *pgxpool.Pool // the postgres rows' server, opened by the first
	pgVersion  string
	pgSettings string   // what the report says of the server
	postmaster int      // its postmaster's PID when it runs on this host, else 0
	hotIn      *dataset // pg-upsert-hot's input
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func parentMain(ctx context.Context, o *options) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this executable: %w", err)
	}
	e := &env{o: o, exe: exe, rng: rand.New(rand.NewPCG(7, 11)), memLoadID: map[int]string{}, costIn: map[int32]*dataset{}, lines: map[linesKey]*dataset{}}
	if o.work == "" {
		if e.work, err = os.MkdirTemp("", "eddy-bench-"); err != nil {
			return err
		}
	} else {
		e.work = o.work
		if err := os.MkdirAll(e.work, 0o755); err != nil {
			return err
		}
	}
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	e.cluster, err = kafkatest.Dial(dialCtx, "kafka", o.brokers)
	cancel()
	if err != nil {
		return err
	}
	cfg := kafkatest.NewSaramaConfig()
	cfg.ClientID = o.prefix + "-monitor"
	cfg.Version = sarama.V3_9_0_0
	if e.client, err = sarama.NewClient(o.brokers, cfg); err != nil {
		return fmt.Errorf("connect to %v: %w", o.brokers, err)
	}
	if e.admin, err = sarama.NewClusterAdminFromClient(e.client); err != nil {
		_ = e.client.Close()
		return fmt.Errorf("admin client: %w", err)
	}
	defer func() {
		if !o.keep {
			e.cleanupAll()
		}
		_ = e.admin.Close() // closes the client too
		if e.pg != nil {
			e.pg.Close()
		}
	}()
	e.machine = readMachine(ctx)
	e.startLoad, e.startedAt = loadAvg(), time.Now()
	e.logf("bench: %s; work dir %s; rows %v", e.machine.summary(), e.work, o.rows)

	rounds := o.warmup + o.runs
	var failures []error
	runRow := func(r *rowDef, round int) {
		warm := round < o.warmup
		e.logf("%s round %d/%d%s", r.name, round+1, rounds, map[bool]string{true: " (warm-up)", false: ""}[warm])
		res, err := r.run(ctx, e, r, round)
		if err != nil {
			e.logf("  %s FAILED: %v", r.name, err)
			failures = append(failures, fmt.Errorf("%s round %d: %w", r.name, round+1, err))
			return
		}
		res.Row, res.Round, res.Warmup = r.name, round, warm
		e.results = append(e.results, res)
		e.logf("  %s", res.line())
	}
	for round := range rounds {
		for _, r := range rowTable() {
			if o.selected(r.name) && !r.latency && ctx.Err() == nil {
				runRow(r, round)
			}
		}
	}
	if e.anyLatency() && ctx.Err() == nil {
		if err := e.chooseLatencyRate(); err != nil {
			failures = append(failures, err)
		} else {
			for round := range rounds {
				for _, r := range rowTable() {
					if o.selected(r.name) && r.latency && ctx.Err() == nil {
						runRow(r, round)
					}
				}
			}
		}
	}
	e.endLoad, e.finishedAt = loadAvg(), time.Now()
	failures = append(failures, e.report()...)
	if ctx.Err() != nil {
		failures = append(failures, ctx.Err())
	}
	return errors.Join(failures...)
}

// savedReport is what -json writes and -from-json reads back.
type savedReport struct {
	Machine            machineInfo
	Command            string
	StartLoad, EndLoad string
	Started, Finished  time.Time
	LatencyRate        int
	LatencyFrom        string
	PGSettings         string `json:",omitempty"`
	Runs               []*runResult
	Summary            []*summary
}

// report prints the table and writes the Markdown and JSON files.
func (e *env) report() []error {
	var failures []error
	sums := e.summarize()
	fmt.Println(textTable(e, sums))
	if e.o.markdown != "" {
		if err := os.WriteFile(e.o.markdown, []byte(markdown(e, sums)), 0o644); err != nil {
			failures = append(failures, err)
		} else {
			e.logf("wrote %s", e.o.markdown)
		}
	}
	if e.o.jsonOut != "" {
		b, err := json.MarshalIndent(savedReport{
			Machine: e.machine, Command: e.o.commandLine, StartLoad: e.startLoad, EndLoad: e.endLoad,
			Started: e.startedAt, Finished: e.finishedAt, LatencyRate: e.latencyRate, LatencyFrom: e.latencyRateDerivedFrom,
			PGSettings: e.pgSettings, Runs: e.results, Summary: sums,
		}, "", "  ")
		if err == nil {
			err = os.WriteFile(e.o.jsonOut, b, 0o644)
		}
		if err != nil {
			failures = append(failures, err)
		} else {
			e.logf("wrote %s", e.o.jsonOut)
		}
	}
	return failures
}

// reportFromJSON renders the tables of a run saved with -json (the size flags given
// now describe the input in the Markdown).
func reportFromJSON(o *options) error {
	b, err := os.ReadFile(o.fromJSON)
	if err != nil {
		return err
	}
	var saved savedReport
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", o.fromJSON, err)
	}
	if saved.Command != "" {
		o.commandLine = saved.Command
	}
	e := &env{o: o, machine: saved.Machine, results: saved.Runs, startLoad: saved.StartLoad, endLoad: saved.EndLoad,
		startedAt: saved.Started, finishedAt: saved.Finished, latencyRate: saved.LatencyRate, latencyRateDerivedFrom: saved.LatencyFrom, pgSettings: saved.PGSettings}
	o.jsonOut = ""
	return errors.Join(e.report()...)
}

func (e *env) anyLatency() bool {
	for _, r := range rowTable() {
		if r.latency && e.o.selected(r.name) {
			return true
		}
	}
	return false
}

// cleanupAll deletes every topic this invocation made and the work directory (when the
// command made it).
func (e *env) cleanupAll() {
	if err := e.deleteTopicsWithPrefix(e.o.prefix + "-"); err != nil {
		e.logf("cleanup: %v", err)
	}
	if e.o.work == "" {
		_ = os.RemoveAll(e.work)
	} else {
		_ = os.RemoveAll(filepath.Join(e.work, "state"))
	}
}

// needInput writes the pipe and passthrough input once: -records keyed records.
func (e *env) needInput(ctx context.Context) error {
	if e.input != nil {
		return nil
	}
	P := int32(e.o.partitions)
	topic := e.o.prefix + "-input"
	if err := e.createTopic(ctx, topic, P, nil); err != nil {
		return err
	}
	began := time.Now()
	ds, err := e.produce(ctx, topic, P, e.o.records, keyed(e.rng, e.o.valueSize, P, e.o.records, false), "", 0)
	if err != nil {
		return err
	}
	e.input = ds
	e.logf("  wrote %d records (%.1f MB) to %s in %v", ds.Records, float64(ds.Bytes)/1e6, topic, time.Since(began).Round(time.Millisecond))
	return nil
}

// linesKey tells word-count inputs apart: partitions and vocabulary size.
type linesKey struct {
	partitions int32
	vocab      int
}

// needLines writes the word-count input once per partition count and vocabulary size:
// lines of at most -value-size bytes holding -words words drawn uniformly from vocab
// distinct words.
func (e *env) needLines(ctx context.Context, partitions int32, vocab int) (*dataset, error) {
	k := linesKey{partitions, vocab}
	if ds := e.lines[k]; ds != nil {
		return ds, nil
	}
	topic := e.o.prefix + "-lines"
	if partitions != int32(e.o.partitions) {
		topic = fmt.Sprintf("%s-lines-%d", e.o.prefix, partitions)
	}
	if vocab != e.o.vocab {
		topic = fmt.Sprintf("%s-v%d", topic, vocab)
	}
	if err := e.createTopic(ctx, topic, partitions, nil); err != nil {
		return nil, err
	}
	recs, words, distinct := lines(e.rng, vocabulary(e.rng, vocab), e.o.words, e.o.valueSize, partitions)
	ds, err := e.produce(ctx, topic, partitions, len(recs), func(i int) record { return recs[i] }, "", 0)
	if err != nil {
		return nil, err
	}
	ds.Units, ds.Keys = words, distinct
	e.lines[k] = ds
	e.logf("  wrote %d lines with %d words (%d distinct of a vocabulary of %d; %.1f MB) to %s (%d partitions)",
		ds.Records, words, distinct, vocab, float64(ds.Bytes)/1e6, topic, partitions)
	return ds, nil
}

// needWinInput writes the windowed count's input once: -win-events keyed events of
// -win-keys keys over an hour of event time (the hour before the last full hour: recent
// enough for every topic's time retention).
func (e *env) needWinInput(ctx context.Context) (*dataset, error) {
	if e.winIn != nil {
		return e.winIn, nil
	}
	P := int32(e.o.partitions)
	topic := e.o.prefix + "-events"
	if err := e.createTopic(ctx, topic, P, nil); err != nil {
		return nil, err
	}
	start := time.Now().Truncate(time.Hour).Add(-time.Hour)
	ds, err := e.produce(ctx, topic, P, e.o.winEvents, events(e.rng, e.o.valueSize, P, e.o.winKeys, e.o.winEvents, start, time.Hour), "", 0)
	if err != nil {
		return nil, err
	}
	e.winIn = ds
	e.logf("  wrote %d events of %d keys over an hour of event time to %s", ds.Records, e.o.winKeys, topic)
	return ds, nil
}

func (e *env) appA() string { return e.o.prefix + "-restore" }
func (e *env) appB() string { return e.o.prefix + "-restoretail" }

// writeChangelog creates a store's changelog as eddy would (compacted, one partition
// per task) and fills it with -changelog-keys keys in transactions of 5000 records.
func (e *env) writeChangelog(ctx context.Context, app string, partitions int32, keys int) (*dataset, error) {
	spec := topicspec.Changelog(app, storeName, partitions)
	if err := e.createTopic(ctx, spec.Name, partitions, spec.Configs); err != nil {
		return nil, err
	}
	began := time.Now()
	ds, err := e.produce(ctx, spec.Name, partitions, keys, keyed(e.rng, e.o.valueSize, partitions, keys, false), app+"-writer", 5000)
	if err != nil {
		return nil, err
	}
	if err := e.cluster.WaitStable(ctx, spec.Name); err != nil {
		return nil, err
	}
	e.logf("  wrote a changelog of %d keys (%.1f MB) to %s in %v", ds.Records, float64(ds.Bytes)/1e6, spec.Name, time.Since(began).Round(time.Millisecond))
	return ds, nil
}

// needRestoreA makes the changelog restore-full and the changelog-read rows read.
func (e *env) needRestoreA(ctx context.Context) error {
	if e.clA != nil {
		return nil
	}
	P := int32(e.o.partitions)
	cl, err := e.writeChangelog(ctx, e.appA(), P, e.o.clKeys)
	if err != nil {
		return err
	}
	in := e.appA() + "-in"
	if err := e.createTopic(ctx, in, P, nil); err != nil {
		return err
	}
	e.clA, e.restoreInA = cl, &dataset{Topic: in, Partitions: P, PerPart: make([]int64, P)}
	return nil
}

// needRestoreB makes the changelog and input of restore-tail; its state dir is kept
// across rounds.
func (e *env) needRestoreB(ctx context.Context) error {
	if e.clB != nil {
		return nil
	}
	P := int32(e.o.partitions)
	cl, err := e.writeChangelog(ctx, e.appB(), P, e.o.clKeys)
	if err != nil {
		return err
	}
	in := e.appB() + "-in"
	if err := e.createTopic(ctx, in, P, nil); err != nil {
		return err
	}
	e.clB, e.restoreInB = cl, &dataset{Topic: in, Partitions: P, PerPart: make([]int64, P)}
	return nil
}

// needMem writes the memory rows' input once: -mem-keys distinct keys over
// -mem-partitions partitions.
func (e *env) needMem(ctx context.Context) error {
	if e.memIn != nil {
		return nil
	}
	P := int32(e.o.memParts)
	topic := e.o.prefix + "-mem-in"
	if err := e.createTopic(ctx, topic, P, nil); err != nil {
		return err
	}
	ds, err := e.produce(ctx, topic, P, e.o.memKeys, keyed(e.rng, e.o.valueSize, P, e.o.memKeys, false), "", 0)
	if err != nil {
		return err
	}
	e.memIn = ds
	e.logf("  wrote %d keyed records to %s (%d partitions)", ds.Records, topic, P)
	return nil
}

func (r *runResult) line() string {
	switch {
	case r.P50 > 0:
		return fmt.Sprintf("%d records at %d/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms; CPU %.2f s, RSS %.0f MB", r.LatCount, r.LatRate, r.P50, r.P99, r.Max, r.CPU, r.MaxRSSMB)
	case r.Resume > 0:
		return fmt.Sprintf("restored %d records in %.2f s (%.0f/s); every task processing after %.2f s; CPU %.2f s, RSS %.0f MB", r.Restored, r.Seconds, r.Rate, r.Resume, r.CPU, r.MaxRSSMB)
	}
	if r.Tasks > 0 {
		return fmt.Sprintf("%d tasks: %d sockets (peak %d), %d fds, %d goroutines (peak %d); RSS %.0f MB (anon %.0f, file %.0f); %d in %.2f s: %.0f/s; CPU %.2f s; startup %.2f s",
			r.Tasks, r.Child.Sockets, r.Child.SocketsPeak, r.Child.FDs, r.Child.Goroutines, r.Child.GoroutinesPeak, r.MaxRSSMB, r.PeakAnonMB, r.PeakFileMB, r.Units, r.Seconds, r.Rate, r.CPU, r.Startup)
	}
	line := fmt.Sprintf("%d in %.2f s: %.0f/s, %.1f MB/s; CPU %.2f s (%.2f s/M); RSS %.0f MB; startup %.2f s; commits %d (mean %.1f ms)",
		r.Units, r.Seconds, r.Rate, r.MBps, r.CPU, r.CPUPerM, r.MaxRSSMB, r.Startup, r.Child.Commits, r.Child.CommitMeanMs)
	if r.OutRecords > 0 {
		line += fmt.Sprintf("; %d output records (%.3f per unit)", r.OutRecords, perUnit(float64(r.OutRecords), r.Units))
	}
	return line
}
