package eddy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// testLogger is the logger of one instance in test t. With EDDY_TEST_LOG set it writes
// everything to stderr; otherwise it keeps the instance's last lines at info level and
// prints them with the test's output if the test fails, so that a failure in a CI run
// (where nothing is logged) says what the instances did before it.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("EDDY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	tail := &logTail{max: 300}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the last %d log lines of an instance:\n%s", len(tail.lines), tail.String())
		}
	})
	return slog.New(slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// logTail is an io.Writer that keeps the last max lines written to it (one slog
// record is one Write).
type logTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == l.max {
		l.lines = append(l.lines[:0], l.lines[1:]...)
	}
	l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// instance is an App running in a goroutine.
type instance struct {
	app    *eddy.App
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func start(t *testing.T, topo *topology.Topology, cfg eddy.Config) *instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	app, err := eddy.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- app.Run(ctx) }()
	t.Cleanup(func() { _ = in.stop() })
	return in
}

// stop cancels the instance and returns Run's result.
func (in *instance) stop() error {
	in.once.Do(func() {
		in.cancel()
		select {
		case in.err = <-in.done:
		case <-time.After(90 * time.Second):
			in.err = errors.New("Run did not return within 90s of cancel")
		}
	})
	return in.err
}

// exited reports Run's result if it returned on its own.
func (in *instance) exited() (error, bool) {
	select {
	case err := <-in.done:
		in.once.Do(func() { in.err = err })
		return err, true
	default:
		return nil, false
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitForState is waitFor for a condition that says what it saw (state): the last one
// is in the failure when the wait times out, so a flake in CI tells how far it got.
func waitForState(t *testing.T, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// wcSetup creates wordcount's topics on c under unique names and returns a topology
// reading and writing them.
type wcEnv struct {
	c            *kafkatest.Cluster
	appID        string
	input        string
	output       string
	topo         *topology.Topology
	want         map[string]int64
	linesWritten int
	perTask      bool // Config.ProducerPerTask
}

func newWordCount(t *testing.T, c *kafkatest.Cluster, partitions int32) *wcEnv {
	t.Helper()
	e := &wcEnv{c: c, appID: c.Unique("wc"), input: c.Unique("lines"), output: c.Unique("counts"), want: map[string]int64{}}
	ctx := ctxT(t)
	for _, topic := range []string{e.input, e.output} {
		if err := c.CreateTopic(ctx, topic, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	e.topo, err = wordcount.TopologyFor(e.input, e.output, wordcount.NoCaching()) // every count: the tests check 1..n
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// produce writes n more lines and adds their words to the expected counts.
func (e *wcEnv) produce(t *testing.T, n int) {
	t.Helper()
	if err := e.produceErr(n); err != nil {
		t.Fatal(err)
	}
}

func (e *wcEnv) produceErr(n int) error {
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		k := e.linesWritten + i
		line := fmt.Sprintf("The quick brown fox %d jumps over the lazy dog %d; Ünïcödé wörd%d", k%7, k%13, k%5)
		for _, w := range wordcount.Words(line) {
			e.want[w]++
		}
		msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprint(k)), Value: sarama.StringEncoder(line)}
	}
	e.linesWritten += n
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.c.Produce(ctx, e.input, msgs...)
}

// output reads the output topic with read_committed: the sequence of counts per word.
func (e *wcEnv) readOutput(t *testing.T) map[string][]int64 {
	t.Helper()
	msgs, err := e.c.ReadCommitted(ctxT(t), e.output)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[string][]int64{}
	for _, m := range msgs {
		seqs[string(m.Key)] = append(seqs[string(m.Key)], int64(binary.BigEndian.Uint64(m.Value)))
	}
	return seqs
}

// complete reports whether the output's last count per word equals the expected count.
func (e *wcEnv) complete(t *testing.T) bool {
	seqs := e.readOutput(t)
	if len(seqs) != len(e.want) {
		return false
	}
	for w, n := range e.want {
		s := seqs[w]
		if len(s) == 0 || s[len(s)-1] != n {
			return false
		}
	}
	return true
}

// waitCounts waits until the output holds every word's expected count, and fails the
// test, naming what it waited for, if that takes longer than timeout.
func (e *wcEnv) waitCounts(t *testing.T, timeout time.Duration, what string) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, error) { return e.complete(t), nil })
}

// waitCountsWhileRunning is waitCounts that also fails the test at once, with Run's
// error, if in stops on its own while it waits.
func (e *wcEnv) waitCountsWhileRunning(t *testing.T, in *instance, timeout time.Duration, what string) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, error) {
		if err, done := in.exited(); done {
			return false, fmt.Errorf("app stopped: %v", err)
		}
		return e.complete(t), nil
	})
}

// checkExactlyOnce checks every word's output is exactly 1, 2, ..., count: one
// duplicate or loss shifts the sequence.
func (e *wcEnv) checkExactlyOnce(t *testing.T) {
	t.Helper()
	seqs := e.readOutput(t)
	if len(seqs) != len(e.want) {
		t.Errorf("output has %d words, want %d", len(seqs), len(e.want))
	}
	bad := 0
	for w, n := range e.want {
		s := seqs[w]
		ok := int64(len(s)) == n
		for i, v := range s {
			ok = ok && v == int64(i+1)
		}
		if !ok && bad < 5 {
			t.Errorf("word %q: counts %v, want 1..%d", w, s, n)
		}
		if !ok {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d words have a wrong count sequence", bad, len(e.want))
	}
	if err := e.c.WaitStable(ctxT(t), e.output); err != nil {
		t.Fatalf("hanging transaction on the output: %v", err)
	}
}

func (e *wcEnv) config(t *testing.T) eddy.Config {
	return eddy.Config{ApplicationID: e.appID, Brokers: e.c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t), ProducerPerTask: e.perTask}
}

// forEachProducerModel runs test with a producer per worker (the default) and with a
// producer per task (Config.ProducerPerTask): the commit and recovery paths differ.
func forEachProducerModel(t *testing.T, test func(t *testing.T, perTask bool)) {
	t.Run("workers", func(t *testing.T) { test(t, false) })
	t.Run("producer-per-task", func(t *testing.T) { test(t, true) })
}

func TestWordCountEndToEnd(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		e.produce(t, 400)
		in := start(t, e.topo, e.config(t))
		e.waitCountsWhileRunning(t, in, time.Minute, "the counts")
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		e.checkExactlyOnce(t)
	})
}

func TestTwoInstancesShareTasksAndTakeOver(t *testing.T) {
	forEachProducerModel(t, testTwoInstancesShareTasksAndTakeOver)
}

func testTwoInstancesShareTasksAndTakeOver(t *testing.T, perTask bool) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		e.perTask = perTask
		a := start(t, e.topo, e.config(t))
		b := start(t, e.topo, e.config(t))
		waitFor(t, time.Minute, "both instances to own tasks", func() (bool, error) {
			ta, tb := a.app.Tasks(), b.app.Tasks()
			return len(ta)+len(tb) == 8 && len(ta) > 0 && len(tb) > 0, nil
		})
		ta, tb := a.app.Tasks(), b.app.Tasks()
		seen := map[processor.TaskID]bool{}
		for _, id := range append(ta, tb...) {
			if seen[id] {
				t.Fatalf("task %s runs on both instances: %v / %v", id, ta, tb)
			}
			seen[id] = true
		}
		if len(ta) != 4 || len(tb) != 4 {
			t.Errorf("tasks not balanced: %v / %v", ta, tb)
		}
		e.produce(t, 200)
		e.waitCounts(t, time.Minute, "the counts")

		if err := a.stop(); err != nil {
			t.Fatalf("stopping a: %v", err)
		}
		waitFor(t, time.Minute, "b to take over every task", func() (bool, error) { return len(b.app.Tasks()) == 8, nil })
		e.produce(t, 200)
		e.waitCounts(t, time.Minute, "the counts after the takeover")
		if err := b.stop(); err != nil {
			t.Fatalf("stopping b: %v", err)
		}
		e.checkExactlyOnce(t)
	})
}

func TestRestartRestoresOnlyTheTail(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		cfg := e.config(t)
		var mu sync.Mutex
		restored := map[string]int64{} // per run: records read from changelogs
		run := "first"
		cfg.OnRestore = func(task processor.TaskID, r changelog.Result) {
			mu.Lock()
			restored[run] += r.Records
			mu.Unlock()
		}
		e.produce(t, 600)
		in := start(t, e.topo, cfg)
		e.waitCounts(t, time.Minute, "the counts")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.ReadCommitted(ctxT(t), changelog.TopicName(e.appID, wordcount.StoreName))
		if err != nil {
			t.Fatal(err)
		}
		changelogLen := int64(len(msgs))

		// Restart on the same state dir: only the tail (here: nothing) is read.
		mu.Lock()
		run = "kept"
		mu.Unlock()
		e.produce(t, 100)
		in = start(t, e.topo, cfg)
		e.waitCounts(t, time.Minute, "the counts after the restart")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		// Restart on an empty state dir: everything is read.
		mu.Lock()
		run = "wiped"
		mu.Unlock()
		if err := os.RemoveAll(cfg.StateDir); err != nil {
			t.Fatal(err)
		}
		e.produce(t, 100)
		in = start(t, e.topo, cfg)
		e.waitCounts(t, time.Minute, "the counts after the wipe")
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("changelog records before restart: %d; restored: %v", changelogLen, restored)
		if restored["kept"] > changelogLen/10 {
			t.Errorf("restart with the state dir kept restored %d records of a %d-record changelog; want only the tail", restored["kept"], changelogLen)
		}
		if restored["wiped"] < changelogLen {
			t.Errorf("restart with an empty state dir restored %d records, want at least the %d of the changelog", restored["wiped"], changelogLen)
		}
		e.checkExactlyOnce(t)
	})
}

func TestForcedAbortLeavesNoTrace(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		cfg := e.config(t)
		app, err := eddy.New(e.topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		failures := 0
		commits := 0
		eddy.SetBeforeCommitHook(app, func(task processor.TaskID) error {
			mu.Lock()
			defer mu.Unlock()
			commits++
			if commits%3 == 0 { // every third commit fails after its records were sent
				failures++
				return errors.New("injected commit failure")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		for range 5 {
			e.produce(t, 100)
			time.Sleep(150 * time.Millisecond)
		}
		e.waitCounts(t, time.Minute, "the counts")
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		mu.Lock()
		t.Logf("commits %d, injected failures %d", commits, failures)
		if failures == 0 {
			t.Fatal("no commit failed: the test injected nothing")
		}
		mu.Unlock()
		e.checkExactlyOnce(t)
	})
}

// A batch whose records produce no output still commits its offsets.
func TestOffsetsCommittedWithoutOutput(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		in, out, appID := c.Unique("in"), c.Unique("out"), c.Unique("drop")
		for _, topic := range []string{in, out} {
			if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
				t.Fatal(err)
			}
		}
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serdeString, serdeString, in)
		topology.AddProcessor(b, "drop", processor.Filter(func(processor.Record[string, string]) bool { return false }), "in")
		topology.AddSink(b, "out", out, serdeString, serdeString, "drop")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		msgs := make([]*sarama.ProducerMessage, 50)
		for i := range msgs {
			msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder("x")}
		}
		if err := c.Produce(ctx, in, msgs...); err != nil {
			t.Fatal(err)
		}
		ends, err := c.EndOffsets(ctx, in, sarama.ReadUncommitted)
		if err != nil {
			t.Fatal(err)
		}
		inst := start(t, topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir()})
		waitFor(t, time.Minute, "the offsets to be committed", func() (bool, error) {
			got, err := c.CommittedOffsets(ctx, appID, in)
			if err != nil {
				return false, nil // the group may not exist yet
			}
			for p, end := range ends {
				if got[p] != end {
					return false, nil
				}
			}
			return true, nil
		})
		if err := inst.stop(); err != nil {
			t.Fatal(err)
		}
		if recs, err := c.ReadCommitted(ctx, out); err != nil || len(recs) != 0 {
			t.Fatalf("output: %d records, err %v; want none", len(recs), err)
		}
	})
}

func TestStartupErrorsNameTheProblem(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		a, b, out := c.Unique("a"), c.Unique("b"), c.Unique("out")
		if err := c.CreateTopic(ctx, a, 2, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.CreateTopic(ctx, b, 3, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.CreateTopic(ctx, out, 1, nil); err != nil {
			t.Fatal(err)
		}
		build := func(topics ...string) *topology.Topology {
			bd := topology.NewBuilder()
			topology.AddSource(bd, "src", serdeString, serdeString, topics...)
			topology.AddSink(bd, "sink", out, serdeString, serdeString, "src")
			topo, err := bd.Build()
			if err != nil {
				t.Fatal(err)
			}
			return topo
		}
		run := func(topo *topology.Topology, cfg eddy.Config) error {
			if cfg.ApplicationID == "" {
				cfg.ApplicationID = c.Unique("startup")
			}
			cfg.Brokers = c.Addrs()
			if cfg.StateDir == "" {
				cfg.StateDir = t.TempDir()
			}
			app, err := eddy.New(topo, cfg)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return app.Run(ctx)
		}
		missing := c.Unique("missing")
		err := run(build(missing), eddy.Config{})
		if !errors.Is(err, eddy.ErrMissingTopic) || !strings.Contains(err.Error(), missing) {
			t.Errorf("missing source topic: got %v", err)
		}
		err = run(build(a, b), eddy.Config{})
		if !errors.Is(err, eddy.ErrPartitionMismatch) || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
			t.Errorf("partition mismatch: got %v", err)
		}
		// A second instance on the same state dir fails at start.
		dir := t.TempDir()
		appID := c.Unique("locked")
		first := start(t, build(a), eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: dir})
		waitFor(t, time.Minute, "the first instance to run", func() (bool, error) { return len(first.app.Tasks()) > 0, nil })
		err = run(build(a), eddy.Config{ApplicationID: appID, StateDir: dir})
		if !errors.Is(err, eddy.ErrStateDirLocked) {
			t.Errorf("second instance on one state dir: got %v", err)
		}
		if err := first.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cfg     eddy.Config
		setting string
	}{
		{eddy.Config{Brokers: []string{"localhost:9092"}}, "ApplicationID"},
		{eddy.Config{ApplicationID: "bad id!", Brokers: []string{"localhost:9092"}}, "ApplicationID"},
		{eddy.Config{ApplicationID: "x"}, "Brokers"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"localhost"}}, "Brokers"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, CommitInterval: -time.Second}, "CommitInterval"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, OnBadRecord: eddy.DeadLetterBadRecord}, "DeadLetterTopic"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, TransactionTimeout: time.Millisecond}, "TransactionTimeout"},
		// A commit interval at or above the transaction timeout: every transaction would be aborted by the broker.
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, CommitInterval: 10 * time.Second}, "CommitInterval"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, CommitInterval: 20 * time.Second, TransactionTimeout: 15 * time.Second}, "TransactionTimeout (15s)"},
		// The three record policies share DeadLetterTopic.
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, OnOutputError: eddy.DeadLetterBadRecord}, "DeadLetterTopic"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, OnProcessingError: eddy.DeadLetterBadRecord}, "DeadLetterTopic"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, OnOutputError: 7}, "OnOutputError"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, RepartitionPurgeInterval: -time.Second}, "RepartitionPurgeInterval"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, StoreWriteInterval: -time.Second}, "StoreWriteInterval"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, TaskTimeout: -time.Second}, "TaskTimeout"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, RebalanceProtocol: 7}, "RebalanceProtocol"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, Sarama: func(c *sarama.Config) { c.Version = sarama.V2_0_0_0 }}, "Sarama"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, ReplicationFactor: -2}, "ReplicationFactor"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, InternalTopicConfigs: map[string]string{"cleanup.policy": "delete"}}, "InternalTopicConfigs"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, InternalTopicConfigs: map[string]string{"retention.ms": "1000"}}, "InternalTopicConfigs"},
		{eddy.Config{ApplicationID: "x", Brokers: []string{"h:1"}, NumStandbyReplicas: -1}, "NumStandbyReplicas"},
	}
	for _, tc := range cases {
		_, err := eddy.New(topo, tc.cfg)
		if !errors.Is(err, eddy.ErrConfig) || !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("config %+v: got %v, want an ErrConfig naming %s", tc.cfg, err, tc.setting)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var serdeString = serde.String()
