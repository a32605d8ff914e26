package topologytest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// lookup forwards, for each record, the global store "rates"'s value of the record's
// value (or "none"); a record with value "write" tries to write the store instead.
type lookup struct {
	ctx   processor.Context[string, string]
	rates statestore.KeyValueStore[string, string]
}

func (l *lookup) Init(ctx processor.Context[string, string]) (err error) {
	l.ctx = ctx
	l.rates, err = processor.KeyValueStore[string, string](ctx, "rates")
	return err
}
func (l *lookup) Close() error { return nil }
func (l *lookup) Process(r processor.Record[string, string]) error {
	if r.Value == "write" {
		return l.rates.Put("x", "y")
	}
	v, ok, err := l.rates.Get(r.Value)
	if err != nil {
		return err
	}
	if !ok {
		v = "none"
	}
	return l.ctx.Forward(processor.WithValue(r, r.Value+"="+v))
}

func globalDriver(t *testing.T) *topologytest.Driver {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddGlobalStore(b, "rates", "rates-topic", serde.String(), serde.String())
	topology.AddSource(b, "in", serde.String(), serde.String(), "in")
	topology.AddProcessor(b, "lookup", func() processor.Processor[string, string, string, string] { return &lookup{} }, "in")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "lookup")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// A record piped to a global store's topic updates the store before the next record;
// every processor reads it without attaching it; a tombstone deletes; a null key is
// dropped; writes from a processor fail.
func TestGlobalStoreFollowsItsTopic(t *testing.T) {
	d := globalDriver(t)
	pipe := func(topic string, key, value []byte) {
		t.Helper()
		if err := d.PipeRaw(topic, key, value, nil, start); err != nil {
			t.Fatal(err)
		}
	}
	pipe("in", []byte("k"), []byte("eur"))
	pipe("rates-topic", []byte("eur"), []byte("1.1"))
	pipe("rates-topic", nil, []byte("ignored"))
	pipe("in", []byte("k"), []byte("eur"))
	pipe("rates-topic", []byte("eur"), nil)
	pipe("in", []byte("k"), []byte("eur"))
	var got []string
	for _, r := range d.Records("out") {
		got = append(got, string(r.Value))
	}
	if want := "eur=none eur=1.1 eur=none"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
	err := d.PipeRaw("in", []byte("k"), []byte("write"), nil, start)
	if !errors.Is(err, topology.ErrReadOnlyStore) {
		t.Errorf("a write to a global store: got %v, want ErrReadOnlyStore", err)
	}
	// Tests read it like any store.
	pipe("rates-topic", []byte("usd"), []byte("1.0"))
	kv, err := topologytest.KeyValueStore[string, string](d, "rates")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := kv.Get("usd"); err != nil || !ok || v != "1.0" {
		t.Errorf("rates[usd] = %q, %v, %v", v, ok, err)
	}
}

// A global store's topic read by a source too is refused at Build, naming both.
func TestGlobalStoreTopicReadTwiceRefused(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddGlobalStore(b, "rates", "rates-topic", serde.String(), serde.String())
	topology.AddSource(b, "in", serde.String(), serde.String(), "rates-topic")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "in")
	_, err := b.Build()
	if err == nil || !strings.Contains(err.Error(), `source "in" and global store "rates" both read topic "rates-topic"`) {
		t.Fatalf("got %v", err)
	}
}

// Describe lists global stores.
func TestDescribeShowsGlobalStores(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddGlobalStore(b, "rates", "rates-topic", serde.String(), serde.String())
	topology.AddSource(b, "in", serde.String(), serde.String(), "in")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := topo.Describe(); !strings.Contains(d, "Global store: rates (topic: rates-topic") {
		t.Errorf("Describe() lacks the global store:\n%s", d)
	}
}
