package eddytopo

import (
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// finalResults is W5: "fin-in" → groupByKey → tumbling 10 s windows, grace 5 s → count
// → suppress(untilWindowCloses(unbounded)) → "fin-tumble"; hopping 30 s windows every
// 10 s, grace 10 s → aggregate("", agg + v + ";") → suppress(untilWindowCloses(
// maxRecords(1000).shutDownWhenFull)) → "fin-hop".
func finalResults(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	g := stream.From(b, str, nstr, []string{"fin-in"}).GroupByKey(str, nstr)
	counts := g.WindowedBy(window.Tumbling(10*time.Second, 5*time.Second)).Count().
		Suppress(stream.UntilWindowCloses(stream.Unbounded()))
	stream.ToStream(counts).To("fin-tumble", window.TimeWindowedSerde(str, 10*time.Second), ni64)
	hops := stream.WindowedAggregate(g.WindowedBy(window.Hopping(30*time.Second, 10*time.Second, 10*time.Second)),
		func() string { return "" },
		func(_ string, v *string, agg string) string { return agg + show(v) + ";" }, str).
		Suppress(stream.UntilWindowCloses(stream.MaxRecords(1000).ShutDownWhenFull()))
	stream.ToStream(hops).To("fin-hop", window.TimeWindowedSerde(str, 30*time.Second), nstr)
	return b.Build()
}

// finalSessions is W6: "fin-sess-in" → groupByKey → sessions of gap 5 s, grace 5 s,
// stores kept 2 minutes → count → suppress(untilWindowCloses(unbounded)) →
// "fin-session-count"; aggregate("", agg + v + ";", merge a + b) → suppress → (named
// "fin-sess-agg-suppress") "fin-session-agg".
func finalSessions(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	w := stream.From(b, str, nstr, []string{"fin-sess-in"}).GroupByKey(str, nstr).
		WindowedBySession(window.Sessions(5*time.Second, 5*time.Second))
	counts := w.Count(stream.Retention(2 * time.Minute)).Suppress(stream.UntilWindowCloses(stream.Unbounded()))
	stream.ToStream(counts).To("fin-session-count", window.SessionWindowedSerde(str), ni64)
	agg := stream.SessionAggregate(w, func() string { return "" },
		func(_ string, v *string, agg string) string { return agg + show(v) + ";" },
		func(_ string, a, c string) string { return a + c },
		str, stream.Retention(2*time.Minute)).
		Suppress(stream.UntilWindowCloses(stream.Unbounded()), stream.Named("fin-sess-agg-suppress"))
	stream.ToStream(agg).To("fin-session-agg", window.SessionWindowedSerde(str), nstr)
	return b.Build()
}

// emitOnClose is W7: "close-in" → groupByKey, emitStrategy(onWindowClose), stores kept
// 2 minutes → tumbling 10 s windows, grace 5 s → count → "close-tumble"; sliding
// windows of 10 s, grace 5 s → count → "close-slide"; sessions of gap 5 s, grace 5 s →
// count → "close-session". (The retention is explicit: with the least one a window
// has expired from Kafka Streams' in-memory stores by the time it closes; see
// stream.TimeWindowedStream.Emit.)
func emitOnClose(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	g := stream.From(b, str, nstr, []string{"close-in"}).GroupByKey(str, nstr)
	keep := stream.Retention(2 * time.Minute)
	tumble := g.WindowedBy(window.Tumbling(10*time.Second, 5*time.Second)).Emit(stream.OnWindowClose).Count(keep)
	stream.ToStream(tumble).To("close-tumble", window.TimeWindowedSerde(str, 10*time.Second), ni64)
	slide := g.WindowedBySliding(window.Sliding(10*time.Second, 5*time.Second)).Emit(stream.OnWindowClose).Count(keep)
	stream.ToStream(slide).To("close-slide", window.TimeWindowedSerde(str, 10*time.Second), ni64)
	sess := g.WindowedBySession(window.Sessions(5*time.Second, 5*time.Second)).Emit(stream.OnWindowClose).Count(keep)
	stream.ToStream(sess).To("close-session", window.SessionWindowedSerde(str), ni64)
	return b.Build()
}

// timeLimited is W8: "limit-in" → groupByKey → count → suppress(untilTimeLimit(10 s,
// maxRecords(2).emitEarlyWhenFull)) → "limit-count"; the stream as a table (toTable,
// tombstones delete) → suppress(untilTimeLimit(5 s, maxRecords(3).emitEarlyWhenFull))
// → "limit-table".
func timeLimited(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	in := stream.From(b, str, nstr, []string{"limit-in"})
	counts := in.GroupByKey(str, nstr).Count().
		Suppress(stream.UntilTimeLimit(10*time.Second, stream.MaxRecords(2).EmitEarlyWhenFull()))
	stream.ToStream(counts).To("limit-count", str, ni64)
	tab := stream.ToTable(in, str, serde.String()).
		Suppress(stream.UntilTimeLimit(5*time.Second, stream.MaxRecords(3).EmitEarlyWhenFull()))
	stream.ToStream(tab).To("limit-table", str, nstr)
	return b.Build()
}
