package eddytopo

import (
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

func orDash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// tableTable is T4: tables "left-t" and "right-t", joiner (a or "-") + "+" + (b or "-");
// join → "tt-inner", leftJoin → "tt-left", outerJoin → "tt-outer".
func tableTable(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	l := stream.TableFrom(b, str, str, "left-t")
	r := stream.TableFrom(b, str, str, "right-t")
	inner := stream.TableJoin(l, r, func(a, b string) string { return a + "+" + b }, nil)
	stream.ToStream(inner).To("tt-inner", str, nstr)
	left := stream.TableLeftJoin(l, r, func(a string, b *string) string { return a + "+" + orDash(b) }, nil)
	stream.ToStream(left).To("tt-left", str, nstr)
	outer := stream.TableOuterJoin(l, r, func(a, b *string) string { return orDash(a) + "+" + orDash(b) }, nil)
	stream.ToStream(outer).To("tt-outer", str, nstr)
	return b.Build()
}
