package eddytopo_test

import (
	"encoding/binary"
	"fmt"
	"github.com/eddy-streams/eddy/stream"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/kstreams/eddytopo"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// in is an input record: value "<nil>" is a tombstone.
type in struct {
	topic, key, value string
	ms                int64
}

// check pipes the inputs and compares each output topic, rendered "key=value@ms"
// (Long values as numbers).
func check(t *testing.T, build func() (*topology.Topology, error), inputs []in, want map[string]string, longTopics ...string) {
	t.Helper()
	topo, err := build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, r := range inputs {
		var v []byte
		if r.value != "<nil>" {
			v = []byte(r.value)
		}
		if err := d.PipeRaw(r.topic, []byte(r.key), v, nil, t0.Add(time.Duration(r.ms)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	for topic, w := range want {
		long := false
		for _, l := range longTopics {
			long = long || l == topic
		}
		var parts []string
		for _, r := range d.Records(topic) {
			v := string(r.Value)
			switch {
			case r.Value == nil:
				v = "<nil>"
			case long:
				v = fmt.Sprint(int64(binary.BigEndian.Uint64(r.Value)))
			}
			parts = append(parts, fmt.Sprintf("%s=%s@%d", r.Key, v, r.Timestamp.Sub(t0).Milliseconds()))
		}
		if got := strings.Join(parts, " "); got != w {
			t.Errorf("topic %s:\n got  %s\n want %s", topic, got, w)
		}
	}
}

func TestWordCount(t *testing.T) {
	check(t, eddytopo.WordCount, []in{
		{"wc-in", "k1", "Hello world", 10},
		{"wc-in", "k2", "hello", 5},
		{"wc-in", "k3", "<nil>", 20},
		{"wc-in", "k4", "World, HELLO!", 3},
	}, map[string]string{"wc-out": "hello=1@10 world=1@10 hello=2@10 world=2@10 hello=3@10"}, "wc-out")
}

func TestRekeyAgg(t *testing.T) {
	check(t, eddytopo.RekeyAgg, []in{
		{"orders", "o1", "alice:10", 10},
		{"orders", "o2", "bob:5", 20},
		{"orders", "o3", "<nil>", 5},
		{"orders", "o4", "alice:7", 3},
	}, map[string]string{
		"orders-total": "alice=10@10 bob=5@20 alice=17@10",
		"orders-count": "alice=1@10 bob=1@20 alice=2@10",
		"orders-agg":   "alice=10;@10 bob=5;@20 alice=10;7;@10",
	}, "orders-total", "orders-count")
}

func TestStreamTable(t *testing.T) {
	check(t, eddytopo.StreamTable, []in{
		{"users", "u1", "Ann", 1},
		{"clicks", "u1", "c1", 5},
		{"clicks", "u2", "c2", 6},
		{"clicks", "u1", "<nil>", 7},
		{"users", "u1", "<nil>", 8},
		{"clicks", "u1", "c3", 9},
	}, map[string]string{
		"clicks-inner": "u1=c1@Ann@5",
		"clicks-left":  "u1=c1@Ann@5 u2=c2@-@6 u1=c3@-@9",
	})
}

func TestTableTable(t *testing.T) {
	check(t, eddytopo.TableTable, []in{
		{"left-t", "k", "a1", 10},
		{"right-t", "k", "b1", 5},
		{"left-t", "k2", "<nil>", 1},
		{"right-t", "k", "<nil>", 20},
		{"left-t", "k", "<nil>", 30},
	}, map[string]string{
		"tt-inner": "k=a1+b1@10 k=<nil>@20",
		"tt-left":  "k=a1+-@10 k=a1+b1@10 k=a1+-@20 k=<nil>@30",
		"tt-outer": "k=a1+-@10 k=a1+b1@10 k=a1+-@20 k=<nil>@30",
	})
}

func TestTableGroupBy(t *testing.T) {
	check(t, eddytopo.TableGroupBy, []in{
		{"assign", "u1", "eu:10", 1},
		{"assign", "u2", "eu:5", 2},
		{"assign", "u1", "us:3", 3},
		{"assign", "u2", "<nil>", 4},
		{"assign", "u1", "us:4", 0},
	}, map[string]string{
		"region-sum":    "eu=10@1 eu=15@2 eu=5@3 us=3@3 eu=0@4 us=4@3",
		"region-count":  "eu=1@1 eu=2@2 eu=1@3 us=1@3 eu=0@4 us=1@3",
		"region-reduce": "eu=10@1 eu=15@2 eu=5@3 us=3@3 eu=0@4 us=4@3",
	}, "region-sum", "region-count", "region-reduce")
}

func TestSplitMerge(t *testing.T) {
	check(t, eddytopo.SplitMerge, []in{
		{"events", "k1", "apple", 1},
		{"events", "k2", "banana", 2},
		{"events", "k3", "<nil>", 3},
		{"events", "k4", "cherry", 4},
	}, map[string]string{
		"merged": "k1=APPLE@1 k2=banana@2",
		"other":  "k3=<nil>@3 k4=cherry@4",
	})
}

func TestFKJoin(t *testing.T) {
	check(t, eddytopo.FKJoin, []in{
		{"fk-products", "p1", "Pen", 1},
		{"fk-orders", "o1", "p1:2", 5},
		{"fk-orders", "o2", "p2:1", 6},
		{"fk-products", "p2", "Ink", 10},
		{"fk-orders", "o1", "p2:3", 7},     // moves from p1 to p2
		{"fk-products", "p2", "<nil>", 20}, // both orders lose their product
		{"fk-orders", "o2", "<nil>", 30},
		{"fk-orders", "o3", "p9:1", 40}, // p9 does not exist
		{"fk-orders", "o3", "p9:2", 41}, // unchanged foreign key, still no p9
	}, map[string]string{
		// Kafka Streams 4.1: an inner join's update with an unchanged foreign key is
		// sent only if the foreign value exists (no tombstone for o3)
		"fk-inner": "o1=p1:2/Pen@5 o2=p2:1/Ink@10 o1=p2:3/Ink@10 o1=<nil>@20 o2=<nil>@20 o2=<nil>@30",
		// a left join's move deletes the old subscription without an answer; its
		// deletion answers once, through the null foreign key
		"fk-left": "o1=p1:2/Pen@5 o2=p2:1/-@6 o2=p2:1/Ink@10 o1=p2:3/Ink@10 o1=p2:3/-@20 o2=p2:1/-@20 o2=<nil>@30 o3=p9:1/-@40 o3=p9:2/-@41",
	})
}

// With caching (Kafka Streams' default) a source table drops the tombstone of a key it
// does not hold; without, the joins see it.
func TestTableTableCaching(t *testing.T) {
	inputs := []in{{"right-t", "k2", "B", 1}, {"left-t", "k2", "<nil>", 2}}
	check(t, eddytopo.TableTable, inputs, map[string]string{
		"tt-inner": "", "tt-left": "", "tt-outer": "k2=-+B@1",
	})
	check(t, func() (*topology.Topology, error) { return eddytopo.Build("T4", stream.NoCaching()) }, inputs, map[string]string{
		"tt-inner": "k2=<nil>@2", "tt-left": "k2=<nil>@2", "tt-outer": "k2=-+B@1 k2=-+B@2",
	})
	if _, err := eddytopo.Build("T99"); err == nil {
		t.Error("Build(T99) made a topology")
	}
}

// The same for the foreign-key join: without caching, deleting a product that never
// existed answers every order that subscribed to it.
func TestFKJoinCaching(t *testing.T) {
	inputs := []in{{"fk-orders", "o1", "p9:1", 1}, {"fk-products", "p9", "<nil>", 2}}
	check(t, eddytopo.FKJoin, inputs, map[string]string{
		"fk-inner": "", "fk-left": "o1=p9:1/-@1",
	})
	check(t, func() (*topology.Topology, error) { return eddytopo.Build("T5", stream.NoCaching()) }, inputs, map[string]string{
		"fk-inner": "o1=<nil>@2", "fk-left": "o1=p9:1/-@1 o1=p9:1/-@2",
	})
}
