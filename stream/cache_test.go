package stream_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// runEvery runs a DSL topology in topologytest committing after every n piped records.
func runEvery(t *testing.T, b *stream.Builder, n int) *harness {
	t.Helper()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{CommitEvery: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &harness{t: t, d: d}
}

func (h *harness) commit() {
	h.t.Helper()
	if err := h.d.Commit(); err != nil {
		h.t.Fatal(err)
	}
}

// A cached table forwards each key once per commit, at the commit: its latest value
// with the timestamp and headers of its latest update, keys in the order of their
// latest updates; a key created and deleted between two commits is not forwarded
// (Kafka Streams' NamedCache.flush and CachingKeyValueStore.putAndMaybeForward).
func TestCacheForwardsEachKeyOncePerCommit(t *testing.T) {
	b := stream.NewBuilder()
	tab := stream.TableFrom(b, str, str, "in", stream.Materialized("t"))
	stream.ToStream(tab).To("out", str, nstr)
	h := runEvery(t, b, 100)
	pipeH := func(k, v string, ms int64, hdr string) {
		t.Helper()
		var vb []byte
		if v != "<nil>" {
			vb = []byte(v)
		}
		if err := h.d.PipeRaw("in", []byte(k), vb, []processor.Header{{Key: "h", Value: []byte(hdr)}}, at(ms)); err != nil {
			t.Fatal(err)
		}
	}
	pipeH("a", "1", 10, "a1")
	pipeH("b", "1", 20, "b1")
	pipeH("a", "2", 5, "a2")
	pipeH("c", "1", 30, "c1")
	pipeH("c", "<nil>", 31, "c2")
	h.want("out", false, "")
	h.commit()
	h.want("out", false, "b=1@20 a=2@5")
	recs := h.d.Records("out")
	if len(recs) == 2 && (len(recs[1].Headers) != 1 || string(recs[1].Headers[0].Value) != "a2") {
		t.Errorf("a's headers %v, want those of its latest update (h=a2)", recs[1].Headers)
	}
	pipeH("b", "<nil>", 40, "b2")
	pipeH("a", "3", 50, "a3")
	pipeH("a", "4", 45, "a4")
	h.want("out", false, "b=1@20 a=2@5")
	h.commit()
	h.want("out", false, "b=1@20 a=2@5 b=<nil>@40 a=4@45")
	// The store holds every update at once (reads see them), whatever the cache holds.
	pipeH("d", "9", 60, "d")
	kv, err := topologytest.KeyValueStore[string, stream.Timestamped[string]](h.d, "t")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := kv.Get("d"); err != nil || !ok || v.Value != "9" {
		t.Errorf("store t: d = %v, %v, %v; want 9", v, ok, err)
	}
}

// The old value a cached table forwards is the one as of the previous commit, however
// many updates came between: a re-grouped count subtracts it (Kafka Streams' count of
// counts), and its own cached output has one record per key per commit.
func TestCacheForwardsOldValueOfLastCommit(t *testing.T) {
	b := stream.NewBuilder()
	counts := stream.From(b, str, str, []string{"w"}).GroupByKey(str, str).Count()
	hist := stream.TableGroupBy(counts, func(w string, n int64) (string, string) { return fmt.Sprint(n), w }, str, str).Count()
	stream.ToStream(hist).To("hist", str, ni64)
	h := runEvery(t, b, 3)
	for _, w := range []string{"a", "a", "b"} { // commits after the third
		h.pipe("w", w, "", 1)
	}
	h.want("hist", true, "2=1@1 1=1@1")
	for _, w := range []string{"a", "a", "a", "b"} { // commits after the third: a is 5
		h.pipe("w", w, "", 2)
	}
	h.commit() // b is 2
	// Commit 2: a 2→5 subtracts from "2" and adds to "5"; in the third, b 1→2 subtracts
	// from "1" and adds to "2". An old value of 4 (a's previous update) would touch "4".
	h.want("hist", true, "2=1@1 1=1@1 2=0@2 5=1@2 1=0@2 2=1@2")
}

// Over the byte budget, the cache of the table just updated is flushed at once (Kafka
// Streams' ThreadCache.maybeEvict: evicting its least recent dirty entry flushes them
// all), least recently updated first; then it fills again until the commit.
func TestCacheEvictsWhenOverBudget(t *testing.T) {
	// An entry of a one-letter key and a count costs 1+8+160 bytes: three exceed 400.
	b := stream.NewBuilder(stream.CacheMaxBytes(400))
	stream.ToStream(stream.From(b, str, str, []string{"w"}).GroupByKey(str, str).Count()).To("out", str, ni64)
	h := runEvery(t, b, 100)
	h.pipe("w", "a", "", 1)
	h.pipe("w", "b", "", 2)
	h.pipe("w", "a", "", 3)
	h.want("out", true, "")
	h.pipe("w", "c", "", 4)
	h.want("out", true, "b=1@2 a=2@3 c=1@4")
	h.pipe("w", "d", "", 5)
	h.pipe("w", "d", "", 6)
	h.want("out", true, "b=1@2 a=2@3 c=1@4")
	h.commit()
	h.want("out", true, "b=1@2 a=2@3 c=1@4 d=2@6")
}

// WithoutCaching forwards every update of its table at once; NoCaching of every table;
// CacheMaxBytes(0) too.
func TestCacheOptOut(t *testing.T) {
	for name, tc := range map[string]struct {
		opts  []stream.BuilderOption
		count []stream.Option
	}{
		"WithoutCaching":  {count: []stream.Option{stream.WithoutCaching()}},
		"NoCaching":       {opts: []stream.BuilderOption{stream.NoCaching()}},
		"CacheMaxBytes 0": {opts: []stream.BuilderOption{stream.CacheMaxBytes(0)}},
	} {
		t.Run(name, func(t *testing.T) {
			b := stream.NewBuilder(tc.opts...)
			stream.ToStream(stream.From(b, str, str, []string{"w"}).GroupByKey(str, str).Count(tc.count...)).To("out", str, ni64)
			h := runEvery(t, b, 100)
			h.pipe("w", "a", "", 1)
			h.pipe("w", "a", "", 2)
			h.want("out", true, "a=1@1 a=2@2")
		})
	}
}

// failOn is a processor that fails on the value "boom".
type failOn struct{}

func (failOn) Init(processor.Context[string, string]) error { return nil }
func (failOn) Close() error                                 { return nil }
func (failOn) Process(r processor.Record[string, string]) error {
	if r.Value == "boom" {
		return errors.New("boom")
	}
	return nil
}

// An aborted transaction drops what the caches hold for it, with the store writes: the
// next commit forwards only what came after (the runtime replays the aborted input, and
// the replay fills the caches again).
func TestCacheDroppedWithAbortedTransaction(t *testing.T) {
	for _, every := range []int{0, 10} {
		t.Run(fmt.Sprint("CommitEvery ", every), func(t *testing.T) {
			b := stream.NewBuilder()
			s := stream.From(b, str, str, []string{"w"})
			stream.ToStream(s.GroupByKey(str, str).Count()).To("out", str, ni64)
			stream.Process(s, func() processor.Processor[string, string, string, string] { return failOn{} }, nil)
			h := runEvery(t, b, every)
			if every > 1 {
				h.pipe("w", "a", "", 1)
			}
			err := h.d.PipeRaw("w", []byte("a"), []byte("boom"), nil, at(2))
			if err == nil || !strings.Contains(err.Error(), "boom") {
				t.Fatalf("pipe boom: %v, want the processor's error", err)
			}
			h.pipe("w", "b", "", 3)
			h.commit()
			h.want("out", true, "b=1@3")
			// The aborted input stays in its topic, unprocessed (lost nothing).
			var in []string
			for _, r := range h.d.Records("w") {
				in = append(in, fmt.Sprintf("%s/%d", r.Value, r.Offset))
			}
			want := []string{"boom/0", "/1"}
			if every > 1 {
				want = []string{"/0", "boom/1", "/2"}
			}
			if !slices.Equal(in, want) {
				t.Errorf("input topic %q, want %q", in, want)
			}
		})
	}
}

// metaOf records the input offset of every record it sees, from RecordMetadata.
type metaOf struct {
	ctx  processor.Context[string, string]
	seen *[]string
}

func (p *metaOf) Init(ctx processor.Context[string, string]) error { p.ctx = ctx; return nil }
func (p *metaOf) Close() error                                     { return nil }
func (p *metaOf) Process(r processor.Record[string, *int64]) error {
	md, ok := p.ctx.RecordMetadata()
	*p.seen = append(*p.seen, fmt.Sprintf("%s:%v/%d", r.Key, ok, md.Offset))
	return nil
}

// A cache forwards each entry as from the record of its latest update (Kafka Streams
// restores the entry's record context): a processor downstream reads that record's
// offset. A table fed by a cached table in the same task is flushed in the same commit,
// after it (caches flush parents first).
func TestCacheFlushKeepsRecordContextAndOrder(t *testing.T) {
	var seen []string
	build := func() *stream.Builder {
		b := stream.NewBuilder()
		counts := stream.From(b, str, str, []string{"w"}).GroupByKey(str, str).Count()
		stream.Process(stream.ToStream(counts), func() processor.Processor[string, *int64, string, string] {
			return &metaOf{seen: &seen}
		}, nil)
		doubled := stream.TableMapValues(counts, func(_ string, n int64) int64 { return 2 * n }, i64, stream.Materialized("doubled"))
		stream.ToStream(doubled).To("out", str, ni64)
		return b
	}
	h := runEvery(t, build(), 100)
	h.pipe("w", "a", "", 1) // offset 0
	h.pipe("w", "b", "", 2) // offset 1
	h.pipe("w", "a", "", 3) // offset 2
	h.commit()
	if want := []string{"b:true/1", "a:true/2"}; !slices.Equal(seen, want) {
		t.Errorf("downstream saw %q, want %q", seen, want)
	}
	h.want("out", true, "b=2@2 a=4@3")
	// One task flush (the runtime's, or the driver's after each record) reaches both.
	h = runEvery(t, build(), 0)
	h.pipe("w", "a", "", 1)
	h.want("out", true, "a=2@1")
}
