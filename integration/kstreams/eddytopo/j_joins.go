package eddytopo

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// joins is J1–J4: streams "jl-in" and "jr-in" (String keys and values, tombstones as
// nil) joined within join windows, the joiner rendering a missing side as "-":
// J1 inner join (5 s, 2 s of grace) → "j-inner"; J2 left join → "j-left"; J3 outer
// join → "j-outer"; J4 outer join of windows 2 s before and 6 s after, 1 s of grace →
// "j-asym".
func joins(name string, opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	l := stream.From(b, str, nstr, []string{"jl-in"})
	r := stream.From(b, str, nstr, []string{"jr-in"})
	w := window.JoinTimeDifference(5*time.Second, 2*time.Second)
	j := stream.JoinedWith(str, nstr, nstr)
	or := func(s **string) string {
		if s == nil {
			return "-"
		}
		return **s
	}
	outer := func(a, c **string) string { return or(a) + "+" + or(c) }
	switch name {
	case "J1":
		stream.StreamJoin(l, r, func(a, c *string) string { return *a + "+" + *c }, w, j).To("j-inner", str, str)
	case "J2":
		stream.StreamLeftJoin(l, r, func(a *string, c **string) string { return *a + "+" + or(c) }, w, j).To("j-left", str, str)
	case "J3":
		stream.StreamOuterJoin(l, r, outer, w, j).To("j-outer", str, str)
	case "J4":
		asym := window.JoinTimeDifference(0, time.Second).Before(2 * time.Second).After(6 * time.Second)
		stream.StreamOuterJoin(l, r, outer, asym, j).To("j-asym", str, str)
	default:
		return nil, fmt.Errorf("eddytopo: no join topology %q: the names are J1 to J4", name)
	}
	return b.Build()
}
