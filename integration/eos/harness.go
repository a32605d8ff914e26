//go:build unix

package eos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/kafkatest"
)

// Config configures one run of the harness.
type Config struct {
	// Brokers are the bootstrap addresses.
	Brokers []string
	// Prefix makes the run's topic and application names (NamesFor); unique per run.
	Prefix string
	// Records, over Keys keys and Partitions input partitions; Buckets for the
	// repartition hop.
	Records    int
	Keys       int
	Partitions int32
	Buckets    int
	// Instances is the number of instance processes (1 to 3 makes sense).
	Instances int
	// CommitInterval of the instances; AtLeastOnce runs them under eddy.AtLeastOnce.
	CommitInterval time.Duration
	AtLeastOnce    bool
	// SessionTimeout of the instances' consumer group sessions; default 6 s. A paused
	// instance stays stopped longer than this.
	SessionTimeout time.Duration
	// TransactionTimeout of the instances; default eddy's (10 s). A stalled instance
	// stays stopped longer than this (and shorter than SessionTimeout).
	TransactionTimeout time.Duration
	// Faults instance faults of FaultKinds (default kill, term, pause), and
	// BrokerRestarts broker kills (these need Broker), one after the other with
	// FaultGap (default 3 s) on average between them, while the driver writes the
	// records. The driver spreads the records over the planned schedule, or over Span
	// if that is longer.
	Faults         int
	FaultKinds     []FaultKind
	BrokerRestarts int
	Broker         BrokerControl
	FaultGap       time.Duration
	Span           time.Duration
	// Cluster, a three-broker cluster the harness may fault, takes ClusterFaults
	// faults of ClusterFaultKinds (default: all of ClusterFaultKinds()) on top of the
	// others, placed at random. BrokerPause is how long a paused broker stays stopped at
	// least (default 6 s: past kafka.sh's 4 s broker session). ReplicationFactor is
	// given to the instances (eddy.Config.ReplicationFactor; 0: eddy's default); with
	// a Cluster the harness checks at the end that every internal topic has a replica
	// on each broker.
	Cluster           ClusterControl
	ClusterFaults     int
	ClusterFaultKinds []FaultKind
	BrokerPause       time.Duration
	ReplicationFactor int16
	// InternalTopicConfigs are given to the instances (eddy.Config.InternalTopicConfigs);
	// with a Cluster the harness checks that the internal topics have them.
	InternalTopicConfigs map[string]string
	// Standbys is the instances' eddy.Config.NumStandbyReplicas (0: none).
	Standbys int
	// Static gives each instance a static group membership: eddy.Config.InstanceID
	// "i<n>", the same across its restarts (which keep its state dir), as a StatefulSet
	// pod's name. A killed or stopped instance restarted within its session timeout
	// then takes its tasks back in the same generation (Result.StaticRejoins), and the
	// Replace fault becomes possible.
	Static bool
	// Cooperative makes the instances run cooperative rebalancing
	// (eddy.Config.RebalanceProtocol): a rebalance stops only the tasks that move.
	Cooperative bool
	// OverlapCommits makes the instances go on processing while their commits commit
	// (eddy.Config.OverlapCommits).
	OverlapCommits bool
	// Seed makes the run's keys, event times and fault schedule.
	Seed uint64
	// Clock gives the input records their event times and Windows are the windowed
	// aggregation's; default (both zero): TimeFor(Records, Keys, Seed, now).
	Clock   EventClock
	Windows WindowParams
	// Finals adds the windowed aggregation's final results (suppressed until each
	// window closes) to the application.
	Finals bool
	// Join are the stream–stream join's windows; zero: no join (the driver writes no
	// Right records).
	Join JoinParams
	// RetentionChange, when set, restarts every instance that a kill or a stop faults
	// with its windowed aggregation's store retention switched between the default
	// (Windows.RetentionMs) and this: a restart with another grace, as far as the store
	// is concerned. A retention above two minutes changes the store's segment interval
	// (max(retention/2, 60 s)), so the restarted instance finds its window stores cut
	// with another interval and rebuilds them from their changelogs (Result.
	// StoreRebuilds counts them) while the other instances go on with theirs. The grace
	// itself stays, so every record's lateness, and with it the verifier's
	// recomputation, is what it was: a changed grace would change which records the
	// restarted instance drops as late, and so what the verifier expects.
	RetentionChange time.Duration
	// Postgres adds the PostgreSQL target (pg.go): the aggregates and final results
	// also written through package sink/pgsink in its three modes, the sink faults
	// (SinkFaultKinds, in FaultKinds) and Postgres.Crashes PostgresCrash faults, and
	// the verifier's check of the tables (checkPostgres). It needs Finals and
	// exactly-once.
	Postgres *PostgresConfig
	// CatchUpTimeout bounds the wait, after the last record and fault, for the
	// application to process everything; default 3 min.
	CatchUpTimeout time.Duration
	// WorkDir holds the instances' state dirs and logs, and the run's records.
	WorkDir string
	// Launcher starts an instance process.
	Launcher Launcher
	// DebugInstances turns on the instances' debug logs.
	DebugInstances bool
	Logger         *slog.Logger
}

// Result is the outcome of a run.
type Result struct {
	Report *Report
	// Evidence describes the raw logs around input the echo topic lost
	// (lossEvidence); "" when it lost none.
	Evidence string
	// Records is the number of records the driver had acknowledged (the report's
	// Records counts those in the input topic: the same unless a send that failed
	// was written after all).
	Records        int
	Kills          int
	Stops          int
	Pauses         int
	BrokerRestarts int
	// StalledInCommit counts the MoveTwice victims that stopped inside a commit (the
	// others were stopped wherever they were).
	StalledInCommit int
	// BrokerPauses counts the brokers paused; ClusterFaults the cluster faults by kind.
	BrokerPauses  int
	ClusterFaults map[string]int
	// Anomalies are misbehaviours of the runtime the harness saw while running: an
	// instance that exited on its own, one that did not stop on SIGTERM, an
	// application that did not catch up.
	Anomalies []string
	// RetentionChanges counts the restarts with another window store retention
	// (Config.RetentionChange); StoreRebuilds the stores the instances emptied at such a
	// restart, to rebuild them from their changelogs (task.StoreRebuildMsg lines).
	RetentionChanges int
	StoreRebuilds    int
	// DeadMembersRemoved counts the group members of dead processes that the broker
	// kept and the harness removed (removeDeadMembers); 0 on real Kafka.
	DeadMembersRemoved int
	// Replacements counts the Replace faults (FreshReplacements of them on an empty
	// state dir, the others on a copy of the zombie's); ZombiesFenced the zombies that
	// stopped, once resumed, on the runtime's error for a replaced static member.
	Replacements      int
	FreshReplacements int
	ZombiesFenced     int
	// StaticRejoins counts the restarts (after a kill, a stop or a replacement) of a
	// static member that took their assignment in the generation the group had before
	// the fault (no rebalance); RejoinRebalances those that found a newer generation.
	StaticRejoins    int
	RejoinRebalances int
	// Releases counts the tasks an instance let go at a cooperative revoke (its open
	// transaction committed, then the task closed) for their next owner
	// (Config.Cooperative).
	Releases int
	// PostgresCrashes counts the PostgresCrash faults; SinkKills the sink faults' kills
	// by step (counted with the kills too); SinkFaultsMissed the armed steps no
	// instance reached in time.
	PostgresCrashes  int
	SinkKills        map[string]int
	SinkFaultsMissed int
	Duration         time.Duration
	WorkDir          string
	// Observed is what the verifier read back.
	Observed    *Observed
	postgres    bool
	static      bool
	cooperative bool
}

// Summary is the one-line result (records: those in the input topic):
// eos-verify: records=N kills=K stops=S pauses=Z broker-restarts=B duplicates=D lost=L hanging=H mismatched=M
// with cluster faults, "cluster-faults=C broker-pauses=P" come after broker-restarts;
// with static membership, "replacements=R zombies-fenced=Z static-rejoins=J
// rejoin-rebalances=G" after them; with cooperative rebalancing, "releases=N" after
// those; with the PostgreSQL target, "pg-crashes=C sink-kills=F" after them and
// "pg-rows=R prepared-left=P" at the end (the duplicates, lost and mismatched counts
// include the tables').
func (r *Result) Summary() string {
	rep := r.Report
	records := r.Records
	if rep == nil {
		rep = &Report{}
	} else {
		records = rep.Records
	}
	cluster := ""
	if len(r.ClusterFaults) > 0 {
		n := 0
		for _, c := range r.ClusterFaults {
			n += c
		}
		cluster = fmt.Sprintf(" cluster-faults=%d broker-pauses=%d", n, r.BrokerPauses)
	}
	static := ""
	if r.static {
		static = fmt.Sprintf(" replacements=%d zombies-fenced=%d static-rejoins=%d rejoin-rebalances=%d", r.Replacements, r.ZombiesFenced, r.StaticRejoins, r.RejoinRebalances)
	}
	if r.cooperative {
		static += fmt.Sprintf(" releases=%d", r.Releases)
	}
	pg, prepared := "", ""
	if r.postgres {
		n := 0
		for _, c := range r.SinkKills {
			n += c
		}
		pg = fmt.Sprintf(" pg-crashes=%d sink-kills=%d", r.PostgresCrashes, n)
		prepared = fmt.Sprintf(" pg-rows=%d prepared-left=%d", rep.PGRows, rep.PGPrepared)
	}
	return fmt.Sprintf("eos-verify: records=%d kills=%d stops=%d pauses=%d broker-restarts=%d%s%s%s duplicates=%d lost=%d hanging=%d mismatched=%d%s",
		records, r.Kills, r.Stops, r.Pauses, r.BrokerRestarts, cluster, static, pg, rep.Duplicates, rep.Lost, rep.Hanging, rep.Mismatched, prepared)
}

// OK reports whether the run found nothing wrong.
func (r *Result) OK() bool { return r.Report != nil && r.Report.OK() && len(r.Anomalies) == 0 }

func (c *Config) defaults() error {
	if len(c.Brokers) == 0 {
		return errors.New("eos: Brokers: required")
	}
	if c.Prefix == "" {
		return errors.New("eos: Prefix: required")
	}
	if c.WorkDir == "" {
		return errors.New("eos: WorkDir: required")
	}
	if c.Launcher.Exe == "" {
		return errors.New("eos: Launcher.Exe: required")
	}
	if c.Records < 1 || c.Keys < 1 || c.Partitions < 1 || c.Buckets < 1 || c.Instances < 1 {
		return fmt.Errorf("eos: records %d, keys %d, partitions %d, buckets %d, instances %d: want at least 1 each", c.Records, c.Keys, c.Partitions, c.Buckets, c.Instances)
	}
	if c.BrokerRestarts > 0 && c.Broker == nil {
		return errors.New("eos: BrokerRestarts need a Broker to control")
	}
	if c.ClusterFaults > 0 && c.Cluster == nil {
		return errors.New("eos: ClusterFaults need a Cluster to control")
	}
	for _, k := range c.ClusterFaultKinds {
		if !k.IsClusterFault() {
			return fmt.Errorf("eos: ClusterFaultKinds: %v is not a cluster fault", k)
		}
	}
	for _, k := range c.FaultKinds {
		if k.IsClusterFault() || k == BrokerKill {
			return fmt.Errorf("eos: FaultKinds: %v is not an instance fault (see ClusterFaultKinds, BrokerRestarts)", k)
		}
	}
	for _, k := range c.FaultKinds {
		if k.IsSinkFault() && c.Postgres == nil {
			return fmt.Errorf("eos: FaultKinds: %v needs the PostgreSQL target (Postgres)", k)
		}
	}
	if p := c.Postgres; p != nil {
		switch {
		case p.DSN == "":
			return errors.New("eos: Postgres.DSN: required")
		case p.Crashes > 0 && p.Control == nil:
			return errors.New("eos: Postgres.Crashes need a Postgres.Control")
		case !c.Finals:
			return errors.New("eos: the PostgreSQL target needs Finals")
		case c.AtLeastOnce:
			return errors.New("eos: the PostgreSQL target's two-phase mode needs exactly-once")
		}
	}
	if c.BrokerPause <= 0 {
		c.BrokerPause = 6 * time.Second
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 6 * time.Second
	}
	if slices.Contains(c.FaultKinds, Stall) {
		txn := c.TransactionTimeout
		if txn <= 0 {
			txn = 10 * time.Second
		}
		if c.SessionTimeout < txn+3*time.Second {
			return fmt.Errorf("eos: the stall fault needs a session timeout (%v) at least 3 s above the transaction timeout (%v)", c.SessionTimeout, txn)
		}
	}
	if slices.Contains(c.FaultKinds, Replace) && !c.Static {
		return errors.New("eos: the replace fault needs static membership (Static)")
	}
	if slices.Contains(c.FaultKinds, MoveTwice) {
		if c.Instances < 3 {
			return fmt.Errorf("eos: the move-twice fault needs three instances, not %d", c.Instances)
		}
		// The stalled owner's transaction must stay open until its tasks moved twice and
		// it resumed (at most Pause + moveTwiceAfterPause + 3 s after it stopped).
		if least := c.SessionTimeout + 2*time.Second + moveTwiceAfterPause + 3*time.Second; c.txnTimeout() < least {
			return fmt.Errorf("eos: the move-twice fault needs a transaction timeout (%v) of at least %v (the session timeout %v + 13 s)", c.txnTimeout(), least, c.SessionTimeout)
		}
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.Windows.SizeMs == 0 && c.Clock.StepMs == 0 {
		retention := c.Windows.RetentionMs
		c.Clock, c.Windows = TimeFor(c.Records, c.Keys, c.Seed, time.Now())
		c.Windows.RetentionMs = retention
	}
	if least := c.Windows.SizeMs + c.Windows.GraceMs; c.RetentionChange > 0 && c.RetentionChange.Milliseconds() < least {
		return fmt.Errorf("eos: RetentionChange %v: want at least the windows' size plus grace, %d ms", c.RetentionChange, least)
	}
	if c.CatchUpTimeout <= 0 {
		c.CatchUpTimeout = 3 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (c *Config) pgCrashes() int {
	if c.Postgres == nil {
		return 0
	}
	return c.Postgres.Crashes
}

func (c *Config) txnTimeout() time.Duration {
	if c.TransactionTimeout > 0 {
		return c.TransactionTimeout
	}
	return 10 * time.Second
}

// harness is one run in progress.
type harness struct {
	cfg       Config
	names     Names
	logger    *slog.Logger
	cluster   *kafkatest.Cluster
	instances []*instance
	res       *Result
	began     time.Time
	// brokerDown is set while the harness has the broker killed.
	brokerDown bool
	// cl is the state of the cluster faults.
	cl clusterState
	// membersClient and membersChecked serve removeDeadMembers.
	membersClient  sarama.Client
	membersChecked time.Time
	// zombieDirs are the state dirs that replaced zombies left (their stores are
	// checked too).
	zombieDirs []string
	// pg is the harness's pool on the PostgreSQL target's database; pgTables its
	// tables.
	pg       *pgxpool.Pool
	pgTables PGTables
}

// Run runs the test application in Instances processes, writes the input, injects the
// planned faults, waits for the application to process everything, stops it, and
// verifies the result. An error means the harness could not do its job; what it found
// wrong with the runtime is in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	h := &harness{cfg: cfg, names: NamesFor(cfg.Prefix), logger: cfg.Logger, res: &Result{WorkDir: cfg.WorkDir, static: cfg.Static, cooperative: cfg.Cooperative}, began: time.Now()}
	defer h.cleanup()
	res, err := h.run(ctx)
	h.res.Duration = time.Since(h.began)
	return res, err
}

func (h *harness) elapsed() time.Duration { return time.Since(h.began).Round(time.Millisecond) }

func (h *harness) anomaly(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.logger.Error("eos: anomaly", "at", h.elapsed(), "what", msg)
	h.res.Anomalies = append(h.res.Anomalies, msg)
}

func (h *harness) run(ctx context.Context) (*Result, error) {
	cfg := h.cfg
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("eos: work dir: %w", err)
	}
	plan, planned := PlanFaults(PlanConfig{
		Seed: cfg.Seed, Faults: cfg.Faults, Kinds: cfg.FaultKinds, BrokerRestarts: cfg.BrokerRestarts,
		Instances: cfg.Instances, Gap: cfg.FaultGap, Pause: cfg.SessionTimeout + 2*time.Second,
		StallMin: cfg.txnTimeout() + time.Second, StallMax: cfg.SessionTimeout - time.Second,
		ClusterFaults: cfg.ClusterFaults, ClusterKinds: cfg.ClusterFaultKinds, BrokerPause: cfg.BrokerPause,
		PostgresCrashes: cfg.pgCrashes(),
	})
	// The input keeps coming a little past the planned end: faults take longer than
	// planned when the machine is slow.
	// The faults start after the application's first commits (waitProcessing): a few
	// seconds, a commit interval at most, after the start.
	span := max(cfg.Span, planned*11/10+cfg.CommitInterval+3*time.Second)
	h.logger.Info("eos: run", "prefix", cfg.Prefix, "seed", cfg.Seed, "records", cfg.Records, "keys", cfg.Keys,
		"partitions", cfg.Partitions, "instances", cfg.Instances, "commit_interval", cfg.CommitInterval,
		"at_least_once", cfg.AtLeastOnce, "session_timeout", cfg.SessionTimeout, "faults", len(plan), "span", span, "work_dir", cfg.WorkDir)
	for i, f := range plan {
		h.logger.Info("eos: planned fault", "n", i+1, "fault", f.String())
	}

	dialCtx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := kafkatest.Dial(dialCtx, "eos", cfg.Brokers)
	cancel()
	if err != nil {
		return nil, err
	}
	h.cluster = c
	for _, t := range append([]string{h.names.Input, h.names.Right}, h.names.OutputTopics()...) {
		if err := c.CreateTopic(ctx, t, cfg.Partitions, nil); err != nil {
			return nil, fmt.Errorf("eos: create topic %s: %w", t, err)
		}
	}
	if cfg.Postgres != nil {
		h.res.postgres = true
		if err := h.pgSetup(ctx); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Instances {
		in := &instance{
			cfg: InstanceConfig{
				Name: fmt.Sprintf("i%d", i), Names: h.names, Buckets: cfg.Buckets, Windows: cfg.Windows, Finals: cfg.Finals, Join: cfg.Join, Brokers: cfg.Brokers,
				StateDir:       filepath.Join(cfg.WorkDir, fmt.Sprintf("state-%d", i)),
				CommitInterval: cfg.CommitInterval, AtLeastOnce: cfg.AtLeastOnce,
				SessionTimeout: cfg.SessionTimeout, TransactionTimeout: cfg.TransactionTimeout,
				ReplicationFactor: cfg.ReplicationFactor, InternalTopicConfigs: cfg.InternalTopicConfigs,
				Standbys: cfg.Standbys, Debug: cfg.DebugInstances, Postgres: h.instancePostgres(),
				Cooperative: cfg.Cooperative, OverlapCommits: cfg.OverlapCommits,
			},
			launcher: cfg.Launcher,
			logDir:   filepath.Join(cfg.WorkDir, "logs"),
		}
		if cfg.Static {
			in.cfg.InstanceID = fmt.Sprintf("i%d", i)
		}
		if slices.Contains(cfg.FaultKinds, MoveTwice) || slices.Contains(cfg.FaultKinds, Replace) {
			in.cfg.StallFile = filepath.Join(cfg.WorkDir, fmt.Sprintf("stall-%d", i))
		}
		h.instances = append(h.instances, in)
		if err := in.start(nil); err != nil {
			return nil, err
		}
	}

	// The driver writes the input while the faults happen.
	driverCtx, stopDriver := context.WithCancel(ctx)
	defer stopDriver()
	type driven struct {
		acked  []Acked
		right  []Acked
		failed int
		err    error
	}
	driverDone := make(chan driven, 1)
	// The input is handed out fault by fault: a share before the first fault and one
	// more shortly before each fault starts (lead), the rest with the last. At the
	// planned pace the rate alone spreads it so; when faults take longer than planned
	// (a broker restart on a loaded machine, or the warm-up before the fault clock
	// starts), the driver waits instead of running out before the last faults.
	//
	// The share is released ahead of its fault, not at it, so that input is flowing
	// when the fault strikes: released at the fault, a late fault always met a victim
	// that had been idle for seconds with everything committed, and an at-least-once
	// run with four SIGKILLs repeated nothing (CI, seed 1796129508582246729).
	var released atomic.Int64
	allowed := func() int {
		return int(int64(cfg.Records) * (released.Load() + 1) / int64(len(plan)+1))
	}
	lead := cfg.FaultGap / 4
	if lead <= 0 {
		lead = 750 * time.Millisecond
	}
	go func() {
		right := ""
		if cfg.Join.DiffMs > 0 {
			right = h.names.Right
		}
		acked, ackedRight, failed, err := Produce(driverCtx, DriverConfig{
			Brokers: cfg.Brokers, Topic: h.names.Input, RightTopic: right, Partitions: cfg.Partitions, Records: cfg.Records,
			Keys: cfg.Keys, Rate: float64(cfg.Records) / span.Seconds(), Allowed: allowed, Seed: cfg.Seed, Clock: cfg.Clock, Logger: h.logger,
		})
		driverDone <- driven{acked, ackedRight, failed, err}
	}()

	// The fault clock starts once the application is processing (planned times are
	// after that): a kill before a task's first commit leaves no local state, so its
	// restart has no tail restore to check (in CI both runs of a short-mode test once
	// had their only SIGKILL in the first two seconds).
	warmUp, err := h.waitProcessing(ctx)
	if err != nil {
		return nil, err
	}
	var next time.Duration
	for i, f := range plan {
		if err := h.sleepUntil(ctx, max(warmUp+f.At, next)-lead); err != nil {
			return nil, err
		}
		released.Store(int64(i + 1))
		if err := h.sleepUntil(ctx, max(warmUp+f.At, next)); err != nil {
			return nil, err
		}
		h.logger.Info("eos: fault", "n", i+1, "of", len(plan), "at", h.elapsed(), "fault", f.String())
		if err := h.inject(ctx, f); err != nil {
			return nil, err
		}
		next = time.Since(h.began) + f.After
	}
	released.Store(int64(len(plan)))
	var d driven
	select {
	case d = <-driverDone:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d.err != nil {
		return nil, d.err
	}
	h.res.Records = len(d.acked)
	if err := writeAcked(filepath.Join(cfg.WorkDir, "acked.tsv"), d.acked); err != nil {
		return nil, err
	}
	h.logger.Info("eos: input written", "at", h.elapsed(), "acked", len(d.acked), "acked_right", len(d.right), "failed_sends", d.failed)

	if err := h.waitCaughtUp(ctx); err != nil {
		return nil, err
	}
	if h.pg != nil {
		if err := h.waitPipes(ctx); err != nil {
			return nil, err
		}
	}
	h.stopAll()
	if cfg.Cluster != nil {
		h.checkReplication()
	}

	o, err := Gather(ctx, GatherConfig{Brokers: cfg.Brokers, Names: h.names, Buckets: cfg.Buckets, Windows: cfg.Windows, Finals: cfg.Finals, Join: cfg.Join, Logger: h.logger})
	if err != nil {
		return nil, err
	}
	o.Acked, o.AckedRight = d.acked, d.right
	if h.pg != nil {
		if o.Postgres, err = GatherPostgres(ctx, h.pg, h.pgTables, h.names.App); err != nil {
			return nil, err
		}
	}
	o.Standbys = cfg.Standbys
	o.OperatorStarts = map[int32][]int64{}
	for _, in := range h.instances {
		for _, p := range in.processes() {
			h.res.StoreRebuilds += p.storeRebuildCount()
			h.res.Releases += p.releaseCount()
			for _, s := range p.operatorStartEvents() {
				o.OperatorStarts[s.partition] = append(o.OperatorStarts[s.partition], s.offset)
			}
		}
	}
	for _, dir := range h.zombieDirs {
		snaps, err := ReadStateDir(dir, h.names.App)
		if err != nil {
			h.anomaly("zombie state dir %s unreadable: %v", dir, err)
			continue
		}
		o.Snapshots = append(o.Snapshots, snaps...)
	}
	for _, in := range h.instances {
		snaps, err := ReadStateDir(in.cfg.StateDir, h.names.App)
		if err != nil {
			h.anomaly("%s: state dir unreadable: %v", in.cfg.Name, err)
			continue
		}
		o.Snapshots = append(o.Snapshots, snaps...)
		for _, p := range in.processes() {
			if p.afterKill == nil {
				continue
			}
			first := map[string]bool{}
			checked := 0
			for _, ev := range p.restoreEvents() {
				k := ev.Task + "/" + ev.Store
				if first[k] {
					continue
				}
				first[k] = true
				if cp, ok := p.afterKill[k]; ok {
					o.Restores = append(o.Restores, RestoreCheck{Instance: p.name, Checkpoint: cp, Event: ev, Standby: p.heldStandby(ev.Task)})
					checked++
				}
			}
			// A restart restores only what it is assigned: the stores it kept are
			// checked only when their tasks come back to it.
			h.logger.Info("eos: restart after SIGKILL", "process", p.name,
				"stores_kept", len(p.afterKill), "stores_restored", len(first), "checked", checked)
		}
	}
	h.checkRaces()
	h.res.Observed = o
	h.res.Report = Check(o)
	if h.res.Report.Lost > 0 {
		if client, err := newClient(cfg.Brokers); err != nil {
			h.res.Evidence = fmt.Sprintf("reading the evidence of the loss: %v\n", err)
		} else {
			h.res.Evidence = lossEvidence(client, h.names, o)
			_ = client.Close()
		}
		h.res.Evidence += h.evidenceFromLogs(o)
	}
	if n := h.res.Report.OffsetRegressions; n > 0 {
		h.anomaly("the group's committed offsets went back %d times (see the offset-regression problems): it resumed below what it had committed, which repeats input", n)
	}
	if err := h.writeReport(); err != nil {
		return nil, err
	}
	return h.res, nil
}

// evidenceFromLogs quotes the instances' log lines about the tasks whose input the
// echo topic lost (evidenceLogLines).
func (h *harness) evidenceFromLogs(o *Observed) string {
	var parts []int32
	for _, r := range lostEchoRuns(o, 3) {
		if !slices.Contains(parts, r.partition) {
			parts = append(parts, r.partition)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	logs := map[string]string{}
	for _, in := range h.instances {
		for _, p := range in.processes() {
			logs[filepath.Base(p.logPath)] = p.logPath
		}
	}
	lines := evidenceLogLines(logs, parts)
	return fmt.Sprintf(" the instances' warnings and errors of tasks 0_%v, and their workers' failed transactions:\n  %s\n", parts, strings.Join(lines, "\n  "))
}

// checkRaces turns the race detector's reports in the instances' logs into anomalies.
// There is no known race left to tolerate: the one inside sarama is fixed in
// third_party/sarama.
func (h *harness) checkRaces() {
	for _, in := range h.instances {
		for _, p := range in.processes() {
			for _, r := range p.raceReports() {
				h.anomaly("%s: data race (log %s):\n%s", p.name, p.logPath, r)
			}
		}
	}
}

// sleepUntil waits until at after the start, restarting instances that died on their
// own in the meantime.
func (h *harness) sleepUntil(ctx context.Context, at time.Duration) error {
	for {
		h.reviveCrashed()
		h.removeDeadMembers()
		left := at - time.Since(h.began)
		if left <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(left, 500*time.Millisecond)):
		}
	}
}

// reviveCrashed restarts instances whose process ended without the harness asking.
func (h *harness) reviveCrashed() {
	for _, in := range h.instances {
		p := in.proc
		if p == nil || p.expected || !p.exited() {
			continue
		}
		h.anomaly("%s exited on its own (%v); last log lines:\n%s", p.name, p.err, p.lastLines())
		if err := in.start(nil); err != nil {
			h.anomaly("restarting %s: %v", in.cfg.Name, err)
		}
	}
}

func (h *harness) pick(want int) *instance {
	for i := range h.instances {
		in := h.instances[(want+i)%len(h.instances)]
		if in.proc != nil && !in.proc.exited() {
			return in
		}
	}
	return nil
}

// inject runs one fault to its end: the victim is back (or the broker serves again).
func (h *harness) inject(ctx context.Context, f Fault) error {
	if f.Kind.IsClusterFault() {
		return h.injectCluster(ctx, f)
	}
	if f.Kind == PostgresCrash {
		return h.crashPostgres(ctx)
	}
	if f.Kind.IsSinkFault() {
		return h.injectSink(ctx, f)
	}
	if f.Kind == BrokerKill {
		h.brokerDown = true
		if err := h.cfg.Broker.Kill(ctx); err != nil {
			return err
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+f.Down); err != nil {
			return err
		}
		if err := h.cfg.Broker.Restart(ctx); err != nil {
			return err
		}
		h.brokerDown = false
		h.res.BrokerRestarts++
		h.logger.Info("eos: broker back", "at", h.elapsed())
		return nil
	}
	in := h.pick(f.Instance)
	if in == nil {
		h.anomaly("no running instance for fault %v", f)
		return nil
	}
	p := in.proc
	gen0 := h.generation()
	switch f.Kind {
	case MoveTwice:
		return h.moveTwice(ctx, f, in)
	case Replace:
		return h.replace(ctx, f, in)
	case Pause, Stall:
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		h.res.Pauses++
		t := time.NewTimer(f.Down)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if err := p.signal(syscall.SIGCONT); err != nil {
			return err
		}
		h.logger.Info("eos: resumed", "instance", p.name, "at", h.elapsed())
		return ctx.Err()
	case Kill, Term:
		p.expected = true
		sig := syscall.SIGKILL
		if f.Kind == Term {
			sig = syscall.SIGTERM
		}
		if err := p.signal(sig); err != nil {
			return err
		}
		// What a SIGKILL left in the state dir is copied as it is and read after the
		// restart: reading it (each bbolt file copied, opened and verified) took up to
		// 10 s on a loaded machine, which kept the restart of a static member past its
		// session timeout (a rebalance where static membership gives none).
		killed := ""
		if f.Kind == Kill {
			h.res.Kills++
			if !p.wait(30 * time.Second) {
				return fmt.Errorf("eos: %s did not die of SIGKILL within 30 s", p.name)
			}
			killed = filepath.Join(h.cfg.WorkDir, "after-kill-"+in.cfg.Name)
			if err := copyDir(in.cfg.StateDir, killed); err != nil {
				return fmt.Errorf("eos: copying %s's state dir after SIGKILL: %w", p.name, err)
			}
		} else {
			h.res.Stops++
			if !p.wait(2 * time.Minute) {
				h.anomaly("%s did not stop within 2 min of SIGTERM; killing it; last log lines:\n%s", p.name, p.lastLines())
				_ = p.signal(syscall.SIGKILL)
				p.wait(30 * time.Second)
			} else if p.err != nil && !p.dumped {
				h.anomaly("%s exited with %v after SIGTERM; last log lines:\n%s", p.name, p.err, p.lastLines())
			}
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+f.Down); err != nil {
			return err
		}
		if h.cfg.RetentionChange > 0 {
			// Switch the window store's retention: its segment interval changes with it.
			if in.cfg.Windows.RetentionMs == h.cfg.RetentionChange.Milliseconds() {
				in.cfg.Windows.RetentionMs = h.cfg.Windows.RetentionMs
			} else {
				in.cfg.Windows.RetentionMs = h.cfg.RetentionChange.Milliseconds()
			}
			h.res.RetentionChanges++
		}
		h.logger.Info("eos: restarting", "instance", in.cfg.Name, "at", h.elapsed(), "window_retention_ms", in.cfg.Windows.RetentionMs)
		if err := in.start(nil); err != nil {
			return err
		}
		if killed != "" {
			snaps, err := ReadStateDir(killed, h.names.App)
			if err != nil {
				h.anomaly("%s: state dir after SIGKILL unreadable: %v", p.name, err)
			}
			in.proc.afterKill = checkpoints(snaps)
			if err := os.RemoveAll(killed); err != nil {
				return fmt.Errorf("eos: %w", err)
			}
		}
		if h.cfg.Static {
			if err := h.checkRejoin(ctx, in.proc, gen0); err != nil {
				return err
			}
		}
		if f.Kind == Kill {
			return h.waitRestoring(ctx, in.proc)
		}
		return nil
	}
	return fmt.Errorf("eos: unknown fault %v", f.Kind)
}

// moveTwice runs the MoveTwice fault on instance a: a stops itself inside a commit (its
// stall file), the group gives its tasks away, another instance stops cleanly and comes
// back (the tasks it took from a move to the third), then a resumes.
func (h *harness) moveTwice(ctx context.Context, f Fault, a *instance) error {
	p := a.proc
	began := time.Since(h.began)
	inCommit, err := h.stallInCommit(ctx, p, a.cfg.StallFile)
	if err != nil {
		return err
	}
	if !inCommit {
		h.logger.Warn("eos: no commit of the instance caught within 30 s; stopping it where it is", "instance", p.name)
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return err
		}
	}
	h.res.Pauses++
	if inCommit {
		h.res.StalledInCommit++
	}
	h.logger.Info("eos: stalled", "instance", p.name, "inside_commit", inCommit, "at", h.elapsed())
	// The group gives a's tasks away past its session timeout.
	if err := h.sleepUntil(ctx, began+h.cfg.SessionTimeout+2*time.Second); err != nil {
		return err
	}
	var b *instance
	for i := range h.instances {
		in := h.instances[(f.Target+i)%len(h.instances)]
		if in != a && in.proc != nil && !in.proc.exited() {
			b = in
			break
		}
	}
	if b == nil {
		h.anomaly("no running instance to move %s's tasks again", p.name)
	} else {
		bp := b.proc
		bp.expected = true
		if err := bp.signal(syscall.SIGTERM); err != nil {
			return err
		}
		h.res.Stops++
		h.logger.Info("eos: moving the tasks again", "stopping", bp.name, "at", h.elapsed())
		if !bp.wait(2 * time.Minute) {
			h.anomaly("%s did not stop within 2 min of SIGTERM; killing it; last log lines:\n%s", bp.name, bp.lastLines())
			_ = bp.signal(syscall.SIGKILL)
			bp.wait(30 * time.Second)
		} else if bp.err != nil {
			h.anomaly("%s exited with %v after SIGTERM; last log lines:\n%s", bp.name, bp.err, bp.lastLines())
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+time.Second); err != nil {
			return err
		}
		h.logger.Info("eos: restarting", "instance", b.cfg.Name, "at", h.elapsed())
		if err := b.start(nil); err != nil {
			return err
		}
	}
	if err := h.sleepUntil(ctx, began+f.Down); err != nil {
		return err
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	h.logger.Info("eos: resumed", "instance", p.name, "at", h.elapsed())
	return nil
}

// stallInCommit arms p's stall file and waits, up to 30 s, until p has stopped itself
// inside a commit; false when it did not (no commit, or no stall file).
func (h *harness) stallInCommit(ctx context.Context, p *process, file string) (bool, error) {
	if file == "" {
		return false, nil
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		return false, fmt.Errorf("eos: stall file: %w", err)
	}
	deadline, taken := time.Now().Add(30*time.Second), false
	for !p.exited() {
		if processStopped(p.cmd.Process.Pid) {
			return true, nil
		}
		if time.Now().After(deadline) {
			if taken || os.Remove(file) == nil {
				return false, nil // disarmed before the instance took it
			}
			deadline, taken = time.Now().Add(5*time.Second), true // taken: it is stopping
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+20*time.Millisecond); err != nil {
			return false, err
		}
	}
	_ = os.Remove(file)
	return false, nil
}

// processStopped reports whether process pid is stopped (state T in /proc/<pid>/stat,
// Linux); false where it cannot tell.
func processStopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses; the state follows the
	// last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

// waitRestoring waits, up to restartTimeout, until a process restarted after a SIGKILL
// has restored a store (its tasks are back), so that the next fault does not stop it
// before there is a restore to check: after a kill the group waits for the dead
// member's session to expire before the restarted one gets tasks, which can take
// longer than the gap to the next fault.
func (h *harness) waitRestoring(ctx context.Context, p *process) error {
	deadline := time.Now().Add(restartTimeout)
	for len(p.restoreEvents()) == 0 && !p.exited() {
		if time.Now().After(deadline) {
			h.logger.Info("eos: restarted instance restored nothing yet; going on", "process", p.name, "after", restartTimeout)
			return nil
		}
		if err := h.sleepUntil(ctx, time.Since(h.began)+200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// restartTimeout bounds waitRestoring.
const restartTimeout = 30 * time.Second

// waitProcessing waits until the application has committed on every input partition
// (the tasks reading them have flushed their stores and checkpoints), and returns when
// that was (since the run began).
// When that takes longer than warmUpTimeout it reports an anomaly and returns.
func (h *harness) waitProcessing(ctx context.Context) (time.Duration, error) {
	deadline := time.Now().Add(warmUpTimeout)
	for {
		h.reviveCrashed()
		h.removeDeadMembers()
		committed, err := h.cluster.CommittedOffsets(ctx, h.names.App, h.names.Input)
		ready := err == nil && len(committed) >= int(h.cfg.Partitions)
		for _, off := range committed {
			ready = ready && off > 0
		}
		if ready {
			at := h.elapsed()
			h.logger.Info("eos: the application is processing; faults begin", "at", at)
			return at, nil
		}
		if time.Now().After(deadline) {
			at := h.elapsed()
			h.anomaly("the application committed nothing on some partitions within %v of its start", warmUpTimeout)
			return at, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// warmUpTimeout bounds the wait for the application's first commits.
const warmUpTimeout = 2 * time.Minute

// waitCaughtUp waits until the group's committed offsets reach the end of the input and
// of the repartition topic.
func (h *harness) waitCaughtUp(ctx context.Context) error {
	client, err := newClient(h.cfg.Brokers)
	if err != nil {
		return err
	}
	defer client.Close()
	deadline := time.Now().Add(h.cfg.CatchUpTimeout)
	rep := h.names.Repartition()
	lastData := map[int32]int64{} // repartition: offset after the last data record read
	readTo := map[int32]int64{}
	lastLog := time.Time{}
	lastStatus := "no progress read yet"
	for {
		h.reviveCrashed()
		h.removeDeadMembers()
		// A check that does not answer must not outlast the deadline: the group
		// coordinator answered UNSTABLE_OFFSET_COMMIT for ten minutes in two long runs
		// (with Config.OverlapCommits, after a broker kill -9), and the committed-offsets
		// read, which waits that out, held the harness for as long.
		pctx, cancel := context.WithTimeout(ctx, progressCheckTimeout)
		done, status, err := h.progress(pctx, client, rep, lastData, readTo)
		cancel()
		if err != nil {
			h.logger.Warn("eos: progress", "error", err)
			status = fmt.Sprintf("%s (the last check failed: %v)", lastStatus, err)
		} else {
			lastStatus = status
		}
		if done {
			h.logger.Info("eos: caught up", "at", h.elapsed(), "status", status)
			return nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			lastLog = time.Now()
			h.logger.Info("eos: waiting for the application to catch up", "at", h.elapsed(), "status", status)
		}
		if time.Now().After(deadline) {
			h.anomaly("the application did not process all input within %v of the last fault: %s", h.cfg.CatchUpTimeout, status)
			h.dumpGoroutines("no progress")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// progressCheckTimeout bounds one check of the application's progress.
const progressCheckTimeout = 30 * time.Second

func (h *harness) progress(ctx context.Context, client sarama.Client, rep string, lastData, readTo map[int32]int64) (bool, string, error) {
	inputs := []string{h.names.Input}
	if h.cfg.Join.DiffMs > 0 {
		inputs = append(inputs, h.names.Right)
	}
	var total, done int64
	inputDone := true
	for _, topic := range inputs {
		ends, err := h.cluster.EndOffsets(ctx, topic, sarama.ReadUncommitted)
		if err != nil {
			return false, "", err
		}
		committed, err := h.cluster.CommittedOffsets(ctx, h.names.App, topic)
		if err != nil {
			return false, "no committed offsets yet", err
		}
		for p, end := range ends {
			total += end
			done += max(committed[p], 0)
			if committed[p] < end {
				inputDone = false
			}
		}
	}
	status := fmt.Sprintf("input %d/%d", done, total)
	if !inputDone {
		return false, status, nil
	}
	parts, err := client.Partitions(rep)
	if err != nil {
		return false, status, err
	}
	for _, p := range parts {
		stable, err := kread.ListOffset(client, rep, p, sarama.OffsetNewest)
		if err != nil {
			return false, status, err
		}
		// The runtime deletes committed repartition records (its purge): read from the
		// log start when it has passed what was read.
		oldest, err := kread.ListOffset(client, rep, p, sarama.OffsetOldest)
		if err != nil {
			return false, status, err
		}
		readTo[p] = max(readTo[p], oldest)
		if err := kread.ReadRange(ctx, client, rep, p, readTo[p], stable, func(r kread.Record) error {
			lastData[p] = r.Offset + 1
			return nil
		}); err != nil {
			return false, status, err
		}
		readTo[p] = stable
	}
	repCommitted, err := h.cluster.CommittedOffsets(ctx, h.names.App, rep)
	if err != nil {
		return false, status, err
	}
	for _, p := range parts {
		if lastData[p] > 0 && repCommitted[p] < lastData[p] {
			return false, fmt.Sprintf("%s; repartition %d at %d of %d", status, p, repCommitted[p], lastData[p]), nil
		}
	}
	return true, status + "; repartition done", nil
}

// stopAll stops every instance with SIGTERM and waits for them.
func (h *harness) stopAll() {
	for _, in := range h.instances {
		if p := in.proc; p != nil && !p.exited() {
			p.expected = true
			_ = p.signal(syscall.SIGCONT)
			_ = p.signal(syscall.SIGTERM)
		}
	}
	for _, in := range h.instances {
		p := in.proc
		if p == nil {
			continue
		}
		if !p.wait(2 * time.Minute) {
			h.anomaly("%s did not stop within 2 min of SIGTERM at the end; killing it; last log lines:\n%s", p.name, p.lastLines())
			_ = p.signal(syscall.SIGKILL)
			p.wait(30 * time.Second)
		} else if p.err != nil && !p.dumped {
			h.anomaly("%s exited with %v at the end; last log lines:\n%s", p.name, p.err, p.lastLines())
		}
	}
	h.logger.Info("eos: instances stopped", "at", h.elapsed())
}

// cleanup kills what is still running and brings the broker back if the harness left
// it down.
func (h *harness) cleanup() {
	defer h.healCluster()
	if h.membersClient != nil {
		_ = h.membersClient.Close()
	}
	if h.pg != nil {
		defer h.pg.Close()
	}
	for _, in := range h.instances {
		for _, p := range in.processes() { // a stopped zombie (Replace) among them
			if !p.exited() {
				p.expected = true
				_ = p.signal(syscall.SIGCONT)
				_ = p.signal(syscall.SIGKILL)
				p.wait(30 * time.Second)
			}
		}
	}
	if h.brokerDown {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := h.cfg.Broker.Restart(ctx); err != nil {
			h.logger.Error("eos: restarting the broker on the way out", "error", err)
		}
	}
}

func writeAcked(path string, acked []Acked) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("eos: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "partition\toffset\tkey\tvalue")
	for _, a := range acked {
		fmt.Fprintf(w, "%d\t%d\t%s\t%d\n", a.Partition, a.Offset, a.Key, a.Value)
	}
	return w.Flush()
}

func (h *harness) writeReport() error {
	var b strings.Builder
	fmt.Fprintln(&b, h.res.Summary())
	fmt.Fprintf(&b, "tail restores checked: %d (and %d from a trimmed window changelog)\n", h.res.Report.TailRestores, h.res.Report.TrimmedRestores)
	fmt.Fprintln(&b, h.res.Report.WindowSummary())
	if h.res.postgres {
		fmt.Fprintln(&b, h.res.PostgresSummary())
	}
	if n := h.res.DeadMembersRemoved; n > 0 {
		fmt.Fprintf(&b, "group members of dead processes the broker kept, removed by the harness: %d\n", n)
	}
	for _, a := range h.res.Anomalies {
		fmt.Fprintf(&b, "anomaly: %s\n", a)
	}
	for _, p := range h.res.Report.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	b.WriteString(h.res.Evidence)
	if err := os.WriteFile(filepath.Join(h.cfg.WorkDir, "report.txt"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("eos: %w", err)
	}
	return nil
}
