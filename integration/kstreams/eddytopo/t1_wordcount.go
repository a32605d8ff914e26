package eddytopo

import (
	"github.com/eddy-streams/eddy/integration/kstreams"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// wordCount is T1: "wc-in" → flatMapValues(lower-case split on \W+, empty dropped;
// null → nothing) → groupBy(word) → count → toStream → "wc-out" <String, Long>.
func wordCount(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	lines := stream.From(b, str, nstr, []string{"wc-in"})
	words := stream.FlatMapValues(lines, func(_ string, v *string) []string {
		if v == nil {
			return nil
		}
		// Java's v.toLowerCase().split("\\W+"), "İ" included (Go lower-cases it to "i"
		// alone, Java to "i" and U+0307, a separator).
		return kstreams.Words(*v)
	})
	counts := stream.GroupBy(words, func(_, w string) string { return w }, str, str).Count()
	stream.ToStream(counts).To("wc-out", str, ni64)
	return b.Build()
}
