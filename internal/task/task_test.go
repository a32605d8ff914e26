package task_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/partition"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// collector records what the task sends; every topic has parts partitions. With fail
// set, every Send fails with it; headers holds those of each record sent with any.
type collector struct {
	parts   int32
	sent    []string
	fail    error
	headers []map[string]string
}

func (c *collector) Send(topic string, p int32, key, value []byte, hs []processor.Header, _ time.Time) error {
	if c.fail != nil {
		return c.fail
	}
	c.sent = append(c.sent, fmt.Sprintf("%s/%d %s=%s", topic, p, key, value))
	if len(hs) > 0 {
		m := map[string]string{}
		for _, h := range hs {
			m[h.Key] = string(h.Value)
		}
		c.headers = append(c.headers, m)
	}
	return nil
}

func (c *collector) Partitions(string) (int32, error) { return c.parts, nil }

// newTask runs sub-topology 0 of topo as task 0_3 over a memory backend.
func newTask(t *testing.T, topo *topology.Topology, c *collector, mod func(*task.Config)) *task.Task {
	t.Helper()
	g := graph.Of(topo)
	cfg := task.Config{
		ID: processor.TaskID{Subtopology: 0, Partition: 3}, ApplicationID: "app", Graph: g, Subtopology: g.Subtopologies[0],
		Stores: kvstore.NewSet(kvstore.NewMemoryBackend()), Collector: c,
	}
	if mod != nil {
		mod(&cfg)
	}
	tk, err := task.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tk.Close(); _ = cfg.Stores.Close() })
	if err := tk.Init(); err != nil {
		t.Fatal(err)
	}
	return tk
}

func raw(topic string, offset int64, key, value string) graph.RawRecord {
	r := graph.RawRecord{Topic: topic, Partition: 3, Offset: offset, Value: []byte(value), Timestamp: time.UnixMilli(offset * 1000)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

func passThrough(t *testing.T, sinkMod func(*topology.SinkNode[string, string])) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	s := topology.AddSink(b, "out", "output", serde.String(), serde.String(), "in")
	if sinkMod != nil {
		sinkMod(s)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// Sinks place keyed records as Kafka's default partitioner does (murmur2 of the key),
// and spread records without a key (nil key bytes) over the partitions.
func TestDefaultPartitioning(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.Nullable(serde.String()), serde.String(), "input")
	topology.AddSink(b, "out", "output", serde.Nullable(serde.String()), serde.String(), "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{parts: 5}
	tk := newTask(t, topo, c, nil)
	var want []string
	for i, key := range []string{"alpha", "beta", "gamma", "delta"} {
		if err := tk.Process(raw("input", int64(i), key, "v")); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("output/%d %s=v", partition.ForKey([]byte(key), 5), key))
	}
	for i := range 6 {
		if err := tk.Process(raw("input", int64(10+i), "", "v")); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("output/%d =v", i%5))
	}
	if strings.Join(c.sent, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent\n%s\nwant\n%s", strings.Join(c.sent, "\n"), strings.Join(want, "\n"))
	}
}

// A String key has no nil: a record read without a key carries the key "", which a
// String sink writes as an empty (not a null) key, so all such records land in one
// partition, as they would from a Java producer given an empty key. Nullable keys (see
// above) keep null keys null.
func TestMissingStringKeyBecomesEmptyKey(t *testing.T) {
	c := &collector{parts: 5}
	tk := newTask(t, passThrough(t, nil), c, nil)
	for i := range 3 {
		if err := tk.Process(raw("input", int64(i), "", "v")); err != nil {
			t.Fatal(err)
		}
	}
	p := partition.ForKey([]byte{}, 5)
	want := strings.Repeat(fmt.Sprintf("output/%d =v,", p), 3)
	if got := strings.Join(c.sent, ",") + ","; got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

func TestCustomPartitioner(t *testing.T) {
	c := &collector{parts: 4}
	tk := newTask(t, passThrough(t, func(s *topology.SinkNode[string, string]) {
		s.WithPartitioner(func(topic, key, value string, n int32) int32 { return int32(len(value)) % (n + 1) })
	}), c, nil)
	if err := tk.Process(raw("input", 0, "k", "abc")); err != nil {
		t.Fatal(err)
	}
	if len(c.sent) != 1 || c.sent[0] != "output/3 k=abc" {
		t.Fatalf("sent %q", c.sent)
	}
	err := tk.Process(raw("input", 1, "k", "abcd")) // 4 % 5 = 4: out of range
	var pe *task.ProcessError
	if !errors.As(err, &pe) || pe.Node != "out" || !strings.Contains(err.Error(), "partition 4") || !strings.Contains(err.Error(), "has 4") {
		t.Fatalf("error %v; want one naming sink out and the bad partition", err)
	}
}

func TestProcessUnknownTopic(t *testing.T) {
	tk := newTask(t, passThrough(t, nil), &collector{parts: 1}, nil)
	err := tk.Process(raw("elsewhere", 0, "k", "v"))
	if err == nil || !strings.Contains(err.Error(), `"elsewhere"`) || !strings.Contains(err.Error(), "0_3") {
		t.Fatalf("Process = %v; want an error naming the task and topic", err)
	}
	if got := tk.SourceTopics(); len(got) != 1 || got[0] != "input" {
		t.Fatalf("SourceTopics = %q", got)
	}
}

type committer struct {
	ctx processor.Context[string, string]
}

func (c *committer) Init(ctx processor.Context[string, string]) error { c.ctx = ctx; return nil }
func (c *committer) Close() error                                     { return nil }
func (c *committer) Process(rec processor.Record[string, string]) error {
	if rec.Value == "commit" {
		c.ctx.RequestCommit()
	}
	return nil
}

func TestCommitRequested(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddProcessor(b, "p", func() processor.Processor[string, string, string, string] { return &committer{} }, "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tk := newTask(t, topo, &collector{parts: 1}, nil)
	for i, v := range []string{"no", "commit", "no"} {
		if err := tk.Process(raw("input", int64(i), "k", v)); err != nil {
			t.Fatal(err)
		}
		if got, want := tk.CommitRequested(), v == "commit"; got != want {
			t.Fatalf("after %q: CommitRequested = %v, want %v", v, got, want)
		}
	}
	if tk.CommitRequested() {
		t.Fatal("CommitRequested did not clear the request")
	}
}

func TestConfigChecks(t *testing.T) {
	topo := passThrough(t, nil)
	g := graph.Of(topo)
	base := task.Config{ID: processor.TaskID{Partition: 1}, ApplicationID: "app", Graph: g, Subtopology: g.Subtopologies[0],
		Stores: kvstore.NewSet(kvstore.NewMemoryBackend()), Collector: &collector{parts: 1}}
	cfg := base
	cfg.OnDeserializationError = task.DeadLetter
	if _, err := task.New(cfg); err == nil || !strings.Contains(err.Error(), "dead-letter topic") || !strings.Contains(err.Error(), "0_1") {
		t.Fatalf("DeadLetter without topic: %v", err)
	}
	cfg = base
	cfg.OnDeserializationError = task.ErrorPolicy(9)
	if _, err := task.New(cfg); err == nil || !strings.Contains(err.Error(), "policy 9") {
		t.Fatalf("unknown policy: %v", err)
	}
}

// The stream time of a task is the largest timestamp seen; records out of order do not
// move it back.
func TestStreamTime(t *testing.T) {
	tk := newTask(t, passThrough(t, nil), &collector{parts: 1}, nil)
	for _, off := range []int64{5, 2, 9, 7} {
		if err := tk.Process(raw("input", off, "k", "v")); err != nil {
			t.Fatal(err)
		}
	}
	if got := tk.StreamTime(); !got.Equal(time.UnixMilli(9000)) {
		t.Fatalf("StreamTime = %v, want 9s after the epoch", got)
	}
}

// The badRecord hook is told of each skipped record, for metrics.
func TestOnBadRecord(t *testing.T) {
	var told []string
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.Int64(), "input")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tk := newTask(t, topo, &collector{parts: 1}, func(cfg *task.Config) {
		cfg.OnDeserializationError = task.Skip
		cfg.OnBadRecord = func(p task.ErrorPolicy, rec graph.RawRecord, err error) {
			told = append(told, fmt.Sprintf("%d %s@%d %v", p, rec.Topic, rec.Offset, errors.Is(err, serde.ErrTombstone)))
		}
	})
	if err := tk.Process(raw("input", 4, "k", "short")); err != nil {
		t.Fatal(err)
	}
	r := raw("input", 5, "k", "")
	r.Value = nil
	if err := tk.Process(r); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 input@4 false", "1 input@5 true"}; strings.Join(told, ",") != strings.Join(want, ",") {
		t.Fatalf("told %q, want %q", told, want)
	}
}

// A record that cannot be deserialized reaches no processor, so it must not move stream
// time either.
func TestSkippedRecordDoesNotMoveStreamTime(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.Int64(), "input")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tk := newTask(t, topo, &collector{parts: 1}, func(cfg *task.Config) { cfg.OnDeserializationError = task.Skip })
	if err := tk.Process(raw("input", 2, "k", "\x00\x00\x00\x00\x00\x00\x00\x01")); err != nil {
		t.Fatal(err)
	}
	if err := tk.Process(raw("input", 50, "k", "bad")); err != nil {
		t.Fatal(err)
	}
	if got := tk.StreamTime(); !got.Equal(time.UnixMilli(2000)) {
		t.Fatalf("StreamTime = %v after a skipped record; want 2s after the epoch", got)
	}
}
