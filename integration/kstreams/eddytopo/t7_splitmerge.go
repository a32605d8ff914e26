package eddytopo

import (
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// splitMerge is T7: "events" split into branch a (value starts with "a"), b (starts
// with "b") and the default; a upper-cased and merged with b → "merged"; default →
// "other". Null values go to the default branch.
func splitMerge(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	events := stream.From(b, str, nstr, []string{"events"})
	has := func(p string) func(string, *string) bool {
		return func(_ string, v *string) bool { return v != nil && strings.HasPrefix(*v, p) }
	}
	br := events.Split(stream.Named("split-")).Branch("a", has("a")).Branch("b", has("b")).DefaultBranch("default")
	upper := stream.MapValues(br.Get("split-a"), func(_ string, v *string) *string { u := strings.ToUpper(*v); return &u })
	upper.Merge([]stream.Stream[string, *string]{br.Get("split-b")}).To("merged", str, nstr)
	br.Get("split-default").To("other", str, nstr)
	return b.Build()
}
