package stream_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

var str, nstr, i64, ni64 = serde.String(), serde.Nullable(serde.String()), serde.Int64(), serde.Nullable(serde.Int64())

func TestStatelessChain(t *testing.T) {
	b := stream.NewBuilder()
	var peeked, each []string
	s := stream.From(b, str, str, []string{"in"})
	s = s.Filter(func(k, v string) bool { return v != "drop" }).
		FilterNot(func(k, v string) bool { return k == "x" }).
		Peek(func(k, v string) { peeked = append(peeked, k+v) })
	up := stream.MapValues(s, func(_, v string) string { return strings.ToUpper(v) })
	words := stream.FlatMapValues(up, func(_, v string) []string { return strings.Fields(v) })
	keyed := stream.SelectKey(words, func(_, w string) string { return w })
	pairs := stream.FlatMap(keyed, func(k, v string) []stream.KeyValue[string, int64] {
		return []stream.KeyValue[string, int64]{stream.Pair(k+"1", int64(1)), stream.Pair(k+"2", int64(2))}
	})
	mapped := stream.Map(pairs, func(k string, v int64) (string, int64) { return "m" + k, v * 10 })
	mapped.To("out", str, i64)
	mapped.ForEach(func(k string, v int64) { each = append(each, k) })
	h := run(t, b)
	h.pipe("in", "a", "hello world", 5)
	h.pipe("in", "b", "drop", 6)
	h.pipe("in", "x", "gone", 7)
	h.pipe("in", "c", "z", 8)
	h.want("out", true, "mHELLO1=10@5 mHELLO2=20@5 mWORLD1=10@5 mWORLD2=20@5 mZ1=10@8 mZ2=20@8")
	if !slices.Equal(peeked, []string{"ahello world", "cz"}) {
		t.Errorf("peeked %q", peeked)
	}
	if len(each) != 6 {
		t.Errorf("ForEach saw %q", each)
	}
}

func TestSplitMergeToExtractor(t *testing.T) {
	b := stream.NewBuilder()
	s := stream.From(b, str, str, []string{"in"})
	br := s.Split(stream.Named("split-")).
		Branch("a", func(_, v string) bool { return strings.HasPrefix(v, "a") }).
		Branch("b", func(_, v string) bool { return strings.HasPrefix(v, "b") }).
		DefaultBranch("other")
	a := stream.MapValues(br["split-a"], func(_, v string) string { return strings.ToUpper(v) })
	a.Merge([]stream.Stream[string, string]{br["split-b"]}).To("merged", str, str)
	br["split-other"].To("other", str, str)
	h := run(t, b)
	h.pipe("in", "k1", "apple", 1)
	h.pipe("in", "k2", "banana", 2)
	h.pipe("in", "k3", "cherry", 3)
	h.pipe("in", "k4", "ab", 4)
	h.want("merged", false, "k1=APPLE@1 k2=banana@2 k4=AB@4")
	h.want("other", false, "k3=cherry@3")
}

// A processor-API node inside a DSL chain, with a store of the processor API.
func TestProcessMixesWithProcessorAPI(t *testing.T) {
	b := stream.NewBuilder()
	s := stream.From(b, str, str, []string{"in"})
	seen := stream.Process(s, func() processor.Processor[string, string, string, int64] { return &lengthSum{} }, []string{"lengths"})
	topology.AddKeyValueStore(b.Topology(), "lengths", str, i64)
	// and a processor-API sink reading a DSL node by name
	topology.AddSink(b.Topology(), "raw-sink", "raw", str, i64, seen.Name())
	seen.Repartition(str, i64, stream.Named("sums")).To("out", str, i64)
	h := run(t, b)
	h.pipe("in", "a", "xy", 1)
	h.pipe("in", "a", "xyz", 2)
	h.want("out", true, "a=2@1 a=5@2")
	h.want("raw", true, "a=2@1 a=5@2")
	h.want("topologytest-sums-repartition", true, "a=2@1 a=5@2")
}

type lengthSum struct {
	ctx processor.Context[string, int64]
	kv  interface {
		Get(string) (int64, bool, error)
		Put(string, int64) error
	}
}

func (p *lengthSum) Init(ctx processor.Context[string, int64]) (err error) {
	p.ctx = ctx
	p.kv, err = processor.KeyValueStore[string, int64](ctx, "lengths")
	return err
}

func (p *lengthSum) Process(r processor.Record[string, string]) error {
	n, _, err := p.kv.Get(r.Key)
	if err != nil {
		return err
	}
	n += int64(len(r.Value))
	if err := p.kv.Put(r.Key, n); err != nil {
		return err
	}
	return p.ctx.Forward(processor.WithValue(r, n))
}

func (p *lengthSum) Close() error { return nil }

func TestGroupByKeyRepartitionsOnlyAfterKeyChange(t *testing.T) {
	b := stream.NewBuilder()
	s := stream.From(b, str, str, []string{"in"})
	stream.ToStream(s.GroupByKey(str, str).Count(stream.Materialized("direct"))).To("direct-out", str, ni64)
	rekeyed := stream.SelectKey(s, func(_, v string) string { return v })
	filtered := rekeyed.Filter(func(string, string) bool { return true }) // keeps the key-changed mark
	stream.ToStream(filtered.GroupByKey(str, str).Count(stream.Materialized("rekeyed"))).To("rekeyed-out", str, ni64)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var reparts []string
	for _, st := range topo.Subtopologies() {
		reparts = append(reparts, st.Repartitions...)
	}
	if !slices.Equal(reparts, []string{"rekeyed"}) {
		t.Errorf("repartition topics %q, want only rekeyed-repartition\n%s", reparts, topo.Describe())
	}
}

func TestStreamAggregations(t *testing.T) {
	b := stream.NewBuilder()
	s := stream.From(b, str, nstr, []string{"orders"})
	keyed := stream.SelectKey(s, func(k string, v *string) string {
		if v == nil {
			return k
		}
		return strings.Split(*v, ":")[0]
	})
	g := keyed.GroupByKey(str, nstr)
	stream.ToStream(g.Count(stream.Materialized("count"))).To("count", str, ni64)
	stream.ToStream(stream.NonNull(keyed).GroupByKey(str, str).Reduce(func(a, v string) string { return a + "," + v })).To("reduce", str, nstr)
	stream.ToStream(stream.Aggregate(g, func() int64 { return 100 }, func(_ string, v *string, agg int64) int64 { return agg + int64(len(*v)) }, i64)).To("agg", str, ni64)
	h := run(t, b)
	h.pipe("orders", "o1", "alice:1", 10)
	h.pipe("orders", "o2", "bob:22", 5)
	h.pipe("orders", "o3", "<nil>", 50) // null value: skipped by the aggregations
	h.pipe("orders", "o4", "alice:333", 7)
	h.want("count", true, "alice=1@10 bob=1@5 alice=2@10")
	h.want("reduce", false, "alice=alice:1@10 bob=bob:22@5 alice=alice:1,alice:333@10")
	h.want("agg", true, "alice=107@10 bob=106@5 alice=116@10")
	// a repartition topic per aggregation, null values included
	if got := len(h.d.Records("topologytest-count-repartition")); got != 4 {
		t.Errorf("repartition topic has %d records, want 4", got)
	}
	counts, err := topologytest.KeyValueStore[string, stream.Timestamped[int64]](h.d, "count")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := counts.Get("alice"); err != nil || !ok || v.Value != 2 || !v.Timestamp.Equal(at(10)) {
		t.Errorf("store count alice = %v %v %v", v, ok, err)
	}
}

func TestTableSourceFilterMapValues(t *testing.T) {
	b := stream.NewBuilder()
	tab := stream.TableFrom(b, str, str, "users", stream.Materialized("users"))
	stream.ToStream(tab).To("all", str, nstr)
	f := tab.Filter(func(_, v string) bool { return v != "bad" })
	stream.ToStream(f).To("filtered", str, nstr)
	m := stream.TableMapValues(f, func(_, v string) int64 { return int64(len(v)) }, i64, stream.Materialized("lens"))
	stream.ToStream(m).To("lens", str, ni64)
	h := run(t, b)
	h.pipe("users", "u1", "ann", 1)
	h.pipe("users", "u2", "bad", 2)
	h.pipe("users", "u1", "<nil>", 3)
	h.pipe("users", "u3", "<nil>", 4)
	h.want("all", false, "u1=ann@1 u2=bad@2 u1=<nil>@3 u3=<nil>@4")
	// without old values, Kafka Streams forwards a tombstone for every filtered-out or
	// deleted value, known or not
	h.want("filtered", false, "u1=ann@1 u2=<nil>@2 u1=<nil>@3 u3=<nil>@4")
	h.want("lens", true, "u1=3@1 u2=<nil>@2 u1=<nil>@3 u3=<nil>@4")
	users, err := topologytest.KeyValueStore[string, stream.Timestamped[string]](h.d, "users")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := users.Get("u1"); ok {
		t.Error("u1 still in the users store after its tombstone")
	}
	if v, ok, _ := users.Get("u2"); !ok || v.Value != "bad" {
		t.Errorf("users u2 = %v %v", v, ok)
	}
}

// A filter whose table sends old values (here for a left join) forwards nothing for a
// value filtered out both before and after, as Kafka Streams: no tombstone.
func TestTableFilterWithOldValuesForwardsNoDoubleNull(t *testing.T) {
	b := stream.NewBuilder()
	l := stream.TableFrom(b, str, str, "l").Filter(func(_, v string) bool { return v != "bad" })
	r := stream.TableFrom(b, str, str, "r")
	j := stream.TableLeftJoin(l, r, func(a string, b *string) string { return a + "+" + *b }, nil)
	stream.ToStream(j).To("out", str, nstr)
	h := run(t, b)
	h.pipe("r", "k", "R", 1)
	h.pipe("l", "k", "bad", 2)
	h.pipe("l", "k", "ok", 3)
	h.pipe("l", "k", "bad", 4)
	h.want("out", false, "k=ok+R@3 k=<nil>@4")
}
