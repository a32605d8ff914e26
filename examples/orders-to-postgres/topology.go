package main

import (
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// OrdersTopic holds the shop's orders: key order ID, value Order (JSON).
const OrdersTopic = "orders"

// Order is an order as the shop writes it.
type Order struct {
	Customer string    `json:"customer"`
	Amount   int64     `json:"amount"` // cents
	Time     time.Time `json:"time"`
}

// Grace is how long after its end a minute still takes late orders; its final count
// is written once stream time passes end + Grace.
const Grace = 10 * time.Second

// Tables the application writes, with what it expects of them (main.go creates them).
const (
	TotalsTable    = "customer_totals"   // customer text primary key, total_cents bigint
	PerMinuteTable = "orders_per_minute" // minute timestamptz primary key, orders bigint
	TotalsDDL      = "CREATE TABLE IF NOT EXISTS " + TotalsTable + " (customer text PRIMARY KEY, total_cents bigint NOT NULL)"
	PerMinuteDDL   = "CREATE TABLE IF NOT EXISTS " + PerMinuteTable + " (minute timestamptz PRIMARY KEY, orders bigint NOT NULL)"
)

func orderTime(r processor.Record[string, Order], _ time.Time) (time.Time, error) {
	return r.Value.Time, nil
}

// Topology builds the shop's running totals per customer and its final order counts
// per minute, both delivered into PostgreSQL by targets joined to eddy's commit.
func Topology(totals sink.Target[string, int64], perMinute sink.Target[window.Windowed[string], int64]) (*topology.Topology, error) {
	b := stream.NewBuilder()
	orders := stream.FromConsumed(b,
		stream.Consume(serde.String(), serde.JSON[Order]()).WithTimestamps(orderTime),
		[]string{OrdersTopic})

	byCustomer := stream.Map(orders, func(_ string, o Order) (string, Order) { return o.Customer, o })
	sums := stream.Aggregate(byCustomer.GroupByKey(serde.String(), serde.JSON[Order]()),
		func() int64 { return 0 },
		func(_ string, o Order, total int64) int64 { return total + o.Amount },
		serde.Int64(), stream.Materialized("customer-totals"))
	stream.NonNull(stream.ToStream(sums)).ToSink(totals, stream.Named("totals-to-postgres"))

	// One key for the whole shop: a count of all orders per minute, final results only.
	all := stream.Map(orders, func(_ string, o Order) (string, Order) { return "shop", o })
	counts := all.GroupByKey(serde.String(), serde.JSON[Order]()).
		WindowedBy(window.Tumbling(time.Minute, Grace)).
		Count(stream.Materialized("orders-per-minute")).
		Suppress(stream.UntilWindowCloses(stream.Unbounded()))
	stream.NonNull(stream.ToStream(counts)).ToSink(perMinute, stream.Named("minutes-to-postgres"))
	return b.Build()
}
