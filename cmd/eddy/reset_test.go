package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// resetEnv is a word-count application on a cluster, under unique names.
type resetEnv struct {
	t        *testing.T
	c        *kafkatest.Cluster
	app      string
	input    string
	output   string
	stateDir string
	want     map[string]int64
	t1       time.Time // the time of every input line but the first two of each partition
	security eddy.Security
}

func newResetEnv(t *testing.T, c *kafkatest.Cluster) *resetEnv {
	t.Helper()
	e := &resetEnv{t: t, c: c, app: c.Unique("reset"), input: c.Unique("lines"), output: c.Unique("counts"),
		stateDir: t.TempDir(), want: map[string]int64{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.t1 = t0.Add(time.Hour)
	lines := map[int32][]string{
		0: {"a b", "b c", "c d", "d e"},
		1: {"a", "e e", "f"},
	}
	ctx := testCtx(t)
	for _, topic := range []string{e.input, e.output} {
		// The records' timestamps are in January 2026: without retention.ms -1, a real
		// broker's retention check (every 5 minutes) may delete them mid-test.
		if err := c.CreateTopic(ctx, topic, 2, map[string]string{"retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
	}
	for p, lines := range lines {
		for i, line := range lines {
			ts := t0
			if i >= 2 {
				ts = e.t1
			}
			// One produce per record: each is its own batch with its own timestamp.
			msg := &sarama.ProducerMessage{Value: sarama.StringEncoder(line), Timestamp: ts}
			if err := c.ProduceToPartition(ctx, e.input, p, msg); err != nil {
				t.Fatal(err)
			}
			for _, w := range wordcount.Words(line) {
				e.want[w]++
			}
		}
	}
	return e
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("EDDY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.DiscardHandler)
}

// instance is the application running in a goroutine.
type instance struct {
	cancel context.CancelFunc
	done   chan error
}

func (e *resetEnv) start() *instance {
	e.t.Helper()
	topo, err := wordcount.TopologyFor(e.input, e.output, wordcount.NoCaching()) // every count: the tests check 1..n
	if err != nil {
		e.t.Fatal(err)
	}
	app, err := eddy.New(topo, eddy.Config{ApplicationID: e.app, Brokers: e.c.Addrs(), StateDir: e.stateDir, Logger: testLogger(e.t), Security: e.security})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- app.Run(ctx) }()
	e.t.Cleanup(func() { in.stop(e.t) })
	return in
}

func (in *instance) stop(t *testing.T) {
	t.Helper()
	if in.done == nil {
		return
	}
	in.cancel()
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("the application failed: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Error("the application did not stop within 90s")
	}
	in.done = nil
}

// outputs reads the output topic (read_committed): the counts per word, in order.
func (e *resetEnv) outputs() map[string][]int64 {
	e.t.Helper()
	msgs, err := e.c.ReadCommitted(testCtx(e.t), e.output)
	if err != nil {
		e.t.Fatal(err)
	}
	seqs := map[string][]int64{}
	for _, m := range msgs {
		seqs[string(m.Key)] = append(seqs[string(m.Key)], int64(binary.BigEndian.Uint64(m.Value)))
	}
	return seqs
}

// waitOutput waits until every word's output is 1..n, runs times over.
func (e *resetEnv) waitOutput(in *instance, runs int) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		seqs := e.outputs()
		var bad []string
		for w, n := range e.want {
			var want []int64
			for range runs {
				for i := int64(1); i <= n; i++ {
					want = append(want, i)
				}
			}
			if fmt.Sprint(seqs[w]) != fmt.Sprint(want) {
				bad = append(bad, fmt.Sprintf("%s: %v, want %v", w, seqs[w], want))
			}
		}
		if len(bad) == 0 && len(seqs) == len(e.want) {
			return
		}
		select {
		case err := <-in.done:
			in.done = nil
			e.t.Fatalf("the application stopped (%v); output %v", err, bad)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("output incomplete or wrong after 2m: %s (words %d, want %d)", strings.Join(bad, "; "), len(seqs), len(e.want))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// committedInput returns the group's committed offsets on the input topic (-1: none),
// asking with RequireStable.
func (e *resetEnv) committedInput() map[int32]int64 {
	e.t.Helper()
	offs, err := e.c.CommittedOffsets(testCtx(e.t), e.app, e.input)
	if err != nil {
		e.t.Fatal(err)
	}
	return offs
}

// groupTopics lists the topics the group has committed offsets on, deleted ones too.
func (e *resetEnv) groupTopics() []string {
	e.t.Helper()
	admin, err := sarama.NewClusterAdmin(e.c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	defer admin.Close()
	resp, err := admin.ListConsumerGroupOffsets(e.app, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for topic, blocks := range resp.Blocks {
		for _, b := range blocks {
			if b.Offset >= 0 {
				out = append(out, topic)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

func (e *resetEnv) changelog() string   { return e.app + "-" + wordcount.StoreName + "-changelog" }
func (e *resetEnv) repartition() string { return e.app + "-words-repartition" }

// topics lists the cluster's topics.
func (e *resetEnv) topics() map[string]bool {
	e.t.Helper()
	admin, err := sarama.NewClusterAdmin(e.c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		e.t.Fatal(err)
	}
	defer admin.Close()
	all, err := admin.ListTopics()
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for name := range all {
		out[name] = true
	}
	return out
}

// reset runs "eddy reset" in-process with the given extra flags.
func (e *resetEnv) reset(extra ...string) (string, error) {
	e.t.Helper()
	args := append([]string{"reset", "--brokers", strings.Join(e.c.Addrs(), ","), "--application-id", e.app}, extra...)
	stdout, stderr, err := runCmd(e.t, args...)
	if stderr != "" {
		e.t.Logf("reset %v stderr: %s", extra, stderr)
	}
	return stdout, err
}

func TestReset(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newResetEnv(t, c)
		in := e.start()
		e.waitOutput(in, 1)

		// While an instance runs, reset refuses (with and without --dry-run) and
		// names the member.
		for _, extra := range [][]string{nil, {"--dry-run"}} {
			out, err := e.reset(extra...)
			if !errors.Is(err, errGroupActive) || !strings.Contains(err.Error(), "member") || !strings.Contains(err.Error(), "client "+e.app) {
				t.Fatalf("reset %v while running: %v, want a refusal naming the member\n%s", extra, err, out)
			}
		}
		// Nor can its state dir be read while it runs.
		if _, _, err := runCmd(t, "state", "inspect", filepath.Join(e.stateDir, e.app)); !errors.Is(err, errGroupActive) || !strings.Contains(err.Error(), "stop it first") {
			t.Errorf("state inspect while the application runs: %v", err)
		}
		in.stop(t)

		before := e.committedInput()
		if fmt.Sprint(before) != "map[0:4 1:3]" {
			t.Fatalf("committed input offsets after the run: %v, want every line", before)
		}
		if got, want := e.groupTopics(), sorted(e.input, e.repartition()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("the group has offsets on %v, want %v", got, want)
		}
		if !e.topics()[e.changelog()] || !e.topics()[e.repartition()] {
			t.Fatalf("internal topics missing after the run: %v", e.topics())
		}
		checkInspectAfterRun(t, e)

		// --dry-run prints the plan and changes nothing.
		out, err := e.reset("--dry-run", "--state-dir", e.stateDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Dry run", e.changelog(), e.repartition(), e.input, filepath.Join(e.stateDir, e.app), "nothing was changed"} {
			if !strings.Contains(out, want) {
				t.Errorf("dry-run output lacks %q:\n%s", want, out)
			}
		}
		if after := e.committedInput(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("dry run changed the offsets: %v, before %v", after, before)
		}
		if !e.topics()[e.changelog()] || !e.topics()[e.repartition()] {
			t.Error("dry run deleted topics")
		}
		if _, err := os.Stat(filepath.Join(e.stateDir, e.app)); err != nil {
			t.Errorf("dry run deleted the state dir: %v", err)
		}

		// To a time: the first offset at or after t1 (line 2 of partition 0, line 2 of
		// partition 1), and the internal topics and local state are gone.
		out, err = e.reset("--to-datetime", e.t1.Format(time.RFC3339), "--state-dir", e.stateDir)
		if err != nil {
			t.Fatalf("reset --to-datetime: %v\n%s", err, out)
		}
		t.Logf("reset output:\n%s", out)
		if after := e.committedInput(); fmt.Sprint(after) != "map[0:2 1:2]" {
			t.Errorf("offsets after reset --to-datetime %v: %v, want map[0:2 1:2]", e.t1, after)
		}
		// The coordinator drops the offsets of a deleted topic when it learns of the
		// deletion, a moment after DeleteTopics answered (a CI run read the repartition
		// topic's offsets still there): wait for it, a few seconds at most.
		got := e.groupTopics()
		for deadline := time.Now().Add(15 * time.Second); fmt.Sprint(got) != fmt.Sprint([]string{e.input}) && time.Now().Before(deadline); got = e.groupTopics() {
			time.Sleep(200 * time.Millisecond)
		}
		if fmt.Sprint(got) != fmt.Sprint([]string{e.input}) {
			t.Errorf("after the reset the group has offsets on %v, want only the input", got)
		}
		topics := e.topics()
		if topics[e.changelog()] || topics[e.repartition()] {
			t.Errorf("internal topics not deleted: changelog %v, repartition %v", topics[e.changelog()], topics[e.repartition()])
		}
		if !topics[e.input] || !topics[e.output] {
			t.Error("reset deleted a user topic")
		}
		if _, err := os.Stat(filepath.Join(e.stateDir, e.app)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("local state not deleted: %v", err)
		}
		for _, want := range []string{e.changelog(), e.repartition(), "Reset the offsets of 2 partition(s)", "Deleted 4 internal topic(s)", "Done."} {
			if !strings.Contains(out, want) {
				t.Errorf("reset output lacks %q:\n%s", want, out)
			}
		}

		// A time after every record: the end of each partition.
		if out, err = e.reset("--to-datetime", e.t1.Add(time.Hour).Format(time.RFC3339), "--dry-run"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "no record at or after the time") || !strings.Contains(out, "None found") && !strings.Contains(out, "none found") {
			t.Errorf("dry run to a time after the last record:\n%s", out)
		}

		// To the earliest offset; then the application starts over and counts every
		// word again from zero: each word's output is 1..n a second time.
		if out, err = e.reset(); err != nil {
			t.Fatalf("reset: %v\n%s", err, out)
		}
		if after := e.committedInput(); fmt.Sprint(after) != "map[0:0 1:0]" {
			t.Errorf("offsets after reset: %v, want the earliest, map[0:0 1:0]", after)
		}
		if !strings.Contains(out, "Now delete the local state") {
			t.Errorf("reset without --state-dir does not tell to delete the local state:\n%s", out)
		}
		in = e.start()
		e.waitOutput(in, 2)
		in.stop(t)
	})
}

// checkInspectAfterRun inspects the state dir the application left: the counts stores
// of its tasks hold every word once, closed cleanly, with a checkpoint within the
// changelog.
func checkInspectAfterRun(t *testing.T, e *resetEnv) {
	t.Helper()
	out, _, err := runCmd(t, "state", "inspect", "--json", filepath.Join(e.stateDir, e.app))
	if err != nil {
		t.Fatal(err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	end, err := e.c.EndOffsets(testCtx(t), e.changelog(), sarama.ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	var keys int64
	for _, task := range rep.Tasks {
		if !task.ClosedCleanly {
			t.Errorf("task %s not closed cleanly: %s %s", task.Task, task.CloseState, task.Detail)
		}
		for _, s := range task.Stores {
			if s.Name != wordcount.StoreName {
				t.Errorf("task %s: unexpected store %q", task.Task, s.Name)
				continue
			}
			keys += s.Keys
			var p int32
			if _, err := fmt.Sscanf(task.Task, "1_%d", &p); err != nil {
				t.Errorf("store counts in task %s, not in sub-topology 1", task.Task)
				continue
			}
			if s.Keys > 0 && (s.Checkpoint == nil || *s.Checkpoint <= 0 || *s.Checkpoint > end[p]) {
				t.Errorf("task %s: checkpoint %v outside the changelog (end %d)", task.Task, s.Checkpoint, end[p])
			}
		}
	}
	if keys != int64(len(e.want)) {
		t.Errorf("the stores hold %d keys, want %d words:\n%s", keys, len(e.want), out)
	}
	// dump of every task: each word once, with its count.
	out, _, err = runCmd(t, "state", "dump", "--value-serde", "int64", filepath.Join(e.stateDir, e.app), wordcount.StoreName)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || !strings.HasPrefix(f[0], "1_") {
			t.Fatalf("dump line %q: want task, key, value", line)
		}
		got[f[1]] = f[2]
	}
	for w, n := range e.want {
		if got[w] != fmt.Sprint(n) {
			t.Errorf("dump: %s = %q, want %d", w, got[w], n)
		}
	}
}

// TestResetLeavesOtherApplications: topics of an application whose ID extends this one
// ("app" and "app-other") are named like this one's internal topics; reset leaves them.
func TestResetLeavesOtherApplications(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := testCtx(t)
		app := c.Unique("app")
		other := app + "-other"
		input, input2 := c.Unique("in"), c.Unique("in2")
		mine := []string{app + "-s-changelog", app + "-r-repartition"}
		theirs := other + "-s-changelog"
		for _, topic := range append([]string{input, input2, theirs}, mine...) {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if err := c.Produce(ctx, input, &sarama.ProducerMessage{Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		// Both groups exist, with committed offsets.
		k, err := dialKafka(ctx, c.Addrs(), time.Minute, eddy.Security{})
		if err != nil {
			t.Fatal(err)
		}
		defer k.close()
		if err := k.commitOffsets(ctx, app, []offsetChange{{topic: input, target: 3}, {topic: mine[1], target: 0}}); err != nil {
			t.Fatal(err)
		}
		if err := k.commitOffsets(ctx, other, []offsetChange{{topic: input, target: 1}}); err != nil {
			t.Fatal(err)
		}

		args := []string{"reset", "--brokers", strings.Join(c.Addrs(), ","), "--application-id", app}
		out, _, err := runCmd(t, append(args, "--dry-run")...)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{mine[0], mine[1], "left alone: " + theirs + ` belongs to application "` + other + `"`} {
			if !strings.Contains(out, want) {
				t.Errorf("dry run lacks %q:\n%s", want, out)
			}
		}
		if !regexp.MustCompile(regexp.QuoteMeta(input) + ` +0 +3 +0\n`).MatchString(out) {
			t.Errorf("dry run lacks the input partition 0 from 3 to 0:\n%s", out)
		}
		// --input-topics replaces the detected input topics.
		out, _, err = runCmd(t, append(args, "--dry-run", "--input-topics", input2)...)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(regexp.QuoteMeta(input2)+` +0 +- +0\n`).MatchString(out) || strings.Contains(out, input+" ") {
			t.Errorf("dry run with --input-topics %s:\n%s", input2, out)
		}

		if out, _, err = runCmd(t, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		all, err := k.admin.ListTopics()
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range mine {
			if _, ok := all[topic]; ok {
				t.Errorf("%s not deleted", topic)
			}
		}
		if _, ok := all[theirs]; !ok {
			t.Errorf("the other application's %s was deleted", theirs)
		}
		mineOffs, err := c.CommittedOffsets(ctx, app, input)
		if err != nil {
			t.Fatal(err)
		}
		theirOffs, err := c.CommittedOffsets(ctx, other, input)
		if err != nil {
			t.Fatal(err)
		}
		if mineOffs[0] != 0 || theirOffs[0] != 1 {
			t.Errorf("offsets on the input: %d (want 0, reset) and the other group's %d (want 1, untouched)", mineOffs[0], theirOffs[0])
		}
	})
}

func TestIsInternalName(t *testing.T) {
	for topic, want := range map[string]bool{
		"wc-counts-changelog":     true,
		"wc-words-repartition":    true,
		"wc-a-b-changelog":        true,
		"wc--changelog":           false,
		"wc-changelog":            false,
		"wc-counts":               false,
		"wcx-counts-changelog":    false,
		"other-counts-changelog":  false,
		"wc-counts-changelog-bak": false,
	} {
		if got := isInternalName("wc", topic); got != want {
			t.Errorf("isInternalName(wc, %q) = %v, want %v", topic, got, want)
		}
	}
}
