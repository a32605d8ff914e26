package main

import "time"

// sampleStart is the time of the first sample order.
var sampleStart = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// sampleOrder is an order of the sample input, keyed by its ID.
type sampleOrder struct {
	id    string
	order Order
}

func order(id, customer string, cents int64, after time.Duration) sampleOrder {
	return sampleOrder{id, Order{Customer: customer, Amount: cents, Time: sampleStart.Add(after)}}
}

// sampleStep is a batch of the sample input: the command writes one, waits until the
// application has processed it, then writes the next, so that each order meets the
// customers table as it was when the order came.
type sampleStep struct {
	customers map[string]Customer
	orders    []sampleOrder
}

// sampleInput: three customers, then orders over three minutes (one from an unknown
// customer, one late into the first minute), then a customer who moves, then more
// orders.
var sampleInput = []sampleStep{
	{customers: map[string]Customer{
		"c1": {Name: "Ada Lovelace", City: "London"},
		"c2": {Name: "Alan Turing", City: "Manchester"},
		"c3": {Name: "Grace Hopper", City: "New York"},
	}},
	{orders: []sampleOrder{
		order("o1", "c1", 1250, 5*time.Second),
		order("o2", "c2", 899, 40*time.Second),
		order("o3", "c1", 4500, 70*time.Second),
		order("o4", "c4", 2000, 90*time.Second),
		order("o5", "c3", 1575, 119*time.Second),
	}},
	{customers: map[string]Customer{"c1": {Name: "Ada Lovelace", City: "Cambridge"}}},
	{orders: []sampleOrder{
		order("o6", "c2", 101, 120*time.Second),
		order("o7", "c1", 250, 165*time.Second),
		order("o8", "c3", 10000, 50*time.Second),
	}},
}
