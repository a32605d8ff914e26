package stream_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// Enrich orders from a global table of products, joined by a field of the order (no
// co-partitioning), with each order's own event time as its timestamp.
func ExampleGlobalJoin() {
	type order struct {
		Product string `json:"product"`
		AtMS    int64  `json:"at_ms"`
	}
	b := stream.NewBuilder()
	products := stream.GlobalTableFrom(b, serde.String(), serde.String(), "products", stream.Materialized("products"))
	orders := stream.FromConsumed(b, stream.Consume(serde.String(), serde.JSON[order]()).
		WithTimestamps(func(r processor.Record[string, order], _ time.Time) (time.Time, error) {
			return time.UnixMilli(r.Value.AtMS), nil
		}), []string{"orders"})
	stream.GlobalLeftJoin(orders, products,
		func(_ string, o order) (string, bool) { return o.Product, o.Product != "" },
		func(id string, o order, name *string) string {
			if name == nil {
				return id + ": unknown product " + o.Product
			}
			return id + ": " + *name
		}).To("enriched", serde.String(), serde.String())
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	_ = topologytest.NewInputTopic(d, "products", serde.String(), serde.String()).Pipe("p1", "pen")
	in := topologytest.NewInputTopic(d, "orders", serde.String(), serde.JSON[order]())
	_ = in.Pipe("o1", order{Product: "p1", AtMS: 1000})
	_ = in.Pipe("o2", order{Product: "p2", AtMS: 2000})
	recs, _ := topologytest.NewOutputTopic(d, "enriched", serde.String(), serde.String()).ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Value, "at", r.Timestamp.UnixMilli())
	}
	// Output:
	// o1: pen at 1000
	// o2: unknown product p2 at 2000
}
