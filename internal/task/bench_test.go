package task_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// Benchmarks of the task engine: one record through a small topology (source
// deserializes, processors run, sinks serialize and hand the record to the collector),
// with a memory store backend and a collector that drops what it gets, so that only
// eddy's own per-record work is measured (no Kafka client, no bbolt). The store-buffer
// benchmarks measure the write buffer every store write and read goes through, and a
// commit's LogChanges + Flush of its dirty keys.
//
//	go test -run '^$' -bench . -benchmem -count 10 ./internal/task/ | tee new.txt
//	benchstat old.txt new.txt

// nopCollector drops sink records; every topic has 8 partitions.
type nopCollector struct{ sent int }

func (c *nopCollector) Send(string, int32, []byte, []byte, []processor.Header, time.Time) error {
	c.sent++
	return nil
}

func (c *nopCollector) Partitions(string) (int32, error) { return 8, nil }

// benchTask runs sub-topology sub of topo as task <sub>_3 over a memory backend.
func benchTask(b *testing.B, topo *topology.Topology, sub int) (*task.Task, *kvstore.Set, *nopCollector) {
	b.Helper()
	g := graph.Of(topo)
	c := &nopCollector{}
	set := kvstore.NewSet(kvstore.NewMemoryBackend())
	tk, err := task.New(task.Config{
		ID: processor.TaskID{Subtopology: sub, Partition: 3}, ApplicationID: "app", Graph: g,
		Subtopology: g.Subtopologies[sub], Stores: set, Collector: c,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tk.Close(); _ = set.Close() })
	if err := tk.Init(); err != nil {
		b.Fatal(err)
	}
	return tk, set, c
}

func mustBuild(b *testing.B, bld *topology.Builder) *topology.Topology {
	b.Helper()
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	return topo
}

func benchKey(i uint64) []byte {
	x := i*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), x), i)
}

// kvPut puts every record into the store "kv".
type kvPut struct {
	store statestore.KeyValueStore[[]byte, []byte]
}

func (p *kvPut) Init(ctx processor.Context[[]byte, []byte]) (err error) {
	p.store, err = processor.KeyValueStore[[]byte, []byte](ctx, "kv")
	return err
}

func (p *kvPut) Process(rec processor.Record[[]byte, []byte]) error {
	return p.store.Put(rec.Key, rec.Value)
}

func (p *kvPut) Close() error { return nil }

// nopWriter takes changelog records and drops them.
type nopWriter struct{ n int }

func (w *nopWriter) WriteChange(string, []byte, []byte) error {
	w.n++
	return nil
}

// BenchmarkProcess: ns, bytes and allocations per record through Task.Process.
func BenchmarkProcess(b *testing.B) {
	value := []byte(strings.Repeat("abcdefghij", 10)) // 100 bytes, as in integration/bench
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = benchKey(uint64(i))
	}
	run := func(b *testing.B, tk *task.Task, topic string, rec func(i int) graph.RawRecord) {
		b.ReportAllocs()
		b.SetBytes(int64(len(value)))
		i := 0
		for b.Loop() {
			if err := tk.Process(rec(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	keyed := func(topic string) func(int) graph.RawRecord {
		return func(i int) graph.RawRecord {
			return graph.RawRecord{Topic: topic, Partition: 3, Offset: int64(i), Key: keys[i%len(keys)], Value: value, Timestamp: time.UnixMilli(int64(i))}
		}
	}

	b.Run("passthrough-bytes", func(b *testing.B) {
		bld := topology.NewBuilder()
		topology.AddSource(bld, "in", serde.Bytes(), serde.Bytes(), "input")
		topology.AddSink(bld, "out", "output", serde.Bytes(), serde.Bytes(), "in")
		tk, _, _ := benchTask(b, mustBuild(b, bld), 0)
		run(b, tk, "input", keyed("input"))
	})
	b.Run("passthrough-string", func(b *testing.B) {
		bld := topology.NewBuilder()
		topology.AddSource(bld, "in", serde.String(), serde.String(), "input")
		topology.AddSink(bld, "out", "output", serde.String(), serde.String(), "in")
		tk, _, _ := benchTask(b, mustBuild(b, bld), 0)
		run(b, tk, "input", keyed("input"))
	})
	b.Run("map-filter-string", func(b *testing.B) {
		bld := topology.NewBuilder()
		topology.AddSource(bld, "in", serde.String(), serde.String(), "input")
		topology.AddProcessor(bld, "upper", processor.MapValues[string](func(v string) (string, error) { return strings.ToUpper(v), nil }), "in")
		topology.AddProcessor(bld, "keep", processor.Filter(func(r processor.Record[string, string]) bool { return len(r.Value) > 0 }), "upper")
		topology.AddSink(bld, "out", "output", serde.String(), serde.String(), "keep")
		tk, _, _ := benchTask(b, mustBuild(b, bld), 0)
		run(b, tk, "input", keyed("input"))
	})
	b.Run("kv-put", func(b *testing.B) {
		bld := topology.NewBuilder()
		topology.AddSource(bld, "in", serde.Bytes(), serde.Bytes(), "input")
		topology.AddProcessor(bld, "put", func() processor.Processor[[]byte, []byte, []byte, []byte] { return &kvPut{} }, "in")
		topology.AddKeyValueStore(bld, "kv", serde.Bytes(), serde.Bytes(), "put")
		tk, _, _ := benchTask(b, mustBuild(b, bld), 0)
		run(b, tk, "input", keyed("input"))
	})

	// Word count: sub-topology 0 splits a line into words and writes them to the
	// repartition topic; sub-topology 1 counts words in a store and writes the counts.
	topo, err := wordcount.TopologyFor("lines", "counts", wordcount.NoCaching()) // every count forwarded, as before caching
	if err != nil {
		b.Fatal(err)
	}
	line := []byte("the quick brown fox jumps over the lazy dog while seven zebras quietly graze nearby")
	words := wordcount.Words(string(line))
	b.Run(fmt.Sprintf("wordcount-split/%dwords", len(words)), func(b *testing.B) {
		tk, _, _ := benchTask(b, topo, 0)
		run(b, tk, "lines", func(i int) graph.RawRecord {
			return graph.RawRecord{Topic: "lines", Partition: 3, Offset: int64(i), Value: line, Timestamp: time.UnixMilli(int64(i))}
		})
	})
	b.Run("wordcount-count", func(b *testing.B) {
		tk, _, _ := benchTask(b, topo, 1)
		topic := tk.SourceTopics()[0]
		vocab := make([][]byte, 10_000)
		for i := range vocab {
			vocab[i] = fmt.Appendf(nil, "word%d", i)
		}
		run(b, tk, topic, func(i int) graph.RawRecord {
			w := vocab[(i*7919)%len(vocab)]
			return graph.RawRecord{Topic: topic, Partition: 3, Offset: int64(i), Key: w, Value: w, Timestamp: time.UnixMilli(int64(i))}
		})
	})
}

// BenchmarkStoreBuffer: the write buffer of a store (kvstore.Buffer under the typed
// store), over a memory backend holding 100k keys.
func BenchmarkStoreBuffer(b *testing.B) {
	const backendKeys = 100_000
	value := []byte(strings.Repeat("v", 100))
	setup := func(b *testing.B) (*kvstore.Set, statestore.KeyValueStore[[]byte, []byte]) {
		b.Helper()
		be := kvstore.NewMemoryBackend()
		es := make([]kvstore.Entry, backendKeys)
		for i := range es {
			es[i] = kvstore.Entry{Key: benchKey(uint64(i)), Value: value}
		}
		kvstore.SortEntries(es)
		if err := be.Write(kvstore.Batch{Writes: map[string][]kvstore.Entry{"kv": es}}); err != nil {
			b.Fatal(err)
		}
		set := kvstore.NewSet(be)
		buf, err := set.Register("kv", true)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = set.Close() })
		return set, kvstore.NewKeyValueStore(buf, "app-kv-changelog", serde.Bytes(), serde.Bytes(), nil)
	}
	b.Run("put", func(b *testing.B) {
		set, kv := setup(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := kv.Put(benchKey(uint64(i%1024)), value); err != nil {
				b.Fatal(err)
			}
			i++
		}
		_ = set
	})
	b.Run("get-buffered", func(b *testing.B) {
		_, kv := setup(b)
		key := benchKey(backendKeys + 1)
		if err := kv.Put(key, value); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := kv.Get(key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get-backend", func(b *testing.B) {
		_, kv := setup(b)
		key := benchKey(42)
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := kv.Get(key); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	// A commit cycle of the store: N puts (updates of keys the backend holds, so that it
	// does not grow), one changelog record per dirty key (dropped), then the flush into
	// the backend. ns/op is per cycle; the puts alone cost N × BenchmarkStoreBuffer/put.
	// (No StopTimer: with -benchmem it reads memory statistics, which costs more than a
	// small commit.)
	for _, dirty := range []int{100, 1000, 10_000} {
		b.Run(fmt.Sprintf("put+commit/dirty=%d", dirty), func(b *testing.B) {
			set, kv := setup(b)
			w := &nopWriter{}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for j := range dirty {
					if err := kv.Put(benchKey(uint64(n*dirty+j)%backendKeys), value); err != nil {
						b.Fatal(err)
					}
				}
				n++
				if err := set.LogChanges(w); err != nil {
					b.Fatal(err)
				}
				if err := set.Flush(map[string]int64{"kv": int64(n)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
