package eddytopo

import (
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// show is Java's string concatenation of a possibly null string.
func show(v *string) string {
	if v == nil {
		return "null"
	}
	return *v
}

// timeWindows is W1: "win-in" → groupByKey → tumbling 10 s windows, grace 5 s → count →
// "tumble-count"; hopping 30 s windows every 10 s, grace 10 s → aggregate("", agg + v +
// ";") → "hop-agg"; the non-null values → tumbling 10 s windows, no grace → reduce(a + ","
// + b) → "tumble-reduce". Keys are written with TimeWindowedSerde.
func timeWindows(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	in := stream.From(b, str, nstr, []string{"win-in"})
	g := in.GroupByKey(str, nstr)
	counts := g.WindowedBy(window.Tumbling(10*time.Second, 5*time.Second)).Count(stream.Materialized("tumble-count"))
	stream.ToStream(counts).To("tumble-count", window.TimeWindowedSerde(str, 10*time.Second), ni64)
	hops := stream.WindowedAggregate(g.WindowedBy(window.Hopping(30*time.Second, 10*time.Second, 10*time.Second)),
		func() string { return "" },
		func(_ string, v *string, agg string) string { return agg + show(v) + ";" },
		str, stream.Materialized("hop-agg"))
	stream.ToStream(hops).To("hop-agg", window.TimeWindowedSerde(str, 30*time.Second), nstr)
	reduced := in.Filter(func(_ string, v *string) bool { return v != nil }).
		GroupByKey(str, nstr).
		WindowedBy(window.Tumbling(10*time.Second, 0)).
		Reduce(func(a, c *string) *string { s := *a + "," + *c; return &s }, stream.Materialized("tumble-reduce"))
	stream.ToStream(reduced).To("tumble-reduce", window.TimeWindowedSerde(str, 10*time.Second), serde.Nullable(nstr))
	return b.Build()
}

// slidingWindows is W2: "slide-in" → groupByKey → sliding windows of 10 s, grace 5 s →
// count → "slide-count"; aggregate("", agg + v + ";") → "slide-agg".
func slidingWindows(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	w := stream.From(b, str, nstr, []string{"slide-in"}).GroupByKey(str, nstr).
		WindowedBySliding(window.Sliding(10*time.Second, 5*time.Second))
	stream.ToStream(w.Count(stream.Materialized("slide-count"))).To("slide-count", window.TimeWindowedSerde(str, 10*time.Second), ni64)
	agg := stream.WindowedAggregate(w, func() string { return "" },
		func(_ string, v *string, agg string) string { return agg + show(v) + ";" },
		str, stream.Materialized("slide-agg"))
	stream.ToStream(agg).To("slide-agg", window.TimeWindowedSerde(str, 10*time.Second), nstr)
	return b.Build()
}

// sessionWindows is W3: "sess-in" → groupByKey → sessions of gap 5 s, grace 5 s → count
// → "session-count"; aggregate("", agg + v + ";", merge a + b) → "session-agg". Keys are
// written with SessionWindowedSerde.
func sessionWindows(opts ...stream.BuilderOption) (*topology.Topology, error) {
	return sessions("", 0, opts)
}

// sessionsRetained is W4: W3 with stores kept 2 minutes (stream.Retention), outputs
// and stores suffixed "-r".
func sessionsRetained(opts ...stream.BuilderOption) (*topology.Topology, error) {
	return sessions("-r", 2*time.Minute, opts)
}

func sessions(suffix string, retention time.Duration, opts []stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	w := stream.From(b, str, nstr, []string{"sess-in"}).GroupByKey(str, nstr).
		WindowedBySession(window.Sessions(5*time.Second, 5*time.Second))
	storeOpts := func(name string) []stream.Option {
		o := []stream.Option{stream.Materialized(name)}
		if retention > 0 {
			o = append(o, stream.Retention(retention))
		}
		return o
	}
	count := "session-count" + suffix
	stream.ToStream(w.Count(storeOpts(count)...)).To(count, window.SessionWindowedSerde(str), ni64)
	aggName := "session-agg" + suffix
	agg := stream.SessionAggregate(w, func() string { return "" },
		func(_ string, v *string, agg string) string { return agg + show(v) + ";" },
		func(_ string, a, c string) string { return a + c },
		str, storeOpts(aggName)...)
	stream.ToStream(agg).To(aggName, window.SessionWindowedSerde(str), nstr)
	return b.Build()
}
