package eddytopo

import (
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// globalJoin is T9: stream "g-clicks" with values "user:item" joined with the global
// table "g-users" by the user (nil for a nil value or one without ':'): join v + "@" + u
// → "g-inner"; leftJoin v + "@" + (u or "-") → "g-left".
func globalJoin(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	users := stream.GlobalTableFrom(b, str, str, "g-users")
	clicks := stream.From(b, str, nstr, []string{"g-clicks"})
	user := func(_ string, v *string) (string, bool) {
		if v == nil {
			return "", false
		}
		u, _, ok := strings.Cut(*v, ":")
		return u, ok
	}
	stream.GlobalJoin(clicks, users, user, func(_ string, v *string, u string) string { return *v + "@" + u }).To("g-inner", str, str)
	stream.GlobalLeftJoin(clicks, users, user, func(_ string, v *string, u *string) string {
		if u == nil {
			return *v + "@-"
		}
		return *v + "@" + *u
	}).To("g-left", str, str)
	return b.Build()
}
