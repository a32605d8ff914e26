package eddytopo

import (
	"regexp"
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// nonWord is Java's "\\W+": runs of characters other than [a-zA-Z0-9_].
var nonWord = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// WordCount is T1: "wc-in" → flatMapValues(lower-case split on \W+, empty dropped;
// null → nothing) → groupBy(word) → count → toStream → "wc-out" <String, Long>.
func WordCount() (*topology.Topology, error) {
	b := stream.NewBuilder()
	lines := stream.From(b, str, nstr, []string{"wc-in"})
	words := stream.FlatMapValues(lines, func(_ string, v *string) []string {
		if v == nil {
			return nil
		}
		var out []string
		for _, w := range nonWord.Split(strings.ToLower(*v), -1) {
			if w != "" {
				out = append(out, w)
			}
		}
		return out
	})
	counts := stream.GroupBy(words, func(_, w string) string { return w }, str, str).Count()
	stream.ToStream(counts).To("wc-out", str, ni64)
	return b.Build()
}
