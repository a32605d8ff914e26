package eddytopo

import (
	"strconv"
	"strings"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// rekeyAgg is T2: "orders" values "customer:amount" or null → selectKey(customer, or
// the key for null) → mapValues(amount) → groupByKey → reduce(sum) → "orders-total",
// count → "orders-count", aggregate("", agg + v + ";") → "orders-agg".
func rekeyAgg(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	orders := stream.From(b, str, nstr, []string{"orders"})
	keyed := stream.SelectKey(orders, func(k string, v *string) string {
		if v == nil {
			return k
		}
		c, _, _ := strings.Cut(*v, ":")
		return c
	})
	amounts := stream.MapValues(keyed, func(_ string, v *string) *int64 {
		if v == nil {
			return nil
		}
		_, a, _ := strings.Cut(*v, ":")
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return nil // the harness only makes decimal amounts
		}
		return &n
	})
	g := amounts.GroupByKey(str, ni64)
	total := g.Reduce(func(a, v *int64) *int64 { s := *a + *v; return &s })
	stream.ToStream(total).To("orders-total", str, serde.Nullable(ni64))
	stream.ToStream(g.Count()).To("orders-count", str, ni64)
	agg := stream.Aggregate(g, func() string { return "" }, func(_ string, v *int64, agg string) string {
		return agg + strconv.FormatInt(*v, 10) + ";"
	}, str)
	stream.ToStream(agg).To("orders-agg", str, nstr)
	return b.Build()
}
