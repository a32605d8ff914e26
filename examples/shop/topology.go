package main

import (
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// Topics and stores of the shop application.
const (
	OrdersTopic    = "shop-orders"          // key order ID, value Order
	CustomersTopic = "shop-customers"       // key customer ID, value Customer
	TotalsTopic    = "shop-customer-totals" // key customer ID, value int64 cents
	EnrichedTopic  = "shop-orders-enriched" // key customer ID, value EnrichedOrder
	PerMinuteTopic = "shop-orders-per-minute"
	TotalsStore    = "customer-totals"
	PerMinuteStore = "orders-per-minute"
)

// Order is an order as the shop writes it; ID is the record key, filled in on re-keying.
type Order struct {
	ID       string    `json:"id,omitempty"`
	Customer string    `json:"customer"`
	Amount   int64     `json:"amount"` // cents
	Time     time.Time `json:"time"`
}

// Customer is a customer's record.
type Customer struct {
	Name string `json:"name"`
	City string `json:"city"`
}

// EnrichedOrder is an order with its customer's record, as known when the order came.
type EnrichedOrder struct {
	Order
	Name string `json:"name,omitempty"` // empty when the customer is unknown
	City string `json:"city,omitempty"`
}

// Minute is the key of the per-minute count: the order's time, to the minute, in UTC.
func Minute(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }

// Topology builds the shop analytics: orders re-keyed by customer, a running total per
// customer, orders enriched from the customers table, and a count of orders per minute.
func Topology() (*topology.Topology, error) {
	b := stream.NewBuilder()
	orders := stream.From(b, serde.String(), serde.JSON[Order](), []string{OrdersTopic})
	// One repartition topic keyed by customer feeds both the join (which needs it to
	// be co-partitioned with the customers) and the totals.
	byCustomer := stream.Map(orders, func(id string, o Order) (string, Order) {
		o.ID = id
		return o.Customer, o
	}).Repartition(serde.String(), serde.JSON[Order](), stream.Named("orders-by-customer"))

	totals := stream.Aggregate(byCustomer.GroupByKey(serde.String(), serde.JSON[Order]()),
		func() int64 { return 0 },
		func(_ string, o Order, total int64) int64 { return total + o.Amount },
		serde.Int64(), stream.Materialized(TotalsStore))
	stream.ToStream(totals).To(TotalsTopic, serde.String(), serde.Nullable(serde.Int64()))

	customers := stream.TableFrom(b, serde.String(), serde.JSON[Customer](), CustomersTopic)
	stream.LeftJoin(byCustomer, customers, func(o Order, c *Customer) EnrichedOrder {
		e := EnrichedOrder{Order: o}
		if c != nil {
			e.Name, e.City = c.Name, c.City
		}
		return e
	}).To(EnrichedTopic, serde.String(), serde.JSON[EnrichedOrder]())

	// No windows yet: the minute is a key of a plain table (see the README).
	perMinute := stream.GroupBy(orders, func(_ string, o Order) string { return Minute(o.Time) },
		serde.String(), serde.JSON[Order](), stream.Named("orders-by-minute")).
		Count(stream.Materialized(PerMinuteStore))
	stream.ToStream(perMinute).To(PerMinuteTopic, serde.String(), serde.Nullable(serde.Int64()))
	return b.Build()
}
