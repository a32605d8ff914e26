package eddytopo

import (
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// streamTable is T3: stream "clicks" joined with the materialized table "users":
// join (c + "@" + u) → "clicks-inner"; leftJoin (c + "@" + (u or "-")) → "clicks-left".
func streamTable(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	clicks := stream.From(b, str, nstr, []string{"clicks"})
	users := stream.TableFrom(b, str, str, "users", stream.Materialized("users"))
	stream.Join(clicks, users, func(c *string, u string) string { return *c + "@" + u }).To("clicks-inner", str, str)
	stream.LeftJoin(clicks, users, func(c *string, u *string) string {
		if u == nil {
			return *c + "@-"
		}
		return *c + "@" + *u
	}).To("clicks-left", str, str)
	return b.Build()
}
