package eddytopo

import (
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// rekeyJoin is T10: stream "r-orders" values "user:amount" re-keyed by the user (the key
// for nil or a value without ':') and joined with table "r-users" (v + "@" + u) →
// "r-joined". The join repartitions the stream first, as Kafka Streams does.
func rekeyJoin(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	users := stream.TableFrom(b, str, str, "r-users", stream.Materialized("r-users"))
	orders := stream.SelectKey(stream.From(b, str, nstr, []string{"r-orders"}), func(k string, v *string) string {
		if v == nil {
			return k
		}
		if u, _, ok := strings.Cut(*v, ":"); ok {
			return u
		}
		return k
	})
	stream.Join(orders, users, func(v *string, u string) string { return *v + "@" + u }).To("r-joined", str, str)
	return b.Build()
}
