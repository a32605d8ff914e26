package eddytopo_test

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/kstreams/eddytopo"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
)

// The differential suite compares these topologies with Kafka Streams record by
// record. These tests feed them seeded random input of the same kind (colliding keys,
// tombstones, out-of-order timestamps) and check what needs no oracle: nothing fails,
// and the final state of each output topic, read as a compacted topic, is what the
// final input tables or streams imply.

type randomInput struct {
	r *rand.Rand
}

func (g randomInput) key(prefix string, n int) string { return prefix + strconv.Itoa(g.r.IntN(n)) }
func (g randomInput) ms() int64                       { return g.r.Int64N(1000) }
func (g randomInput) tomb(p float64) bool             { return g.r.Float64() < p }

// feed runs topology name ("T1" …) on inputs, with caching and without, and returns
// each topic's compacted state (tombstones delete; long topics rendered as numbers).
// Both runs must end in the same state; only the records on the way may differ.
func feed(t *testing.T, name string, inputs []in, long map[string]bool, topics ...string) map[string]map[string]string {
	t.Helper()
	cached := feedWith(t, name, nil, inputs, long, topics...)
	uncached := feedWith(t, name, []stream.BuilderOption{stream.NoCaching()}, inputs, long, topics...)
	for _, topic := range topics {
		same(t, topic+" (without caching)", uncached[topic], cached[topic])
	}
	return cached
}

func feedWith(t *testing.T, name string, opts []stream.BuilderOption, inputs []in, long map[string]bool, topics ...string) map[string]map[string]string {
	t.Helper()
	topo, err := eddytopo.Build(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, r := range inputs {
		var v []byte
		if r.value != "<nil>" {
			v = []byte(r.value)
		}
		if err := d.PipeRaw(r.topic, []byte(r.key), v, nil, t0.Add(time.Duration(r.ms)*time.Millisecond)); err != nil {
			t.Fatalf("input %d %+v: %v", i, r, err)
		}
	}
	out := map[string]map[string]string{}
	for _, topic := range topics {
		m := map[string]string{}
		for _, r := range d.Records(topic) {
			switch {
			case r.Value == nil:
				delete(m, string(r.Key))
			case long[topic]:
				m[string(r.Key)] = fmt.Sprint(int64(binary.BigEndian.Uint64(r.Value)))
			default:
				m[string(r.Key)] = string(r.Value)
			}
		}
		out[topic] = m
	}
	return out
}

func same(t *testing.T, topic string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("%s: final state\n got  %v\n want %v", topic, got, want)
	}
}

func seeds(t *testing.T, f func(t *testing.T, g randomInput)) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { f(t, randomInput{rand.New(rand.NewPCG(seed, 7))}) })
	}
}

func TestRandomRekeyAgg(t *testing.T) {
	seeds(t, func(t *testing.T, g randomInput) {
		var inputs []in
		total, count, agg := map[string]string{}, map[string]string{}, map[string]string{}
		sums, counts := map[string]int64{}, map[string]int64{}
		for range 200 {
			if g.tomb(0.2) {
				inputs = append(inputs, in{"orders", g.key("o", 30), "<nil>", g.ms()})
				continue
			}
			c, a := g.key("c", 5), g.r.Int64N(100)
			inputs = append(inputs, in{"orders", g.key("o", 30), fmt.Sprintf("%s:%d", c, a), g.ms()})
			sums[c] += a
			counts[c]++
			total[c] = fmt.Sprint(sums[c])
			count[c] = fmt.Sprint(counts[c])
			agg[c] += fmt.Sprint(a) + ";"
		}
		got := feed(t, "T2", inputs, map[string]bool{"orders-total": true, "orders-count": true}, "orders-total", "orders-count", "orders-agg")
		same(t, "orders-total", got["orders-total"], total)
		same(t, "orders-count", got["orders-count"], count)
		same(t, "orders-agg", got["orders-agg"], agg)
	})
}

func TestRandomTableTable(t *testing.T) {
	seeds(t, func(t *testing.T, g randomInput) {
		var inputs []in
		l, r := map[string]string{}, map[string]string{}
		for i := range 300 {
			topic, m := "left-t", l
			if g.r.IntN(2) == 0 {
				topic, m = "right-t", r
			}
			k := g.key("k", 8)
			if g.tomb(0.3) {
				inputs = append(inputs, in{topic, k, "<nil>", g.ms()})
				delete(m, k)
				continue
			}
			v := fmt.Sprint(topic[:1], i)
			inputs = append(inputs, in{topic, k, v, g.ms()})
			m[k] = v
		}
		inner, left, outer := map[string]string{}, map[string]string{}, map[string]string{}
		dash := func(m map[string]string, k string) string {
			if v, ok := m[k]; ok {
				return v
			}
			return "-"
		}
		for k := range l {
			left[k] = l[k] + "+" + dash(r, k)
			outer[k] = left[k]
			if _, ok := r[k]; ok {
				inner[k] = left[k]
			}
		}
		for k := range r {
			outer[k] = dash(l, k) + "+" + r[k]
		}
		got := feed(t, "T4", inputs, nil, "tt-inner", "tt-left", "tt-outer")
		same(t, "tt-inner", got["tt-inner"], inner)
		same(t, "tt-left", got["tt-left"], left)
		same(t, "tt-outer", got["tt-outer"], outer)
	})
}

func TestRandomFKJoin(t *testing.T) {
	seeds(t, func(t *testing.T, g randomInput) {
		var inputs []in
		orders, products := map[string]string{}, map[string]string{}
		for i := range 300 {
			if g.r.IntN(3) == 0 {
				p := g.key("p", 5)
				if g.tomb(0.3) {
					inputs = append(inputs, in{"fk-products", p, "<nil>", g.ms()})
					delete(products, p)
				} else {
					name := fmt.Sprint("n", i)
					inputs = append(inputs, in{"fk-products", p, name, g.ms()})
					products[p] = name
				}
				continue
			}
			o := g.key("o", 10)
			if g.tomb(0.2) {
				inputs = append(inputs, in{"fk-orders", o, "<nil>", g.ms()})
				delete(orders, o)
			} else {
				v := fmt.Sprintf("%s:%d", g.key("p", 6), i)
				inputs = append(inputs, in{"fk-orders", o, v, g.ms()})
				orders[o] = v
			}
		}
		inner, left := map[string]string{}, map[string]string{}
		for o, v := range orders {
			p, _, _ := strings.Cut(v, ":")
			if name, ok := products[p]; ok {
				inner[o] = v + "/" + name
				left[o] = inner[o]
			} else {
				left[o] = v + "/-"
			}
		}
		got := feed(t, "T5", inputs, nil, "fk-inner", "fk-left")
		same(t, "fk-inner", got["fk-inner"], inner)
		same(t, "fk-left", got["fk-left"], left)
	})
}

func TestRandomTableGroupBy(t *testing.T) {
	seeds(t, func(t *testing.T, g randomInput) {
		var inputs []in
		assign := map[string]string{}
		touched := map[string]bool{}
		for range 300 {
			u := g.key("u", 12)
			if g.tomb(0.25) {
				inputs = append(inputs, in{"assign", u, "<nil>", g.ms()})
				delete(assign, u)
				continue
			}
			v := fmt.Sprintf("%s:%d", g.key("r", 4), g.r.Int64N(50))
			inputs = append(inputs, in{"assign", u, v, g.ms()})
			assign[u] = v
			region, _, _ := strings.Cut(v, ":")
			touched[region] = true
		}
		sum, count := map[string]string{}, map[string]string{}
		sums, counts := map[string]int64{}, map[string]int64{}
		for _, v := range assign {
			region, amount, _ := strings.Cut(v, ":")
			n, _ := strconv.ParseInt(amount, 10, 64)
			sums[region] += n
			counts[region]++
		}
		// a region keeps its aggregate (0 when emptied): no subtractor result is null
		for region := range touched {
			sum[region] = fmt.Sprint(sums[region])
			count[region] = fmt.Sprint(counts[region])
		}
		long := map[string]bool{"region-sum": true, "region-count": true, "region-reduce": true}
		got := feed(t, "T6", inputs, long, "region-sum", "region-count", "region-reduce")
		same(t, "region-sum", got["region-sum"], sum)
		same(t, "region-count", got["region-count"], count)
		same(t, "region-reduce", got["region-reduce"], sum)
	})
}
