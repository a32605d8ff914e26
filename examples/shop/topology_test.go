package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// Hand-computed results of the sample input (sample.go).
var (
	// wantTotalUpdates: each order adds its amount to its customer's running total.
	wantTotalUpdates = []string{"c1=1250", "c2=899", "c1=5750", "c4=2000", "c3=1575", "c2=1000", "c1=6000", "c3=11575"}
	wantTotals       = map[string]int64{"c1": 6000, "c2": 1000, "c3": 11575, "c4": 2000}
	// wantEnriched: each order with its customer as known when it came (c1 moved to
	// Cambridge between o5 and o6; c4 is unknown).
	wantEnriched = []string{
		"c1/o1 12.50 Ada Lovelace London", "c2/o2 8.99 Alan Turing Manchester", "c1/o3 45.00 Ada Lovelace London",
		"c4/o4 20.00  ", "c3/o5 15.75 Grace Hopper New York", "c2/o6 1.01 Alan Turing Manchester",
		"c1/o7 2.50 Ada Lovelace Cambridge", "c3/o8 100.00 Grace Hopper New York",
	}
	// wantMinuteUpdates: o8 is late, into the first minute.
	wantMinuteUpdates = []string{
		"10:00=1", "10:00=2", "10:01=1", "10:01=2", "10:01=3", "10:02=1", "10:02=2", "10:00=3",
	}
	wantPerMinute = map[string]int64{"2026-12-01T10:00": 3, "2026-12-01T10:01": 3, "2026-12-01T10:02": 2}
)

func (e EnrichedOrder) String() string {
	return fmt.Sprintf("%s/%s %s %s %s", e.Customer, e.ID, cents(e.Amount), e.Name, e.City)
}

func TestTopologyOnTheSample(t *testing.T) {
	topo, err := Topology()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	customers := topologytest.NewInputTopic(d, CustomersTopic, serde.String(), serde.JSON[Customer]())
	orders := topologytest.NewInputTopic(d, OrdersTopic, serde.String(), serde.JSON[Order]())
	for _, step := range sampleInput {
		for _, id := range sortedKeys(step.customers) {
			if err := customers.PipeAt(id, step.customers[id], sampleStart); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range step.orders {
			if err := orders.PipeAt(o.id, o.order, o.order.Time); err != nil {
				t.Fatal(err)
			}
		}
	}

	totals, err := topologytest.NewOutputTopic(d, TotalsTopic, serde.String(), serde.Int64()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range totals {
		got = append(got, fmt.Sprintf("%s=%d", r.Key, r.Value))
	}
	if !slices.Equal(got, wantTotalUpdates) {
		t.Errorf("total updates:\n got %v\nwant %v", got, wantTotalUpdates)
	}
	// An aggregate carries the largest timestamp of its inputs: c3's last update (o8,
	// at 10:00:50) keeps o5's 10:01:59.
	if last := totals[len(totals)-1]; !last.Timestamp.Equal(sampleStart.Add(119 * time.Second)) {
		t.Errorf("c3's last total at %v, want 10:01:59", last.Timestamp)
	}

	enriched, err := topologytest.NewOutputTopic(d, EnrichedTopic, serde.String(), serde.JSON[EnrichedOrder]()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, r := range enriched {
		if r.Key != r.Value.Customer || !r.Timestamp.Equal(r.Value.Time) {
			t.Errorf("enriched %v: key %q, timestamp %v", r.Value, r.Key, r.Timestamp)
		}
		got = append(got, r.Value.String())
	}
	if !slices.Equal(got, wantEnriched) {
		t.Errorf("enriched:\n got %q\nwant %q", got, wantEnriched)
	}

	perMinute, err := topologytest.NewOutputTopic(d, PerMinuteTopic, serde.String(), serde.Int64()).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, r := range perMinute {
		got = append(got, fmt.Sprintf("%s=%d", strings.TrimPrefix(r.Key, "2026-12-01T"), r.Value))
	}
	if !slices.Equal(got, wantMinuteUpdates) {
		t.Errorf("per-minute updates:\n got %v\nwant %v", got, wantMinuteUpdates)
	}

	// The totals are a table: its store answers by customer.
	store, err := topologytest.KeyValueStore[string, stream.Timestamped[int64]](d, TotalsStore)
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range wantTotals {
		v, ok, err := store.Get(c)
		if err != nil || !ok || v.Value != want {
			t.Errorf("store %s: %s = %+v, %v, %v; want %d", TotalsStore, c, v, ok, err, want)
		}
	}
}
