package eddytopo

import (
	"strconv"
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// tableGroupBy is T6: table "assign" <user, "region:amount"> grouped by region with the
// amount as value: aggregate(0, +, -) → "region-sum"; count → "region-count";
// reduce(+, -) → "region-reduce".
func tableGroupBy(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	assign := stream.TableFrom(b, str, str, "assign")
	g := stream.TableGroupBy(assign, func(_, v string) (string, int64) {
		region, amount, _ := strings.Cut(v, ":")
		n, _ := strconv.ParseInt(amount, 10, 64)
		return region, n
	}, str, i64)
	sum := stream.TableAggregate(g, func() int64 { return 0 },
		func(_ string, v, agg int64) int64 { return agg + v },
		func(_ string, v, agg int64) int64 { return agg - v }, i64)
	stream.ToStream(sum).To("region-sum", str, ni64)
	stream.ToStream(g.Count()).To("region-count", str, ni64)
	red := g.Reduce(func(a, v int64) int64 { return a + v }, func(a, v int64) int64 { return a - v })
	stream.ToStream(red).To("region-reduce", str, ni64)
	return b.Build()
}
