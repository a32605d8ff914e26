//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/partition"
)

// dataset is a topic the parent wrote.
type dataset struct {
	Topic      string
	Partitions int32
	Records    int64   // data records
	Bytes      int64   // key and value bytes
	Units      int64   // what rows reading it count: records, or words for the word-count lines
	Keys       int64   // word-count lines: the distinct words they hold
	PerPart    []int64 // data records per partition
}

// record is one record to write.
type record struct {
	key, value []byte
	partition  int32
	ts         time.Time // the record's timestamp; zero: the producer's clock
}

// benchKey is key i of a fixed key space of 16-byte keys in random order (a bijective
// mix of i, then i).
func benchKey(i uint64) []byte {
	x := i*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), x)
	return binary.BigEndian.AppendUint64(k, i)
}

// randomValue is n random lower-case letters.
func randomValue(rng *rand.Rand, n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = byte('a' + rng.IntN(26))
	}
	return v
}

// keyed makes record i of a keyed topic: key i of the key space (or a random one of
// [0, space) when random), a random value, the partition Kafka's default partitioner
// (murmur2) gives the key, so that eddy's sinks write each record to the partition
// number it was read from.
func keyed(rng *rand.Rand, valueSize int, partitions int32, space int, random bool) func(i int) record {
	return func(i int) record {
		k := uint64(i)
		if random {
			k = uint64(rng.IntN(space))
		}
		key := benchKey(k)
		return record{key: key, value: randomValue(rng, valueSize), partition: partition.ForKey(key, partitions)}
	}
}

// events makes the windowed count's input: n records of keys drawn uniformly from a key
// space of keys keys, their timestamps spread evenly over span of event time from start
// in the order they are written (so every partition's are in order and none is late for
// windows without grace), with random values of valueSize bytes.
func events(rng *rand.Rand, valueSize int, partitions int32, keys, n int, start time.Time, span time.Duration) func(i int) record {
	gen := keyed(rng, valueSize, partitions, keys, true)
	return func(i int) record {
		r := gen(i)
		r.ts = start.Add(time.Duration(int64(span) / int64(n) * int64(i))).Truncate(time.Millisecond)
		return r
	}
}

// vocabulary makes n distinct lower-case words of 3 to 10 letters.
func vocabulary(rng *rand.Rand, n int) []string {
	seen := map[string]bool{}
	out := make([]string, 0, n)
	var b strings.Builder
	for len(out) < n {
		b.Reset()
		for range 3 + rng.IntN(8) {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		w := b.String()
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// lines makes word-count input: unkeyed lines of at most maxLen bytes, words drawn
// uniformly from a vocabulary, round robin over the partitions, until words words are
// written. It returns the records, the words written and how many of the vocabulary's
// words they hold (uniform draws of n words from n hit about 1 - 1/e = 63% of them).
func lines(rng *rand.Rand, vocab []string, words, maxLen int, partitions int32) ([]record, int64, int64) {
	var out []record
	var total, distinct int64
	used := make([]bool, len(vocab))
	var b strings.Builder
	for total < int64(words) {
		b.Reset()
		n := 0
		for total+int64(n) < int64(words) {
			i := rng.IntN(len(vocab))
			w := vocab[i]
			if b.Len()+1+len(w) > maxLen && n > 0 {
				break
			}
			if n > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			if !used[i] {
				used[i] = true
				distinct++
			}
			n++
		}
		if got := len(wordcount.Words(b.String())); got != n {
			panic(fmt.Sprintf("bench: line %q has %d words for wordcount, %d generated", b.String(), got, n))
		}
		out = append(out, record{value: []byte(b.String()), partition: int32(len(out)) % partitions})
		total += int64(n)
	}
	return out, total, distinct
}

// produce writes n records made by gen to topic, idempotently with acks=all, or in
// transactions of txnEvery records when txnID is set (as a changelog is written), and
// waits for every acknowledgement.
func (e *env) produce(ctx context.Context, topic string, partitions int32, n int, gen func(i int) record, txnID string, txnEvery int) (*dataset, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = e.o.prefix + "-writer"
	cfg.Version = sarama.V3_9_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Bytes = 1 << 20
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.MaxMessageBytes = 4 << 20
	if txnID != "" {
		cfg.Producer.Transaction.ID = txnID
		cfg.Producer.Transaction.Timeout = 60 * time.Second
	}
	prod, err := sarama.NewAsyncProducer(e.o.brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("producer for %s: %w", topic, err)
	}
	ds := &dataset{Topic: topic, Partitions: partitions, PerPart: make([]int64, partitions)}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	fly := newInflight()
	wg.Go(func() {
		for range prod.Successes() {
			fly.done()
		}
	})
	wg.Go(func() {
		for pe := range prod.Errors() {
			mu.Lock()
			errs = append(errs, pe)
			mu.Unlock()
			fly.done()
		}
	})
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(errs) > 0
	}
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for i := 0; i < n && ctx.Err() == nil && !failed(); i++ {
		if txnID != "" && i%txnEvery == 0 {
			if i > 0 {
				fly.waitBelow(1)
				if err := prod.CommitTxn(); err != nil {
					fail(fmt.Errorf("commit: %w", err))
					break
				}
			}
			if err := prod.BeginTxn(); err != nil {
				fail(fmt.Errorf("begin: %w", err))
				break
			}
		}
		r := gen(i)
		msg := &sarama.ProducerMessage{Topic: topic, Partition: r.partition, Value: sarama.ByteEncoder(r.value)}
		if r.key != nil {
			msg.Key = sarama.ByteEncoder(r.key)
		}
		if !r.ts.IsZero() {
			msg.Timestamp = r.ts
		}
		fly.waitBelow(50_000) // bound the records in flight
		fly.add()
		prod.Input() <- msg
		ds.Records++
		ds.Bytes += int64(len(r.key) + len(r.value))
		ds.PerPart[r.partition]++
	}
	fly.waitBelow(1)
	if txnID != "" && ds.Records > 0 && !failed() {
		if err := prod.CommitTxn(); err != nil {
			fail(fmt.Errorf("commit: %w", err))
		}
	}
	err = prod.Close()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(append(errs, err, ctx.Err())...); err != nil {
		return nil, fmt.Errorf("write %s: %w", topic, err)
	}
	ds.Units = ds.Records
	return ds, nil
}

// produceMarkers writes one small record to each partition of topic (so every task of
// a restore row has a record to process once it resumes).
func (e *env) produceMarkers(ctx context.Context, ds *dataset, round int) error {
	add, err := e.produce(ctx, ds.Topic, ds.Partitions, int(ds.Partitions), func(i int) record {
		return record{key: fmt.Appendf(nil, "resume-%d-%d", round, i), value: []byte("resume"), partition: int32(i)}
	}, "", 0)
	if err != nil {
		return err
	}
	ds.add(add)
	return nil
}

// add counts records written to the same topic later.
func (ds *dataset) add(more *dataset) {
	ds.Records += more.Records
	ds.Bytes += more.Bytes
	ds.Units += more.Units
	for p, n := range more.PerPart {
		ds.PerPart[p] += n
	}
}

// inflight counts records sent and not yet acknowledged.
type inflight struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func newInflight() *inflight {
	f := &inflight{}
	f.cond = sync.NewCond(&f.mu)
	return f
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	f.cond.Broadcast()
	f.mu.Unlock()
}

// waitBelow waits until fewer than limit records are in flight.
func (f *inflight) waitBelow(limit int) {
	f.mu.Lock()
	for f.n >= limit {
		f.cond.Wait()
	}
	f.mu.Unlock()
}
