package kstreams

import (
	"context"
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// The tests of this package share one JVM: starting it (and building it the first
// time) is the slow part.
var shared struct {
	once   sync.Once
	oracle *Oracle
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.oracle != nil {
		shared.oracle.Close()
	}
	os.Exit(code)
}

// startOracle returns the package's oracle, starting it on first use. A build failure
// fails the test: the differential tests must run in CI, never be skipped.
func startOracle(t *testing.T) *Oracle {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		shared.oracle, shared.err = Start(ctx, Options{})
		t.Logf("Kafka Streams oracle built (if needed) and started in %v", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", shared.err)
	}
	return shared.oracle
}

func runOracle(t *testing.T, topology string, input []Record) map[string][]Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := startOracle(t).Run(ctx, topology, input)
	if err != nil {
		t.Fatalf("oracle %s: %v", topology, err)
	}
	return out
}

func in(topic, key string, value *string, ms int64) Record {
	r := Record{Topic: topic, Key: []byte(key), Timestamp: time.UnixMilli(ms)}
	if value != nil {
		r.Value = []byte(*value)
	}
	return r
}

// str is an expected output record with a String value.
func str(topic, key string, value *string, ms int64) Record { return in(topic, key, value, ms) }

func long(topic, key string, v int64, ms int64) Record {
	b := binary.BigEndian.AppendUint64(nil, uint64(v))
	return Record{Topic: topic, Key: []byte(key), Value: b, Timestamp: time.UnixMilli(ms)}
}

// The oracle's T4 output for a small input equals what the table-table join semantics
// give by hand: results carry the larger timestamp of the two sides, a deleted left
// side retracts the inner and left results, and an outer join keeps the right side.
func TestOracleT4ByHand(t *testing.T) {
	input := []Record{
		in("left-t", "k1", ptr("a1"), 10),
		in("right-t", "k1", ptr("b1"), 5),
		in("right-t", "k2", ptr("b2"), 7),
		in("left-t", "k1", nil, 20),
		in("right-t", "k2", nil, 30),
		in("left-t", "k3", ptr("a3"), 40),
	}
	want := map[string][]Record{
		"tt-inner": {
			str("tt-inner", "k1", ptr("a1+b1"), 10),
			str("tt-inner", "k1", nil, 20),
		},
		"tt-left": {
			str("tt-left", "k1", ptr("a1+-"), 10),
			str("tt-left", "k1", ptr("a1+b1"), 10),
			str("tt-left", "k1", nil, 20),
			str("tt-left", "k3", ptr("a3+-"), 40),
		},
		"tt-outer": {
			str("tt-outer", "k1", ptr("a1+-"), 10),
			str("tt-outer", "k1", ptr("a1+b1"), 10),
			str("tt-outer", "k2", ptr("-+b2"), 7),
			str("tt-outer", "k1", ptr("-+b1"), 20),
			str("tt-outer", "k2", nil, 30),
			str("tt-outer", "k3", ptr("a3+-"), 40),
		},
	}
	if d := Diff(want, runOracle(t, "T4", input)); d != "" {
		t.Errorf("T4 oracle output differs from the hand-computed one (want = by hand):\n%s", d)
	}
}

// T2 by hand: re-keyed by customer; records with a null value are ignored by reduce,
// count and aggregate; a result's timestamp is the largest of its inputs'.
func TestOracleT2ByHand(t *testing.T) {
	input := []Record{
		in("orders", "o1", ptr("alice:10"), 100),
		in("orders", "o2", ptr("bob:5"), 50),
		in("orders", "o3", ptr("alice:-3"), 70),
		in("orders", "o1", nil, 200),
		in("orders", "o4", ptr("bob:0"), 300),
	}
	want := map[string][]Record{
		"orders-total": {
			long("orders-total", "alice", 10, 100),
			long("orders-total", "bob", 5, 50),
			long("orders-total", "alice", 7, 100),
			long("orders-total", "bob", 5, 300),
		},
		"orders-count": {
			long("orders-count", "alice", 1, 100),
			long("orders-count", "bob", 1, 50),
			long("orders-count", "alice", 2, 100),
			long("orders-count", "bob", 2, 300),
		},
		"orders-agg": {
			str("orders-agg", "alice", ptr("10;"), 100),
			str("orders-agg", "bob", ptr("5;"), 50),
			str("orders-agg", "alice", ptr("10;-3;"), 100),
			str("orders-agg", "bob", ptr("5;0;"), 300),
		},
	}
	if d := Diff(want, runOracle(t, "T2", input)); d != "" {
		t.Errorf("T2 oracle output differs from the hand-computed one (want = by hand):\n%s", d)
	}
}

// Every topology runs on generated input and writes something to each output topic, so
// that no differential test can pass by comparing two empty outputs.
func TestOracleEveryTopologyWrites(t *testing.T) {
	for _, topo := range slices.Concat(Topologies, WindowTopologies) {
		input, err := Inputs(topo, 1, 200)
		if err != nil {
			t.Fatal(err)
		}
		out := runOracle(t, topo, input)
		if got := slices.Sorted(maps.Keys(out)); !slices.Equal(got, slices.Sorted(slices.Values(Outputs[topo]))) {
			t.Errorf("%s: output topics %v, want %v", topo, got, Outputs[topo])
		}
		for _, topic := range Outputs[topo] {
			if len(out[topic]) == 0 {
				t.Errorf("%s: nothing written to %s", topo, topic)
			}
		}
	}
}

func TestOracleRejectsUnknownTopologyAndGoesOn(t *testing.T) {
	o := startOracle(t)
	_, err := o.Run(context.Background(), "T99", nil)
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("Run(T99) = %v, want ErrRejected", err)
	}
	_, err = o.Run(context.Background(), "T1", []Record{in("no-such-topic", "k", ptr("v"), 1)})
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("Run(T1, unknown input topic) = %v, want ErrRejected", err)
	}
	if out := runOracle(t, "T1", []Record{in("wc-in", "k", ptr("a b a"), 1)}); len(out["wc-out"]) != 3 {
		t.Fatalf("after rejected requests, T1 gave %v, want 3 records", out)
	}
}

func TestInputsAreSeededAndVaried(t *testing.T) {
	for _, topo := range slices.Concat(Topologies, WindowTopologies) {
		a, _ := Inputs(topo, 7, 300)
		b, _ := Inputs(topo, 7, 300)
		c, _ := Inputs(topo, 8, 300)
		if Diff(map[string][]Record{"x": a}, map[string][]Record{"x": b}) != "" {
			t.Errorf("%s: the same seed gave different inputs", topo)
		}
		if Diff(map[string][]Record{"x": a}, map[string][]Record{"x": c}) == "" {
			t.Errorf("%s: seeds 7 and 8 gave the same inputs", topo)
		}
		var tombstones, outOfOrder int
		keys := map[string]int{}
		for i, r := range a {
			if r.Value == nil {
				tombstones++
			}
			if i > 0 && r.Timestamp.Before(a[i-1].Timestamp) {
				outOfOrder++
			}
			keys[r.Topic+"/"+string(r.Key)]++
		}
		if tombstones == 0 || outOfOrder == 0 || len(keys) > 60 {
			t.Errorf("%s: %d tombstones, %d out-of-order timestamps, %d distinct keys in 300 records", topo, tombstones, outOfOrder, len(keys))
		}
	}
}

func TestWords(t *testing.T) {
	for line, want := range map[string][]string{
		"":                          nil,
		"Hello, hello World!":       {"hello", "hello", "world"},
		" state_store x86_64 don't": {"state_store", "x86_64", "don", "t"},
		"Straße ÉCOLE naïve":        {"stra", "e", "cole", "na", "ve"},
		"KİK \u212Aelvin":           {"ki", "k", "kelvin"},
		"東京 😀ok😀 ٣٤":                {"ok"},
	} {
		if got := Words(line); !slices.Equal(got, want) {
			t.Errorf("Words(%q) = %q, want %q", line, got, want)
		}
	}
}

// Diff sees every kind of difference the contract names, and none where there is none.
func TestDiff(t *testing.T) {
	base := []Record{str("t", "k", ptr("v"), 5), str("t", "k2", ptr(""), 6)}
	same := []Record{str("t", "k", ptr("v"), 5), str("t", "k2", ptr(""), 6)}
	if d := Diff(map[string][]Record{"t": base}, map[string][]Record{"t": same}); d != "" {
		t.Errorf("equal outputs differ:\n%s", d)
	}
	for name, other := range map[string][]Record{
		"timestamp":             {str("t", "k", ptr("v"), 6), str("t", "k2", ptr(""), 6)},
		"value bytes":           {str("t", "k", ptr("w"), 5), str("t", "k2", ptr(""), 6)},
		"key bytes":             {str("t", "K", ptr("v"), 5), str("t", "k2", ptr(""), 6)},
		"tombstone vs empty":    {str("t", "k", ptr("v"), 5), str("t", "k2", nil, 6)},
		"order":                 {str("t", "k2", ptr(""), 6), str("t", "k", ptr("v"), 5)},
		"a record missing":      {str("t", "k", ptr("v"), 5)},
		"a record too many":     {str("t", "k", ptr("v"), 5), str("t", "k2", ptr(""), 6), str("t", "k2", ptr(""), 6)},
		"null key vs empty key": {{Topic: "t", Key: nil, Value: []byte("v"), Timestamp: time.UnixMilli(5)}, str("t", "k2", ptr(""), 6)},
	} {
		if name == "null key vs empty key" {
			base := []Record{{Topic: "t", Key: []byte{}, Value: []byte("v"), Timestamp: time.UnixMilli(5)}, str("t", "k2", ptr(""), 6)}
			if Diff(map[string][]Record{"t": base}, map[string][]Record{"t": other}) == "" {
				t.Errorf("%s: no difference reported", name)
			}
			continue
		}
		if Diff(map[string][]Record{"t": base}, map[string][]Record{"t": other}) == "" {
			t.Errorf("%s: no difference reported", name)
		}
	}
	if Diff(map[string][]Record{"t": base}, map[string][]Record{"t": base, "u": nil}) == "" {
		t.Error("an extra topic on eddy's side: no difference reported")
	}
	if Diff(map[string][]Record{"t": base, "u": nil}, map[string][]Record{"t": base}) == "" {
		t.Error("a topic missing on eddy's side: no difference reported")
	}
}

// A Run whose context ends first kills the JVM: later Runs fail with ErrDead (an
// answer arriving late would be taken for the next request's), and Close returns.
func TestRunCanceledKillsTheOracle(t *testing.T) {
	o, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", err)
	}
	input, _ := Inputs("T5", 1, 3000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := o.Run(ctx, "T5", input); !errors.Is(err, ErrDead) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run with a context that ends first = %v, want ErrDead and DeadlineExceeded", err)
	}
	if _, err := o.Run(context.Background(), "T1", nil); !errors.Is(err, ErrDead) {
		t.Fatalf("Run after a kill = %v, want ErrDead", err)
	}
	done := make(chan error, 1)
	go func() { done <- o.Close() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30 s of the JVM's kill")
	}
}
