package stream_test

import (
	"fmt"

	"errors"

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
	a := stream.MapValues(br.Get("split-a"), func(_, v string) string { return strings.ToUpper(v) })
	a.Merge([]stream.Stream[string, string]{br.Get("b")}).To("merged", str, str) // the name without the prefix
	br.Get("split-other").To("other", str, str)
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
	for _, c := range []struct {
		name                   string
		opts                   []stream.BuilderOption
		all, filtered, lengths string
	}{
		{
			// Kafka Streams without caching forwards every deletion, and a filter
			// without old values forwards a tombstone for every value it drops
			name: "no caching", opts: []stream.BuilderOption{stream.NoCaching()},
			all:      "u1=ann@1 u2=bad@2 u1=<nil>@3 u3=<nil>@4",
			filtered: "u1=ann@1 u2=<nil>@2 u1=<nil>@3 u3=<nil>@4",
			lengths:  "u1=3@1 u2=<nil>@2 u1=<nil>@3 u3=<nil>@4",
		},
		{
			// with caching, a store drops the deletion of a key it does not hold:
			// u3's at the source, u2's at the lengths (the unmaterialized filter,
			// which keeps no store, still forwards u2's)
			name:     "caching",
			all:      "u1=ann@1 u2=bad@2 u1=<nil>@3",
			filtered: "u1=ann@1 u2=<nil>@2 u1=<nil>@3",
			lengths:  "u1=3@1 u1=<nil>@3",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			testTableSourceFilterMapValues(t, c.opts, c.all, c.filtered, c.lengths)
		})
	}
}

func testTableSourceFilterMapValues(t *testing.T, opts []stream.BuilderOption, all, filtered, lengths string) {
	b := stream.NewBuilder(opts...)
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
	h.want("all", false, all)
	h.want("filtered", false, filtered)
	h.want("lens", true, lengths)
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

func TestToTopicsChoosesPerRecord(t *testing.T) {
	b := stream.NewBuilder()
	s := stream.From(b, str, str, []string{"in"})
	s.ToTopics(func(k, v string) string { return "out-" + v }, []string{"out-a", "out-b"}, str, str)
	h := run(t, b)
	h.pipe("in", "k1", "a", 1)
	h.pipe("in", "k2", "b", 2)
	h.pipe("in", "k3", "a", 3)
	h.want("out-a", false, "k1=a@1 k3=a@3")
	h.want("out-b", false, "k2=b@2")
	err := h.d.PipeRaw("in", []byte("k4"), []byte("c"), nil, at(4))
	if err == nil || !strings.Contains(err.Error(), `"out-c" is not one of the declared topics`) {
		t.Errorf("undeclared topic: err = %v", err)
	}
}

func TestNonNullAndFromNode(t *testing.T) {
	b := stream.NewBuilder()
	topology.AddSource(b.Topology(), "raw", str, nstr, "in")
	s := stream.FromNode[string, *string](b, "raw")
	stream.NonNull(s).To("out", str, str)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := &harness{t: t, d: d}
	h.pipe("in", "k1", "x", 1)
	h.pipe("in", "k2", "<nil>", 2)
	h.pipe("in", "k3", "", 3)
	h.want("out", false, "k1=x@1 k3=@3")
}

// Joins record their topics as a co-partitioning group; CheckCopartitioning names both
// topics and their partition counts when they differ.
func TestCopartitioningChecked(t *testing.T) {
	b := stream.NewBuilder()
	clicks := stream.From(b, str, str, []string{"clicks"})
	users := stream.TableFrom(b, str, str, "users")
	stream.Join(clicks, users, func(c, u string) string { return c + u }).To("out", str, str)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if g := topo.CopartitionGroups(); len(g) != 1 || !slices.Equal(g[0], []string{"clicks", "users"}) {
		t.Fatalf("co-partitioning groups %q", g)
	}
	counts := map[string]int32{"clicks": 4, "users": 6}
	err = topo.CheckCopartitioning(func(topic string) (int32, error) { return counts[topic], nil })
	if !errors.Is(err, topology.ErrNotCopartitioned) || !strings.Contains(err.Error(), `topic "clicks" has 4 partitions but "users" has 6`) {
		t.Errorf("err = %v", err)
	}
	counts["users"] = 4
	if err := topo.CheckCopartitioning(func(topic string) (int32, error) { return counts[topic], nil }); err != nil {
		t.Errorf("equal counts: %v", err)
	}
}

// A join after a key change goes through a repartition topic, as in Kafka Streams,
// with the serdes the stream was read with: the join's sub-topology reads it.
func TestJoinAfterKeyChangeRepartitions(t *testing.T) {
	b := stream.NewBuilder()
	clicks := stream.SelectKey(stream.From(b, str, str, []string{"clicks"}), func(_, v string) string { return v })
	users := stream.TableFrom(b, str, str, "users")
	stream.Join(clicks, users, func(c, u string) string { return c + "@" + u }).To("out", str, str)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if len(subs) != 2 || !slices.Equal(subs[0].RepartitionSinks, []string{"KSTREAM-KEY-SELECT-0000000001-join"}) ||
		!slices.Equal(subs[1].Repartitions, []string{"KSTREAM-KEY-SELECT-0000000001-join"}) || !slices.Equal(subs[1].SourceTopics, []string{"users"}) {
		t.Fatalf("sub-topologies %+v", subs)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := &harness{t: t, d: d}
	h.pipe("users", "u1", "Ann", 1)
	h.pipe("clicks", "c1", "u1", 2)
	h.pipe("clicks", "c2", "u2", 3)
	h.want("out", false, "u1=u1@Ann@2")
}

// Without a serde of the stream's values known upstream, the join after a key change
// is refused at Build, naming the fix.
func TestJoinAfterKeyChangeWithoutSerdeRefused(t *testing.T) {
	b := stream.NewBuilder()
	clicks := stream.SelectKey(stream.From(b, str, str, []string{"clicks"}), func(_, v string) string { return v })
	lengths := stream.MapValues(clicks, func(_, v string) int { return len(v) })
	users := stream.TableFrom(b, str, str, "users")
	stream.Join(lengths, users, func(n int, u string) string { return u }).To("out", str, str)
	_, err := b.Build()
	if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), "call Repartition(keys, values) on it first") {
		t.Errorf("err = %v", err)
	}
}

// A stream aggregate re-grouped as a table: the aggregate must send old values, so
// the old count is subtracted (Kafka Streams' count of counts).
func TestStreamAggregateSendsOldValuesToTableGroupBy(t *testing.T) {
	b := stream.NewBuilder()
	counts := stream.From(b, str, str, []string{"w"}).GroupByKey(str, str).Count()
	hist := stream.TableGroupBy(counts, func(w string, n int64) (string, string) { return fmt.Sprint(n), w }, str, str).Count()
	stream.ToStream(hist).To("hist", str, ni64)
	h := run(t, b)
	h.pipe("w", "a", "", 1)
	h.pipe("w", "b", "", 2)
	h.pipe("w", "a", "", 3)
	h.want("hist", true, "1=1@1 1=2@2 1=1@3 2=1@3")
}

// Joining a stream with tables that have no store of their own reads through them:
// a filter, and inner and outer joins of two tables, computed on lookup.
func TestStreamJoinReadsThroughUnmaterializedTables(t *testing.T) {
	b := stream.NewBuilder()
	l := stream.TableFrom(b, str, str, "l")
	r := stream.TableFrom(b, str, str, "r")
	clicks := stream.From(b, str, str, []string{"clicks"})
	orDash := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	j := stream.TableJoin(l, r, func(a, b string) string { return a + "+" + b }, nil)
	o := stream.TableOuterJoin(l, r, func(a, b *string) string { return orDash(a) + "+" + orDash(b) }, nil)
	f := l.Filter(func(_, v string) bool { return v != "x" })
	stream.LeftJoin(clicks, j, func(c string, v *string) string { return c + "/" + orDash(v) }).To("out-j", str, str)
	stream.LeftJoin(clicks, o, func(c string, v *string) string { return c + "/" + orDash(v) }).To("out-o", str, str)
	stream.Join(clicks, f, func(c, v string) string { return c + "/" + v }).To("out-f", str, str)
	h := run(t, b)
	h.pipe("l", "k", "A", 1)
	h.pipe("r", "k", "B", 2)
	h.pipe("clicks", "k", "c1", 3)
	h.pipe("l", "k", "x", 4)
	h.pipe("clicks", "k", "c2", 5)
	h.pipe("r", "k", "<nil>", 6)
	h.pipe("clicks", "k", "c3", 7)
	h.pipe("l", "k", "<nil>", 8)
	h.pipe("clicks", "k", "c4", 9)
	h.pipe("r", "k", "B2", 10)
	h.pipe("clicks", "k", "c5", 11)
	h.want("out-j", false, "k=c1/A+B@3 k=c2/x+B@5 k=c3/-@7 k=c4/-@9 k=c5/-@11")
	h.want("out-o", false, "k=c1/A+B@3 k=c2/x+B@5 k=c3/x+-@7 k=c4/-@9 k=c5/-+B2@11")
	h.want("out-f", false, "k=c1/A@3")
}

// Materialized tables keep their results in stores that tests (and eddy.Query) read.
func TestMaterializedJoinAndMapValues(t *testing.T) {
	b := stream.NewBuilder()
	l := stream.TableFrom(b, str, str, "l")
	r := stream.TableFrom(b, str, str, "r")
	stream.TableJoin(l, r, func(a, b string) string { return a + b }, str, stream.Materialized("joined"))
	stream.TableMapValues(l, func(_, v string) int64 { return int64(len(v)) }, i64, stream.Materialized("lens"))
	h := run(t, b)
	h.pipe("l", "k", "AA", 1)
	h.pipe("r", "k", "B", 5)
	joined, err := topologytest.KeyValueStore[string, stream.Timestamped[string]](h.d, "joined")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := joined.Get("k"); err != nil || !ok || v.Value != "AAB" || !v.Timestamp.Equal(at(5)) {
		t.Errorf("joined k = %v %v %v, want AAB at 5 ms", v, ok, err)
	}
	h.pipe("r", "k", "<nil>", 6)
	if _, ok, _ := joined.Get("k"); ok {
		t.Error("joined k is still there after r's tombstone")
	}
	lens, _ := topologytest.KeyValueStore[string, stream.Timestamped[int64]](h.d, "lens")
	if v, ok, _ := lens.Get("k"); !ok || v.Value != 2 {
		t.Errorf("lens k = %v %v", v, ok)
	}
}

// A materialized table operation takes the old value from its own store when a
// downstream operation needs old values.
func TestMaterializedFilterSendsOldValuesFromItsStore(t *testing.T) {
	b := stream.NewBuilder()
	f := stream.TableFrom(b, str, str, "l").Filter(func(_, v string) bool { return v != "x" }, stream.Materialized("kept"))
	byValue := stream.TableGroupBy(f, func(k, v string) (string, string) { return v, k }, str, str).Count()
	stream.ToStream(byValue).To("out", str, ni64)
	h := run(t, b)
	h.pipe("l", "k", "A", 1)
	h.pipe("l", "k", "B", 2)
	h.pipe("l", "k", "x", 3)
	h.want("out", true, "A=1@1 A=0@2 B=1@2 B=0@3")
}

// ToTable keeps the latest value per key; nil deletes; after a key change it reads
// through a repartition topic.
func TestToTable(t *testing.T) {
	b := stream.NewBuilder()
	s := stream.From(b, str, nstr, []string{"in"})
	byValue := stream.SelectKey(s, func(k string, v *string) string {
		if v == nil {
			return k
		}
		return *v
	})
	tab := stream.ToTable(byValue, str, str, stream.Materialized("latest"))
	stream.ToStream(tab).To("out", str, nstr)
	h := run(t, b)
	h.pipe("in", "k1", "a", 1)
	h.pipe("in", "k2", "a", 2)
	h.pipe("in", "x", "<nil>", 3)
	h.want("out", false, "a=a@1 a=a@2") // the (cached) table holds no x to delete
	latest, err := topologytest.KeyValueStore[string, stream.Timestamped[string]](h.d, "latest")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := latest.Get("a"); !ok || !v.Timestamp.Equal(at(2)) {
		t.Errorf("latest a = %v %v", v, ok)
	}
	if reparts := len(h.d.Records("topologytest-KSTREAM-TOTABLE-REPARTITION-0000000002-repartition")); reparts != 3 {
		t.Errorf("%d records went through the repartition topic, want 3", reparts)
	}
}

// A processor-API node reads a DSL table's store as Timestamped values.
func TestProcessorAPIReadsDSLStore(t *testing.T) {
	b := stream.NewBuilder()
	users := stream.TableFrom(b, str, str, "users", stream.Materialized("users"))
	clicks := stream.From(b, str, str, []string{"clicks"})
	out := stream.Process(clicks, processor.Supplier[string, string, string, string](func() processor.Processor[string, string, string, string] {
		return &userLookup{}
	}), []string{users.StoreName()})
	out.To("out", str, str)
	h := run(t, b)
	h.pipe("users", "u1", "Ann", 7)
	h.pipe("clicks", "u1", "c", 9)
	h.want("out", false, "u1=Ann@7@9")
}

type userLookup struct {
	ctx   processor.Context[string, string]
	users interface {
		Get(string) (stream.Timestamped[string], bool, error)
	}
}

func (p *userLookup) Init(ctx processor.Context[string, string]) (err error) {
	p.ctx = ctx
	p.users, err = processor.KeyValueStore[string, stream.Timestamped[string]](ctx, "users")
	return err
}

func (p *userLookup) Process(r processor.Record[string, string]) error {
	u, _, err := p.users.Get(r.Key)
	if err != nil {
		return err
	}
	return p.ctx.Forward(processor.WithValue(r, fmt.Sprintf("%s@%d", u.Value, u.Timestamp.Sub(t0).Milliseconds())))
}

func (p *userLookup) Close() error { return nil }

// A foreign-key join's result keeps a store when an operation downstream needs old
// values (here a re-grouping), as Kafka Streams materializes it; without a value serde
// Build says what to pass.
func TestForeignKeyJoinResultMaterializedOnDemand(t *testing.T) {
	build := func(values serde.Serde[string]) *stream.Builder {
		b := stream.NewBuilder()
		orders := stream.TableFrom(b, str, str, "orders")
		products := stream.TableFrom(b, str, str, "products")
		j := stream.ForeignKeyJoin(orders, products, func(o string) string { p, _, _ := strings.Cut(o, ":"); return p },
			func(o, p string) string { return p }, values)
		byName := stream.TableGroupBy(j, func(k, v string) (string, string) { return v, k }, str, str).Count()
		stream.ToStream(byName).To("out", str, ni64)
		return b
	}
	if _, err := build(nil).Build(); err == nil || !strings.Contains(err.Error(), "pass the value serde") {
		t.Errorf("Build without the value serde: %v", err)
	}
	h := run(t, build(str))
	h.pipe("products", "p1", "Pen", 1)
	h.pipe("orders", "o1", "p1:2", 2)
	h.pipe("products", "p1", "Ink", 3)
	h.want("out", true, "Pen=1@2 Pen=0@3 Ink=1@3")
}

// A stream joined with a foreign-key join's result looks it up in a store made for it.
func TestStreamJoinWithForeignKeyJoinResult(t *testing.T) {
	b := stream.NewBuilder()
	orders := stream.TableFrom(b, str, str, "orders")
	products := stream.TableFrom(b, str, str, "products")
	j := stream.ForeignKeyJoin(orders, products, func(o string) string { p, _, _ := strings.Cut(o, ":"); return p },
		func(o, p string) string { return o + "/" + p }, str)
	stream.Join(stream.From(b, str, str, []string{"events"}), j, func(e, v string) string { return e + "=" + v }).To("out", str, str)
	h := run(t, b)
	h.pipe("products", "p1", "Pen", 1)
	h.pipe("orders", "o1", "p1:2", 2)
	h.pipe("events", "o1", "shipped", 3)
	h.want("out", false, "o1=shipped=p1:2/Pen@3")
}

func TestStoreOptionOnStatelessOperationIsReported(t *testing.T) {
	b := stream.NewBuilder()
	stream.From(b, str, str, []string{"in"}).Filter(func(string, string) bool { return true }, stream.Materialized("x")).To("out", str, str)
	_, err := b.Build()
	if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), "KSTREAM-FILTER-0000000001: Materialized, InMemory, WithoutChangelog and WithoutCaching apply to operations that make a table") {
		t.Errorf("err = %v", err)
	}
}

// A source table gets a store only when something needs it, as in Kafka Streams.
func TestSourceTableMaterializedOnlyWhenNeeded(t *testing.T) {
	stores := func(b *stream.Builder) []string {
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range topo.Subtopologies() {
			out = append(out, st.Stores...)
		}
		return out
	}
	b := stream.NewBuilder()
	stream.ToStream(stream.TableFrom(b, str, str, "t").Filter(func(_, v string) bool { return v != "" })).To("out", str, nstr)
	if got := stores(b); len(got) != 0 {
		t.Errorf("a table only streamed on has stores %q", got)
	}
	b = stream.NewBuilder()
	f := stream.TableFrom(b, str, str, "t").Filter(func(_, v string) bool { return v != "" })
	stream.Join(stream.From(b, str, str, []string{"s"}), f, func(a, b string) string { return a + b }).To("out", str, str)
	if got := stores(b); !slices.Equal(got, []string{"t-STATE-STORE-0000000002"}) {
		t.Errorf("a table looked up through a filter has stores %q", got)
	}
}

// WithoutCaching turns caching off for one table.
func TestWithoutCachingPerTable(t *testing.T) {
	b := stream.NewBuilder()
	stream.ToStream(stream.TableFrom(b, str, str, "a", stream.Materialized("a"))).To("out-a", str, nstr)
	stream.ToStream(stream.TableFrom(b, str, str, "b", stream.Materialized("b"), stream.WithoutCaching())).To("out-b", str, nstr)
	h := run(t, b)
	h.pipe("a", "k", "<nil>", 1)
	h.pipe("b", "k", "<nil>", 2)
	h.want("out-a", false, "")
	h.want("out-b", false, "k=<nil>@2")
}

// A cached aggregate, join result or foreign-key join result drops a deletion of a key it
// does not hold; without caching it forwards it.
func TestCachedResultsDropDeletionsOfAbsentKeys(t *testing.T) {
	for _, caching := range []bool{true, false} {
		t.Run(fmt.Sprint("caching=", caching), func(t *testing.T) {
			var opts []stream.BuilderOption
			if !caching {
				opts = append(opts, stream.NoCaching())
			}
			b := stream.NewBuilder(opts...)
			// an aggregate that is null (deleted) for the value "del"
			agg := stream.Aggregate(stream.From(b, str, str, []string{"s"}).GroupByKey(str, str),
				func() *string { return nil },
				func(_ string, v string, _ *string) *string {
					if v == "del" {
						return nil
					}
					return &v
				}, nstr, stream.Materialized("agg"))
			stream.ToStream(agg).To("out-agg", str, serde.Nullable(nstr))
			// a join whose joiner gives null for "skip"
			l := stream.TableFrom(b, str, str, "l")
			r := stream.TableFrom(b, str, str, "r")
			j := stream.TableJoin(l, r, func(a, b string) *string {
				if a == "skip" {
					return nil
				}
				s := a + b
				return &s
			}, nstr, stream.Materialized("joined"))
			stream.ToStream(j).To("out-join", str, serde.Nullable(nstr))
			// a foreign-key join: deleting an order that never joined answers a tombstone
			fk := stream.ForeignKeyJoin(l, r, func(v string) string { return v }, func(a, b string) string { return a + b },
				str, stream.Materialized("fk"))
			stream.ToStream(fk).To("out-fk", str, nstr)
			// a table aggregate whose adder gives null for "del"
			g := stream.TableGroupBy(stream.TableFrom(b, str, str, "g"), func(k, v string) (string, string) { return v, k }, str, str)
			tagg := stream.TableAggregate(g, func() *string { return nil },
				func(k, v string, _ *string) *string {
					if k == "del" {
						return nil
					}
					return &v
				},
				func(string, string, *string) *string { return nil }, nstr, stream.Materialized("tagg"))
			stream.ToStream(tagg).To("out-tagg", str, serde.Nullable(nstr))
			h := run(t, b)
			h.pipe("g", "k1", "del", 5)
			h.pipe("s", "k", "del", 1)
			h.pipe("r", "k", "B", 2)
			h.pipe("l", "k", "skip", 3)
			h.pipe("l", "k", "<nil>", 4)
			if caching {
				h.want("out-agg", false, "")
				h.want("out-join", false, "")
				h.want("out-fk", false, "")
				h.want("out-tagg", false, "")
			} else {
				h.want("out-agg", false, "k=<nil>@1")
				h.want("out-join", false, "k=<nil>@3 k=<nil>@4")
				h.want("out-fk", false, "k=<nil>@4")
				h.want("out-tagg", false, "del=<nil>@5")
			}
		})
	}
}

// A table read from a topic restores from the topic: its store writes no changelog
// (Kafka Streams' reuse.ktable.source.topics); WithOwnChangelog and a table made from a
// stream keep one.
func TestSourceTableWritesNoChangelog(t *testing.T) {
	for _, own := range []bool{false, true} {
		b := stream.NewBuilder()
		var opts []stream.Option
		if own {
			opts = append(opts, stream.WithOwnChangelog())
		}
		users := stream.TableFrom(b, str, str, "users", append(opts, stream.Materialized("users"))...)
		stream.ToStream(users).To("users-out", str, nstr)
		h := run(t, b)
		h.pipe("users", "u1", "Ann", 1)
		h.pipe("users", "u1", "<nil>", 2)
		n := len(h.d.Records(h.d.ChangelogTopic("users")))
		if own && n != 2 || !own && n != 0 {
			t.Errorf("WithOwnChangelog %v: %d changelog records", own, n)
		}
		h.want("users-out", false, "u1=Ann@1 u1=<nil>@2")
	}
}
