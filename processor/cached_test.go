package processor_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// cachedCount counts the words of each line in "counts" and forwards each new count
// through the store's cache.
type cachedCount struct {
	counts statestore.KeyValueStore[string, int64]
	out    processor.Forwarder[string, int64]
}

func (c *cachedCount) Init(ctx processor.Context[string, int64]) (err error) {
	if c.counts, err = processor.KeyValueStore[string, int64](ctx, "counts"); err != nil {
		return err
	}
	c.out, err = processor.ForwardThroughCache(ctx, "counts")
	return err
}

func (c *cachedCount) Process(r processor.Record[string, string]) error {
	for _, w := range strings.Fields(r.Value) {
		n, _, err := c.counts.Get(w)
		if err != nil {
			return err
		}
		n++
		if err := c.counts.Put(w, n); err != nil {
			return err
		}
		if err := c.out.Forward(processor.WithKeyValue(r, w, n)); err != nil {
			return err
		}
	}
	return nil
}

func (c *cachedCount) Close() error { return nil }

// cachedCountDriver runs the line counter with the store's caching on or off (budget:
// the builder's cache budget, 0 for the default).
func cachedCountDriver(t *testing.T, cached bool, budget int64, cfg topologytest.Config) (*topologytest.Driver, *topologytest.InputTopic[string, string], *topologytest.OutputTopic[string, int64]) {
	t.Helper()
	b := topology.NewBuilder()
	if budget > 0 {
		b.SetCacheMaxBytes(budget)
	}
	topology.AddSource(b, "lines", serde.String(), serde.String(), "lines")
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &cachedCount{} }, "lines")
	st := topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "count")
	if cached {
		st.WithCaching()
	}
	topology.AddSink(b, "out", "counts-out", serde.String(), serde.Int64(), "count")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, topologytest.NewInputTopic(d, "lines", serde.String(), serde.String()),
		topologytest.NewOutputTopic(d, "counts-out", serde.String(), serde.Int64())
}

func readCounts(t *testing.T, out *topologytest.OutputTopic[string, int64]) string {
	t.Helper()
	recs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, r := range recs {
		parts = append(parts, fmt.Sprintf("%s=%d", r.Key, r.Value))
	}
	return strings.Join(parts, " ")
}

// With caching, the counts wait for the commit and go out once per word, the latest,
// in the order of the words' last updates; the processor reads its own writes of the
// same commit meanwhile (a=3). Without, every count goes out at once.
func TestForwardThroughCacheHoldsUpdatesUntilTheCommit(t *testing.T) {
	for _, tc := range []struct {
		cached                 bool
		beforeCommit, atCommit string
	}{
		{true, "", "b=1 a=3 c=1"},
		{false, "a=1 b=1 a=2 a=3 c=1", ""},
	} {
		d, in, out := cachedCountDriver(t, tc.cached, 0, topologytest.Config{CommitEvery: 100})
		if err := in.PipeValues("a b a", "a c"); err != nil {
			t.Fatal(err)
		}
		if got := readCounts(t, out); got != tc.beforeCommit {
			t.Errorf("cached %v: before the commit %q, want %q", tc.cached, got, tc.beforeCommit)
		}
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := readCounts(t, out); got != tc.atCommit {
			t.Errorf("cached %v: at the commit %q, want %q", tc.cached, got, tc.atCommit)
		}
	}
}

// What the cache held at a commit is forwarded in that commit: after a crash (Restart)
// the committed input is not processed again, so counts held back past their commit
// would be lost.
func TestForwardThroughCacheFlushesBeforeACrash(t *testing.T) {
	d, in, out := cachedCountDriver(t, true, 0, topologytest.Config{CommitEvery: 2})
	if err := in.PipeValues("a b", "a"); err != nil { // the second line commits
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := in.PipeValues("b", "c"); err != nil {
		t.Fatal(err)
	}
	if got, want := readCounts(t, out), "b=1 a=2 b=2 c=1"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// A budget the cache outgrows forwards its records before the commit (an eviction
// forwards all of the cache's records, least recently updated first).
func TestForwardThroughCacheEvictsOverItsBudget(t *testing.T) {
	// An entry costs 160 bytes besides its key and value: two fit in 400, three do not.
	_, in, out := cachedCountDriver(t, true, 400, topologytest.Config{CommitEvery: 100})
	if err := in.PipeValues("a b a", "c"); err != nil {
		t.Fatal(err)
	}
	if got, want := readCounts(t, out), "b=1 a=2 c=1"; got != want {
		t.Errorf("before the commit %q, want %q (evicted)", got, want)
	}
}

// Forwarding through the cache needs the store's key type; caching is for key-value
// stores of processors.
func TestForwardThroughCacheMisuse(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.String(), "lines")
	topology.AddProcessor(b, "p", processor.Map(func(r processor.Record[string, string]) (processor.Record[int64, string], error) {
		return processor.WithKeyValue(r, int64(1), r.Value), nil
	}), "lines")
	topology.AddProcessor(b, "wrong-key", func() processor.Processor[int64, string, int64, string] { return &wrongKey{} }, "p")
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "wrong-key").WithCaching()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = topologytest.New(topo, topologytest.Config{})
	if err == nil || !strings.Contains(err.Error(), "keyed as the store") {
		t.Errorf("a forwarder keyed by int64 on a string store: %v, want an error saying the keys must be the store's", err)
	}

	b = topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.String(), "lines")
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &cachedCount{} }, "lines")
	topology.AddWindowStore(b, "counts", serde.String(), serde.Int64(), time.Minute, time.Hour, "count").WithCaching()
	if _, err := b.Build(); !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), "WithCaching is for key-value stores") {
		t.Errorf("WithCaching on a window store: Build gave %v", err)
	}
}

type wrongKey struct{}

func (w *wrongKey) Init(ctx processor.Context[int64, string]) error {
	_, err := processor.ForwardThroughCache(ctx, "counts")
	return err
}
func (w *wrongKey) Process(processor.Record[int64, string]) error { return nil }
func (w *wrongKey) Close() error                                  { return nil }
