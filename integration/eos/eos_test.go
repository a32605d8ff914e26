//go:build unix

package eos_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/eos"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
)

// The test binary doubles as the instance program: the harness re-executes it with
// eos.InstanceEnv set.
func TestMain(m *testing.M) {
	eos.BlockIfDumpHelper()
	if eos.IsInstance() {
		os.Exit(eos.InstanceMain())
	}
	os.Exit(m.Run())
}

func launcher() eos.Launcher {
	return eos.Launcher{Exe: os.Args[0], Args: []string{"-test.run=^$"}}
}

// workDir is a directory for one run, kept when the test fails or EOS_KEEP is set
// (its path is logged).
func workDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "eos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("EOS_KEEP") != "" {
			t.Logf("work dir kept: %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// testLogger logs the harness's progress (Info and up) to harness.log in the run's work
// dir and only its warnings and errors to the test's output, so that a failing test's
// output begins with what went wrong: CI shows the first lines of a failing test's
// output and its log's last lines, and a fresh-clone CI run failed TestClusterShortMode
// with ~80 lines of progress shown and the summary and anomalies cut off. run prints
// the log's last lines after the result when the run is not clean.
func testLogger(t *testing.T, dir string) *slog.Logger {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, harnessLog))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}),
		slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}),
	))
}

// harnessLog is the file in a run's work dir that testLogger writes.
const harnessLog = "harness.log"

// logTail logs the last n lines of the harness's log of the run in dir.
func logTail(t *testing.T, dir string, n int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, harnessLog))
	if err != nil {
		t.Logf("the harness's log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("the harness's log (%s), last %d lines:\n%s", harnessLog, len(lines), strings.Join(lines, "\n"))
}

// run runs the harness and logs its result.
func run(t *testing.T, ctx context.Context, cfg eos.Config) *eos.Result {
	t.Helper()
	cfg.WorkDir = workDir(t)
	cfg.Launcher = launcher()
	cfg.Logger = testLogger(t, cfg.WorkDir)
	res, err := eos.Run(ctx, cfg)
	if err != nil {
		logTail(t, cfg.WorkDir, 40)
		t.Fatalf("harness: %v", err)
	}
	t.Logf("%s (seed %d, %d tail restores checked, %v)", res.Summary(), cfg.Seed, res.Report.TailRestores, res.Duration.Round(time.Second))
	t.Logf("%s", res.Report.WindowSummary())
	for _, a := range res.Anomalies {
		t.Logf("anomaly: %s", a)
	}
	if n := res.DeadMembersRemoved; n > 0 {
		t.Logf("the broker kept %d group members of dead processes; the harness removed them", n)
	}
	if !cfg.AtLeastOnce { // at-least-once has problems by design; its test checks the counts
		for _, p := range res.Report.Problems {
			t.Logf("problem: %s", p)
		}
		if res.Evidence != "" {
			t.Logf("the logs around the input lost from the echo topic:\n%s", res.Evidence)
		}
	}
	if !res.OK() || res.DeadMembersRemoved > 0 {
		logTail(t, cfg.WorkDir, 40)
	}
	return res
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// seedFor gives each run its own seed, or EOS_SEED's to replay one.
func seedFor(t *testing.T) uint64 {
	if s := os.Getenv("EOS_SEED"); s != "" {
		var seed uint64
		if _, err := fmt.Sscan(s, &seed); err != nil {
			t.Fatalf("EOS_SEED=%q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// TestTaskMovesTwiceBehindAnOpenTransaction is issue 22's scenario under the harness:
// an instance stops itself inside a commit (its transaction holds output, changelog and
// offsets records, its offsets not yet sent), the group gives its tasks away, the
// instance that took some of them stops cleanly and comes back, so they move a second
// time while the stalled owner's transaction is still open (transaction timeout 30 s,
// session 6 s), and then the stalled owner resumes, a zombie. A next owner that took
// the last stable offset for the end of a changelog lost the middle owner's updates
// (docs/architecture.md, "Reading to the end of a partition").
func TestTaskMovesTwiceBehindAnOpenTransaction(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := testContext(t, 6*time.Minute)
		const faults = 2
		res := run(t, ctx, eos.Config{
			Brokers: c.Addrs(), Prefix: c.Unique("eos-move2"), Seed: seedFor(t),
			Records: 10000, Keys: 200, Partitions: 4, Buckets: 16, Instances: 3,
			CommitInterval: 100 * time.Millisecond, Faults: faults, FaultKinds: []eos.FaultKind{eos.MoveTwice},
			TransactionTimeout: 30 * time.Second,
		})
		if !res.OK() {
			t.Errorf("%s", res.Summary())
		}
		if res.StalledInCommit != faults || res.Stops < faults {
			t.Errorf("%d of %d stalls inside a commit, %d stops: want every fault to stall its victim inside a commit and move its tasks again", res.StalledInCommit, faults, res.Stops)
		}
	})
}

// TestShortMode is the CI run of the harness: 20,000 records, three instances and five
// faults (SIGKILL, SIGTERM and SIGSTOP past the session timeout, each at least once),
// with commit intervals of 100 ms and 5 s (so kills land inside open transactions), on
// the embedded broker and on the real Kafka of EDDY_TEST_BROKERS.
// The two clusters run in parallel.
//
// On real Kafka the instances also run with one standby per task and static IDs (issue
// 24 item 5), and the faults include a stalled zombie replaced by an instance with its
// InstanceID (Replace): on Kafka's own coordinator, which decides what a static
// member's restart and replacement do (kfake copies it, patched), and at no extra
// time: the same five faults, one of them a replacement instead of a second kill,
// stop or pause. The runs with 5 s commits rebalance cooperatively
// (eddy.CooperativeRebalancing, issue 24 item 4), those with 100 ms eagerly.
func TestShortMode(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		static := c.Name() != "embedded"
		tails := 0
		for _, commit := range []time.Duration{100 * time.Millisecond, 5 * time.Second} {
			t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
				ctx := testContext(t, 5*time.Minute)
				cfg := eos.Config{
					Brokers: c.Addrs(), Prefix: c.Unique("eos"), Seed: seedFor(t),
					Records: 20000, Keys: 200, Partitions: 4, Buckets: 16, Instances: 3,
					CommitInterval: commit, Faults: 5, Finals: true, Join: eos.JoinFor(20000, 200),
				}
				if static {
					cfg.Standbys, cfg.Static = 1, true
					cfg.FaultKinds = []eos.FaultKind{eos.Kill, eos.Term, eos.Pause, eos.Replace}
				}
				// The long transactions rebalance cooperatively: a revoked task's
				// release commits up to 5 s of its worker's work.
				cfg.Cooperative = commit == 5*time.Second
				// Overlapped commits (off by default in eddy) run in the embedded
				// broker's 100 ms runs, and in every run with EOS_OVERLAP=1.
				cfg.OverlapCommits = os.Getenv("EOS_OVERLAP") == "1" || (!static && commit == 100*time.Millisecond)
				t.Logf("overlapped commits: %v", cfg.OverlapCommits)
				res := run(t, ctx, cfg)
				if !res.OK() {
					t.Errorf("%s", res.Summary())
				}
				if static {
					checkStatic(t, res)
				}
				if cfg.Cooperative && res.Releases == 0 {
					// Not an error: whether a task moves from a live owner depends on
					// the seed's faults (a static member restarted within the session
					// timeout causes no rebalance; a restarted instance far behind gets
					// warm-ups, and the probe comes after the run). The CI run of seed
					// 1796331726628901614 (real Kafka, static) released none.
					t.Logf("no task moved by a cooperative release in this run (%s)", c.Name())
				}
				if n := res.Kills + res.Stops + res.Pauses; n < 5 || res.Kills == 0 || res.Stops == 0 || res.Pauses == 0 {
					t.Errorf("faults: %d kills, %d stops, %d pauses; want at least 5, each kind once", res.Kills, res.Stops, res.Pauses)
				}
				if res.Records != 20000 {
					t.Errorf("records %d, want 20000", res.Records)
				}
				if res.Report.WindowUpdates == 0 || res.Report.FinalWindows == 0 || res.Report.JoinResults == 0 {
					t.Errorf("%s: want window updates, final results and join results, each checked", res.Report.WindowSummary())
				}
				if res.DeadMembersRemoved > 0 && c.Name() != "embedded" {
					t.Errorf("%s kept %d group members of dead processes past their session timeout", c.Name(), res.DeadMembersRemoved)
				}
				tails += res.Report.TailRestores
			})
		}
		if tails == 0 && !t.Failed() {
			t.Error("no restore after a SIGKILL was checked for restoring only the tail")
		}
	})
}

// checkStatic checks a run with static IDs did what static IDs change: a zombie
// replaced and fenced, and a restart back in the group without a rebalance.
func checkStatic(t *testing.T, res *eos.Result) {
	t.Helper()
	if res.Replacements == 0 || res.ZombiesFenced != res.Replacements {
		t.Errorf("%d replacements, %d zombies fenced: want at least one, each zombie fenced", res.Replacements, res.ZombiesFenced)
	}
	if res.StaticRejoins == 0 {
		t.Errorf("no restart or replacement of a static member took its tasks back without a rebalance (%d found a new generation)", res.RejoinRebalances)
	}
}

// TestShortModeRetentionChange restarts every instance that a kill or a stop faults with
// its window store's retention switched between the default (size + grace + a minute:
// 60 s segments) and 10 minutes (5-minute segments): what a restart with another grace
// does to the store (issue 22). The restarted instance finds its window stores cut with
// the other interval and rebuilds them from their changelogs, while the other instance
// keeps its own, and tasks move between them; every window update and final result must
// still equal its recomputation. Before the interval was recorded, segment ids were
// read with the wrong interval: live windows were dropped at open (then trimmed from
// the changelog) or looked for in the wrong segment, and counted again from nothing.
func TestShortModeRetentionChange(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx := testContext(t, 5*time.Minute)
		res := run(t, ctx, eos.Config{
			Brokers: c.Addrs(), Prefix: c.Unique("eos-ret"), Seed: seedFor(t),
			Records: 10000, Keys: 100, Partitions: 4, Buckets: 8, Instances: 2,
			Faults: 4, FaultKinds: []eos.FaultKind{eos.Kill, eos.Term}, Finals: true,
			RetentionChange: 10 * time.Minute,
		})
		t.Logf("%d restarts with another window store retention, %d stores rebuilt from their changelogs", res.RetentionChanges, res.StoreRebuilds)
		if !res.OK() {
			t.Errorf("%s", res.Summary())
		}
		if res.RetentionChanges != res.Kills+res.Stops || res.RetentionChanges < 4 {
			t.Errorf("%d restarts with another retention after %d kills and %d stops; want one per kill or stop, at least 4", res.RetentionChanges, res.Kills, res.Stops)
		}
		if res.StoreRebuilds == 0 {
			t.Error("no instance rebuilt a window store cut with another interval: the run did not test the layout change")
		}
		if res.Report.WindowUpdates == 0 || res.Report.FinalWindows == 0 {
			t.Errorf("%s: want window updates and final results, each checked", res.Report.WindowSummary())
		}
	})
}

// TestShortModeBrokerRestart kills the broker with kill -9 during a run and restarts
// it. It needs a broker of its own (killing the shared one would break the tests of
// other packages): it starts one with integration/kafka.sh on free ports, so it runs
// where the real-Kafka tests run (EDDY_TEST_BROKERS set, Java and the Kafka jars there).
func TestShortModeBrokerRestart(t *testing.T) {
	if len(kafkatest.BrokersFromEnv()) == 0 {
		t.Skipf("%s is not set: no real Kafka here (this test starts its own with integration/kafka.sh where the real-Kafka tests run)", kafkatest.BrokersEnv)
	}
	ctx := testContext(t, 6*time.Minute)
	broker, addr := ownBroker(t, ctx)
	c := kafkatest.Connect(t, "own-kafka", []string{addr})
	res := run(t, ctx, eos.Config{
		Brokers: c.Addrs(), Prefix: c.Unique("eos"), Seed: seedFor(t),
		Records: 20000, Keys: 200, Partitions: 4, Buckets: 16, Instances: 3,
		CommitInterval: 5 * time.Second, Faults: 5, BrokerRestarts: 1, Broker: broker,
	})
	if !res.OK() {
		t.Errorf("%s", res.Summary())
	}
	if res.BrokerRestarts != 1 || res.Kills+res.Stops+res.Pauses < 5 {
		t.Errorf("faults: %s; want 1 broker restart and 5 instance faults", res.Summary())
	}
	if res.DeadMembersRemoved > 0 {
		t.Errorf("Kafka kept %d group members of dead processes past their session timeout", res.DeadMembersRemoved)
	}
}

// ownBroker starts a real Kafka broker for the test with integration/kafka.sh, in a
// home of its own on free ports, reusing the jars of the shared broker's home
// (EDDY_KAFKA_HOME, default integration/.kafka) when they are there. It is stopped
// when the test ends.
func ownBroker(t *testing.T, ctx context.Context) (eos.ScriptBroker, string) {
	t.Helper()
	script, home := ownHome(t)
	ports := freePorts(t, 2)
	b := eos.ScriptBroker{Script: script, Env: []string{
		"EDDY_KAFKA_HOME=" + home,
		// test.sh runs the shared broker in secured mode; this one needs no secured
		// listeners (their ports, base+2 and base+3, were never checked free).
		"EDDY_KAFKA_SECURE=0",
		fmt.Sprintf("EDDY_KAFKA_PORT=%d", ports[0]),
		fmt.Sprintf("EDDY_KAFKA_CONTROLLER_PORT=%d", ports[1]),
	}}
	addr, err := b.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.Stop(sctx); err != nil {
			t.Errorf("stopping the test's broker: %v", err)
		}
	})
	return b, addr
}

// ownHome returns the path of integration/kafka.sh and a new home for it that links
// the jars of the shared broker's home (EDDY_KAFKA_HOME, default integration/.kafka)
// when they are there.
func ownHome(t *testing.T) (script, home string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "kafka.sh"))
	if err != nil {
		t.Fatal(err)
	}
	home = t.TempDir()
	shared := os.Getenv("EDDY_KAFKA_HOME")
	if shared == "" {
		shared = filepath.Join("..", ".kafka")
	}
	dists, _ := filepath.Glob(filepath.Join(shared, "kafka-*", ".complete"))
	for _, d := range dists {
		dist, err := filepath.Abs(filepath.Dir(d))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dist, filepath.Join(home, filepath.Base(dist))); err != nil {
			t.Fatal(err)
		}
	}
	return script, home
}

// freePorts returns n TCP ports that were free a moment ago on 127.0.0.1.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	base := freePortRange(t, n)
	ports := make([]int, n)
	for i := range ports {
		ports[i] = base + i
	}
	return ports
}

// Under at-least-once, SIGKILLs repeat output (counted as duplicates) but lose nothing.
//
// A kill repeats output only when the victim has processed records since its last
// commit, and every rebalance commits. A kill restarts the victim under a new member
// ID, so the group rebalances once the dead member's session (6 s) expires; with
// kills a few seconds apart every kill landed in a rebalance and nothing was
// repeated (CI, seed 1796044453671745776). The kills are therefore 6–18 s apart
// (FaultGap 12 s): the group has settled and the victim has been processing for
// at least about a second when it is killed. The harness releases each fault's
// share of the input 3 s (a quarter of the gap) before the fault, so that input is
// flowing when the kill strikes: released at the kill, a late fault met a victim
// idle with everything committed, and four kills repeated nothing (CI, seed
// 1796129508582246729).
func TestAtLeastOnceLosesNothing(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := testContext(t, 4*time.Minute)
	res := run(t, ctx, eos.Config{
		Brokers: c.Addrs(), Prefix: c.Unique("alo"), Seed: seedFor(t),
		Records: 6000, Keys: 100, Partitions: 4, Buckets: 8, Instances: 2,
		CommitInterval: 5 * time.Second, AtLeastOnce: true,
		// Four kills, not two: a kill replays input only when it strikes between a
		// commit's flush (output visible) and the group's next offset commit (every
		// CommitInterval); two kills both missing that window left a run with no
		// duplicate at all once in CI.
		Faults: 4, FaultKinds: []eos.FaultKind{eos.Kill}, FaultGap: 12 * time.Second,
	})
	if res.Kills != 4 {
		t.Errorf("kills %d, want 4", res.Kills)
	}
	if res.Report.Lost != 0 || res.Report.Hanging != 0 {
		t.Errorf("at-least-once lost or left hanging records: %s", res.Summary())
	}
	if res.Report.Duplicates == 0 {
		t.Errorf("no duplicates after 4 SIGKILLs with a 5 s commit interval under at-least-once: the harness does not see replays (%s)", res.Summary())
	}
	for _, a := range res.Anomalies {
		t.Errorf("anomaly: %s", a)
	}
}

// The verifier must be able to fail: a clean run, then its output doctored with one
// duplicate, one loss, one reordered echo record, a wrong aggregate, a wrong store, a
// restore that started over, a committed offset that went back, and a transaction left
// open; each is reported as what it is.
func TestVerifierFindsDoctoredOutput(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := testContext(t, 3*time.Minute)
	prefix := c.Unique("doctored")
	res := run(t, ctx, eos.Config{
		Brokers: c.Addrs(), Prefix: prefix, Seed: 7,
		Records: 2000, Keys: 20, Partitions: 2, Buckets: 4, Instances: 1, Span: 4 * time.Second,
	})
	if !res.OK() {
		t.Fatalf("the clean run is not clean: %s", res.Summary())
	}
	clean := res.Observed
	if len(clean.Snapshots) == 0 || len(clean.Echo[0]) < 10 {
		t.Fatalf("clean run: %d snapshots, %d echo records in partition 0", len(clean.Snapshots), len(clean.Echo[0]))
	}
	type want struct{ dup, lost, hanging, mismatched int }
	expectReport := func(t *testing.T, o *eos.Observed, w want) {
		t.Helper()
		r := eos.Check(o)
		got := want{r.Duplicates, r.Lost, r.Hanging, r.Mismatched}
		if got != w {
			t.Errorf("got duplicates=%d lost=%d hanging=%d mismatched=%d, want %+v; problems:\n%s",
				got.dup, got.lost, got.hanging, got.mismatched, w, strings.Join(r.Problems, "\n"))
		}
		if r.OK() != (w == want{}) {
			t.Errorf("OK() = %v", r.OK())
		}
	}
	t.Run("clean", func(t *testing.T) { expectReport(t, clone(clean), want{}) })
	t.Run("duplicate echo record", func(t *testing.T) {
		o := clone(clean)
		e := o.Echo[0]
		o.Echo[0] = append(e[:6:6], append([]eos.OutRecord{e[5]}, e[6:]...)...)
		expectReport(t, o, want{dup: 1})
	})
	t.Run("lost echo record", func(t *testing.T) {
		o := clone(clean)
		o.Echo[0] = append(o.Echo[0][:5:5], o.Echo[0][6:]...)
		expectReport(t, o, want{lost: 1})
	})
	t.Run("reordered echo record", func(t *testing.T) {
		o := clone(clean)
		e := o.Echo[0]
		e[5], e[6] = e[6], e[5]
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("duplicate sum update", func(t *testing.T) {
		o := clone(clean)
		s := o.Outputs[eos.StoreSum]
		for p, recs := range s {
			s[p] = append(recs[:4:4], append([]eos.OutRecord{recs[3]}, recs[4:]...)...)
			break
		}
		expectReport(t, o, want{dup: 1})
	})
	t.Run("wrong count", func(t *testing.T) {
		o := clone(clean)
		for _, recs := range o.Outputs[eos.StoreCount] {
			recs[len(recs)/2].Value++
			break
		}
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("lost bucket update", func(t *testing.T) {
		o := clone(clean)
		b := o.Outputs[eos.StoreBucketCount]
		for p, recs := range b {
			// The last update of its bucket: no later count shifts.
			last := len(recs) - 1
			b[p] = recs[:last]
			break
		}
		// The store and changelog still count it; only the output lacks it.
		expectReport(t, o, want{lost: 1})
	})
	t.Run("duplicate window update", func(t *testing.T) {
		o := clone(clean)
		u := o.WinUpdates[0]
		o.WinUpdates[0] = append(u[:4:4], append([]eos.WinRecord{u[3]}, u[4:]...)...)
		expectReport(t, o, want{dup: 1})
	})
	t.Run("wrong window count", func(t *testing.T) {
		o := clone(clean)
		o.WinUpdates[1][len(o.WinUpdates[1])/2].Agg.Count++
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("windows exercised", func(t *testing.T) {
		// Late records dropped and every update checked (the doctored cases of the
		// windowed outputs are in windowed_test.go).
		if r := eos.Check(clone(clean)); r.LateDropped == 0 || r.WindowUpdates < 1000 {
			t.Errorf("the clean run: %s; want late records and at least 1000 updates", r.WindowSummary())
		}
	})
	t.Run("acknowledged record missing from the input", func(t *testing.T) {
		o := clone(clean)
		o.Acked = append(o.Acked, eos.Acked{Partition: 0, Offset: 1 << 40, Key: "k0000", Value: 1 << 40})
		expectReport(t, o, want{lost: 1})
	})
	t.Run("store differs from its changelog", func(t *testing.T) {
		o := clone(clean)
		s := &o.Snapshots[0]
		for k := range s.Content {
			s.Content[k]++
			break
		}
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("restore after SIGKILL started over", func(t *testing.T) {
		o := clone(clean)
		o.Restores = append(o.Restores,
			eos.RestoreCheck{Instance: "i0#2", Checkpoint: 40, Event: eos.RestoreEvent{Task: "0_0", Store: eos.StoreSum, From: 40, To: 50}},
			eos.RestoreCheck{Instance: "i0#2", Checkpoint: 40, Event: eos.RestoreEvent{Task: "0_1", Store: eos.StoreSum, From: 0, To: 50, Wiped: true}})
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("restore after SIGKILL past a standby's reading", func(t *testing.T) {
		o := clone(clean)
		o.Restores = append(o.Restores,
			// The restarted process held the task as a (warm-up) standby first, which
			// read on past the checkpoint: not a problem.
			eos.RestoreCheck{Instance: "i0#2", Checkpoint: 40, Standby: true, Event: eos.RestoreEvent{Task: "0_0", Store: eos.StoreSum, From: 45, To: 50}},
			// Without a standby, a restore that starts past the checkpoint is.
			eos.RestoreCheck{Instance: "i0#2", Checkpoint: 40, Event: eos.RestoreEvent{Task: "0_1", Store: eos.StoreSum, From: 45, To: 50}})
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("restore after SIGKILL from a trimmed window changelog", func(t *testing.T) {
		o := clone(clean)
		o.Restores = append(o.Restores,
			// The window store's changelog was trimmed past the checkpoint: not a problem.
			eos.RestoreCheck{Instance: "i0#2", Checkpoint: 40, Event: eos.RestoreEvent{Task: "0_0", Store: eos.StoreWindow, From: 45, To: 50, Wiped: true}},
			// A key-value store's changelog is never trimmed: its wipe is.
			eos.RestoreCheck{Instance: "i0#2", Checkpoint: 40, Event: eos.RestoreEvent{Task: "0_1", Store: eos.StoreSum, From: 45, To: 50, Wiped: true}})
		expectReport(t, o, want{mismatched: 1})
	})
	t.Run("committed offset went back", func(t *testing.T) {
		o := clone(clean)
		o.OffsetCommits = []eos.OffsetCommit{
			{LogOffset: 10, Topic: "in", Partition: 0, Offset: 100},
			{LogOffset: 11, Topic: "in", Partition: 1, Offset: 50},
			{LogOffset: 12, Topic: "in", Partition: 0, Offset: 120},
			{LogOffset: 13, Topic: "in", Partition: 0, Offset: 90},
			{LogOffset: 14, Topic: "in", Partition: 1, Offset: 60},
		}
		expectReport(t, o, want{}) // the output is intact; the regression is a cause, reported apart
		if n := eos.Check(o).OffsetRegressions; n != 1 {
			t.Errorf("offset regressions %d, want 1", n)
		}
	})
	t.Run("open transaction", func(t *testing.T) {
		names := eos.NamesFor(prefix)
		p, err := producer.New(ctx, producer.Config{
			Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: prefix + "-doctor", TransactionTimeout: 5 * time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		// A copy of the first echo record, in a transaction that stays open.
		first := clean.Echo[0][0]
		if err := p.Send(ctx, names.Echo, 0, []byte(first.Key), eos.EncodeInt64(first.Input), nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		o, err := eos.Gather(ctx, eos.GatherConfig{Brokers: c.Addrs(), Names: names, Buckets: clean.Buckets, StableWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o.Acked, o.Snapshots = clean.Acked, clean.Snapshots
		expectReport(t, o, want{hanging: 1})
		if err := p.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func clone(o *eos.Observed) *eos.Observed {
	c := *o
	c.Input = maps.Clone(o.Input)
	c.Echo = cloneParts(o.Echo)
	c.Outputs = map[string]map[int32][]eos.OutRecord{}
	for s, m := range o.Outputs {
		c.Outputs[s] = cloneParts(m)
	}
	c.Acked = append([]eos.Acked(nil), o.Acked...)
	c.Snapshots = nil
	for _, s := range o.Snapshots {
		s.Content = maps.Clone(s.Content)
		c.Snapshots = append(c.Snapshots, s)
	}
	c.Restores = append([]eos.RestoreCheck(nil), o.Restores...)
	c.WinUpdates = cloneParts(o.WinUpdates)
	c.OffsetCommits = append([]eos.OffsetCommit(nil), o.OffsetCommits...)
	return &c
}

func cloneParts[T any](m map[int32][]T) map[int32][]T {
	if m == nil {
		return nil // nil: the output is not there to check
	}
	out := make(map[int32][]T, len(m))
	for p, recs := range m {
		out[p] = append([]T(nil), recs...)
	}
	return out
}

// TestClusterShortMode runs the harness on a three-broker cluster (replication factor
// 3, min.insync.replicas 2) with every cluster fault once: kill -9 of the leader of an
// input, a changelog and an output partition, of a transaction coordinator and of the
// group coordinator, a broker paused past its session, two brokers down at once (each
// restarted after), beside three instance faults. The instances create their internal
// topics with ReplicationFactor 3 and min.insync.replicas 2 (InternalTopicConfigs),
// which the harness checks. It starts its own cluster with integration/kafka.sh where
// the real-Kafka tests run.
func TestClusterShortMode(t *testing.T) {
	if len(kafkatest.BrokersFromEnv()) == 0 {
		t.Skipf("%s is not set: no real Kafka here (this test starts its own three-broker cluster with integration/kafka.sh where the real-Kafka tests run)", kafkatest.BrokersEnv)
	}
	ctx := testContext(t, 15*time.Minute)
	cluster, addrs := ownCluster(t, ctx)
	c := kafkatest.Connect(t, "own-cluster", addrs)
	res := run(t, ctx, eos.Config{
		Brokers: c.Addrs(), Prefix: c.Unique("eos"), Seed: seedFor(t),
		Records: 20000, Keys: 200, Partitions: 4, Buckets: 16, Instances: 3,
		CommitInterval: 100 * time.Millisecond, Faults: 3,
		Cluster: cluster, ClusterFaults: len(eos.ClusterFaultKinds()),
		ReplicationFactor: 3, InternalTopicConfigs: map[string]string{"min.insync.replicas": "2"},
		CatchUpTimeout: 5 * time.Minute,
	})
	if !res.OK() {
		t.Errorf("%s", res.Summary())
	}
	for _, k := range eos.ClusterFaultKinds() {
		if res.ClusterFaults[k.String()] != 1 {
			t.Errorf("%s: %d times, want once (%v)", k, res.ClusterFaults[k.String()], res.ClusterFaults)
		}
	}
	// Five faults kill one broker, one kills two.
	if res.BrokerRestarts != 7 || res.BrokerPauses != 1 || res.Kills+res.Stops+res.Pauses < 3 {
		t.Errorf("faults: %s; want 7 broker restarts, 1 broker pause, 3 instance faults", res.Summary())
	}
	if res.DeadMembersRemoved > 0 {
		t.Errorf("Kafka kept %d group members of dead processes past their session timeout", res.DeadMembersRemoved)
	}
}

// ownCluster starts a three-broker cluster for the test with integration/kafka.sh
// (EDDY_KAFKA_BROKERS=3) in a home of its own on free ports, reusing the jars of the
// shared broker's home, and stops it when the test ends.
func ownCluster(t *testing.T, ctx context.Context) (eos.ScriptCluster, []string) {
	t.Helper()
	script, home := ownHome(t)
	base := freePortRange(t, 6) // brokers base..base+2, controllers base+3..base+5
	cl := eos.ScriptCluster{Script: script, Env: []string{
		"EDDY_KAFKA_HOME=" + home,
		// The secured mode is for the single broker only (and test.sh turns it on).
		"EDDY_KAFKA_SECURE=0",
		fmt.Sprintf("EDDY_KAFKA_PORT=%d", base),
		fmt.Sprintf("EDDY_KAFKA_CONTROLLER_PORT=%d", base+3),
	}}
	addrs, err := cl.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cl.Stop(sctx); err != nil {
			t.Errorf("stopping the test's cluster: %v", err)
		}
	})
	return cl, addrs
}

// freePortRange returns the first of n consecutive TCP ports that were free a moment
// ago on 127.0.0.1, below the kernel's ephemeral range. A port the kernel handed out
// (listening on port 0) is one it also hands to outgoing connections: between the check
// and the broker's bind, one of the many client connections the tests open took it once
// (a fresh-clone CI run: a broker of TestClusterShortMode's cluster exited during
// startup).
func freePortRange(t *testing.T, n int) int {
	t.Helper()
	lo, hi := 20000, ephemeralLow()
	for range 200 {
		base := lo + rand.IntN(hi-lo-n)
		ok := true
		var ls []net.Listener
		for p := base; p < base+n; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			_ = l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports found in [%d, %d)", n, lo, hi)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; 32768, its default, elsewhere or when unreadable).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 21000 {
		return 32768
	}
	return lo
}

// The driver gives each record the event time of its sequence number and writes a Right
// record after the records the clock picks, with a key of its own, value RightValueBase
// plus the sequence number and the same timestamp.
func TestProduceEventTimesAndRightRecords(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := testContext(t, time.Minute)
	in, right := c.Unique("in"), c.Unique("right")
	for _, topic := range []string{in, right} {
		if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	clock, _ := eos.TimeFor(800, 10, 5, time.Now())
	acked, ackedRight, failed, err := eos.Produce(ctx, eos.DriverConfig{
		Brokers: c.Addrs(), Topic: in, RightTopic: right, Partitions: 2, Records: 800, Keys: 10, Seed: 5, Clock: clock,
	})
	if err != nil || failed != 0 || len(acked) != 800 {
		t.Fatalf("%d acknowledged, %d failed: %v", len(acked), failed, err)
	}
	wantRight := 0
	for seq := int64(1); seq <= 800; seq++ {
		if clock.WritesRight(seq) {
			wantRight++
		}
	}
	if len(ackedRight) != wantRight || wantRight < 150 || wantRight > 250 {
		t.Fatalf("%d right records acknowledged, want %d (about 200)", len(ackedRight), wantRight)
	}
	n := 0
	for _, topic := range []string{in, right} {
		msgs, err := c.ReadCommitted(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			v, err := eos.DecodeInt64(m.Value)
			if err != nil {
				t.Fatal(err)
			}
			seq := v
			if topic == right {
				seq = v - eos.RightValueBase
				if !clock.WritesRight(seq) {
					t.Fatalf("right value %d: written after a record the clock did not pick", v)
				}
			}
			if m.Timestamp.UnixMilli() != clock.At(seq) {
				t.Fatalf("%s value %d: timestamp %d, want %d", topic, v, m.Timestamp.UnixMilli(), clock.At(seq))
			}
			n++
		}
	}
	if n != 800+wantRight {
		t.Fatalf("%d records read back, want %d", n, 800+wantRight)
	}
}
