package eddytopo

import (
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// fkJoin is T5: table "fk-orders" <orderId, "productId:qty"> joined by foreign key
// (the text before ':') with table "fk-products" <productId, name>; joiner
// o + "/" + (p or "-"); join → "fk-inner", leftJoin → "fk-left".
func fkJoin(opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	orders := stream.TableFrom(b, str, str, "fk-orders")
	products := stream.TableFrom(b, str, str, "fk-products")
	product := func(o string) string { p, _, _ := strings.Cut(o, ":"); return p }
	inner := stream.ForeignKeyJoin(orders, products, product, func(o, p string) string { return o + "/" + p }, nil)
	stream.ToStream(inner).To("fk-inner", str, nstr)
	left := stream.ForeignKeyLeftJoin(orders, products, product, func(o string, p *string) string { return o + "/" + orDash(p) }, nil)
	stream.ToStream(left).To("fk-left", str, nstr)
	return b.Build()
}
